//! telos-gate binary: parse settings, set up logs, traces and metrics, bind, serve.

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use telos_gate::Cli;
use telos_gate::config_tls::PlayersTls;
use telos_gate::directory::DirectoryRegistry;
use telos_gate::player_tls::PlayerTls;
use telos_gate::web::WebListeners;
use telos_gate::{Listeners, serve_all};
use telos_redis::target::RedisTarget;
use telos_telemetry::health::Health;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

#[cfg(all(feature = "mimalloc", feature = "jemalloc"))]
compile_error!("the mimalloc and jemalloc features each pick the gate's allocator: enable one");

/// Only with the `mimalloc` feature, for `scripts/bench gatemem`.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Only with the `jemalloc` feature, for `scripts/bench gatemem`.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read at its start: background threads purge freed
/// pages a second after they go unused (jemalloc's default waits 10 s).
#[cfg(feature = "jemalloc")]
#[unsafe(export_name = "_rjem_malloc_conf")]
static JEMALLOC_CONF: &u8 = &b"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0\0"[0];

fn fail(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("telos-gate: {msg}");
    ExitCode::FAILURE
}

/// The players' plain telnet listener (`--listen`), bound, and where.
async fn bind_telnet(listen: SocketAddr) -> Result<(TcpListener, SocketAddr), String> {
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|e| format!("invalid listen (--listen / TELOS_GATE_LISTEN) {listen}: {e}"))?;
    let local = listener
        .local_addr()
        .map_err(|e| format!("listen socket: {e}"))?;
    Ok((listener, local))
}

/// Telnet over TLS for players (`--tls-listen`), bound, with its
/// certificate.
async fn bind_players_tls(
    players_tls: Option<&PlayersTls>,
) -> Result<Option<(TcpListener, Arc<PlayerTls>)>, String> {
    let Some((listen, cert)) = players_tls.and_then(|t| t.listen.map(|l| (l, t.tls.clone())))
    else {
        return Ok(None);
    };
    match TcpListener::bind(listen).await {
        Ok(l) => Ok(Some((l, cert))),
        Err(e) => Err(format!(
            "invalid tls_listen (--tls-listen / TELOS_GATE_TLS_LISTEN) {listen}: {e}"
        )),
    }
}

/// The web client's listener (`--web-listen`), bound and announced.
async fn bind_web(
    listen: Option<SocketAddr>,
    web_tls: Option<Arc<PlayerTls>>,
) -> Result<Option<WebListeners>, String> {
    let Some(addr) = listen else {
        if web_tls.is_some() {
            return Err("invalid web_tls (--web-tls): no --web-listen to serve TLS on".into());
        }
        return Ok(None);
    };
    match TcpListener::bind(addr).await {
        Ok(web) => {
            let local = web.local_addr().map_or(addr, |a| a);
            let scheme = if web_tls.is_some() { "https" } else { "http" };
            // Before the line tests wait for: the address is known then.
            println!("telos-gate web client on {scheme}://{local}/");
            let _ = std::io::stdout().flush();
            tracing::info!(addr = %local, tls = web_tls.is_some(), "web client listening");
            Ok(Some(WebListeners { web, tls: web_tls }))
        }
        Err(e) => Err(format!(
            "invalid web_listen (--web-listen / TELOS_GATE_WEB_LISTEN) {addr}: {e}"
        )),
    }
}

/// The read-only operator page (`--operator-listen`), bound and started.
async fn start_operator(
    addr: SocketAddr,
    redis: &RedisTarget,
    shutdown: &CancellationToken,
) -> Result<(), String> {
    let l = TcpListener::bind(addr).await.map_err(|e| {
        format!(
            "invalid operator_listen (--operator-listen / TELOS_GATE_OPERATOR_LISTEN) {addr}: {e}"
        )
    })?;
    let local = l.local_addr().map_or(addr, |a| a);
    println!("telos-gate operator page on http://{local}/");
    tracing::info!(addr = %local, "operator page listening");
    if !local.ip().is_loopback() {
        // Read only, but unauthenticated: the cluster's shards, zones,
        // players and moves for anyone who reaches it.
        tracing::warn!(addr = %local, "the operator page listens beyond loopback and is unauthenticated: firewall it or bind 127.0.0.1");
    }
    telos_gate::operator::start(l, redis.clone(), shutdown.clone());
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let settings = match Cli::parse().resolve() {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    // Logs, and OTLP traces when OTEL_EXPORTER_OTLP_ENDPOINT is set.
    let telemetry = telos_telemetry::init("telos-gate");
    // Every player is a socket.
    telos_telemetry::raise_open_file_limit();
    let health = Health::starting();
    if let Some(addr) = settings.metrics_listen {
        telos_telemetry::warn_if_metrics_exposed(addr);
        if let Err(e) = telos_gate::metrics::install_prometheus(addr, health.clone()) {
            return fail(e);
        }
    }
    let registry = match DirectoryRegistry::new(settings.redis.clone()) {
        Ok(r) => Arc::new(r),
        Err(e) => return fail(e),
    };
    let (listener, local) = match bind_telnet(settings.listen).await {
        Ok(l) => l,
        Err(e) => return fail(e),
    };
    let players_tls = settings.tls_players.as_ref();
    let tls = match bind_players_tls(players_tls).await {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    let web_tls = players_tls.filter(|t| t.web).map(|t| t.tls.clone());
    let web = match bind_web(settings.gate.web.listen, web_tls).await {
        Ok(w) => w,
        Err(e) => return fail(e),
    };
    let shutdown = CancellationToken::new();
    if let Some(addr) = settings.gate.web.operator_listen
        && let Err(e) = start_operator(addr, &settings.redis, &shutdown).await
    {
        return fail(e);
    }
    if let Some(t) = players_tls {
        // One handler reloads the certificate for every listener using it.
        if let Err(e) = telos_gate::player_tls::reload_on_sighup(t.tls.clone(), shutdown.clone()) {
            return fail(format!("SIGHUP handler (certificate reloads): {e}"));
        }
    }
    if let Some((l, _)) = &tls {
        // Before the readiness line below: a reader that waits for that
        // one has this one too.
        match l.local_addr() {
            Ok(a) => println!("telos-gate TLS for players at {a}"),
            Err(e) => return fail(format!("TLS listen socket: {e}")),
        }
    }
    // Tests and scripts wait for exactly this line on stdout.
    println!("telos-gate listening on {local}");
    let _ = std::io::stdout().flush();
    tracing::info!(addr = %local, redis = %settings.redis, "telos-gate listening");

    telos_gate::readiness::report(registry.clone(), health, shutdown.clone());
    let refused = check_credentials(registry.clone(), shutdown.clone());
    let signals = shutdown.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("signal received; shutting down");
        signals.cancel();
    });
    let listeners = Listeners {
        telnet: listener,
        tls,
        web,
    };
    serve_all(listeners, settings.gate, registry, shutdown).await;
    tracing::info!("telos-gate stopped");
    telemetry.shutdown().await;
    match refused.get() {
        Some(why) => fail(why),
        None => ExitCode::SUCCESS,
    }
}

/// Connects to Redis in the background as the gate starts. The gate may
/// start before Redis (it connects on first use), so an unreachable Redis
/// is no reason to stop; credentials Redis refuses are: they would fail
/// every login. Then the gate stops, and `main` exits non-zero with why.
fn check_credentials(
    registry: Arc<DirectoryRegistry>,
    shutdown: CancellationToken,
) -> Arc<std::sync::OnceLock<String>> {
    let refused = Arc::new(std::sync::OnceLock::new());
    let why = refused.clone();
    tokio::spawn(async move {
        match registry.connect().await {
            Err(e) if e.is_credentials_refused() => {
                tracing::error!(error = %e, "Redis refused the gate's credentials; stopping");
                let _ = why.set(e.to_string());
                shutdown.cancel();
            }
            Err(e) => {
                tracing::warn!(error = %e, "Redis not reachable yet; connecting on first use")
            }
            Ok(_) => {}
        }
    });
    refused
}

/// SIGINT or SIGTERM: the gate holds no state, both mean "stop cleanly".
async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
