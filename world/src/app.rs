//! Process wiring for `telos-world`: logs, metrics, the gRPC server, signals.
//!
//! One shutdown story: SIGTERM drains (every zone handed to a peer while
//! live, players redirected), then stops; SIGINT stops cleanly at once (save
//! every player, close their sessions so gates resume them, release leases,
//! leave the registry).

use std::sync::Arc;

use anyhow::Context;
use telos_proto::v1::{
    admin_server::AdminServer, handoff_server::HandoffServer, play_server::PlayServer,
};
use telos_telemetry::health::{Health, serve_metrics_and_health};
use telos_tls::{Role, RoleCheck};
use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::server::TcpIncoming;
use tracing::info;

use crate::config::WorldConfig;
use crate::model::Game;
use crate::rpc::{admin::AdminService, handoff::HandoffService, play::PlayService};
use crate::runtime::moves::drain::DrainSummary;
use crate::runtime::shard::Shard;

/// Seconds: bucket bounds for every histogram on `/metrics`.
const HISTOGRAM_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// Who may call each service of a keyed shard (the project contract):
/// the handoff protocol only its peers, player sessions the gates (and
/// peers), the operator's service only operators.
const HANDOFF_CALLERS: RoleCheck = RoleCheck::new("Handoff", &[Role::Shard]);
const PLAY_CALLERS: RoleCheck = RoleCheck::new("Play", &[Role::Gate, Role::Shard]);
const ADMIN_CALLERS: RoleCheck = RoleCheck::new("Admin", &[Role::Operator]);

/// HTTP/2 streams one connection may hold open at once. Each gate carries
/// all its players on this shard over one connection, one stream each, so
/// the cap is twice the shard's occupancy ceiling (a re-attaching player's
/// new stream may race its old one) plus room for unary calls; beyond it a
/// client's new streams wait instead of growing the shard without bound.
fn max_streams_per_connection(capacity: u64) -> u32 {
    const UNARY_HEADROOM: u64 = 64;
    u32::try_from(capacity.saturating_mul(2).saturating_add(UNARY_HEADROOM)).unwrap_or(u32::MAX)
}

/// The receive window a shard offers each connection (HTTP/2
/// connection-level flow control). h2 (0.4.20) also limits the framing
/// overhead a connection may hold unread: every DATA frame under 256 bytes
/// costs `256 - len` until its stream's reader takes it, and the budget is
/// half this window; beyond it the whole connection is closed with `GOAWAY
/// ENHANCE_YOUR_CALM "too_many_data_frames"`, every player on it with it.
/// A gate's input lines are tiny frames (`quit` is 13 bytes), one per line,
/// up to `MAX_LINES_IN_FLIGHT` (32) unread per player while the zone works:
/// hyper's default window (1 MiB) let ~2 100 sit unread, fewer than a crowd
/// of players typing at once. 16 MiB lets ~35 000 (a gate spreads its
/// players over several connections), and memory stays bounded by the
/// window itself.
pub const PLAY_CONNECTION_WINDOW: u32 = 16 * 1024 * 1024;

/// How long the gRPC server may take to close its connections at exit.
const SERVER_STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Run a shard until SIGINT or SIGTERM. Logs and traces
/// ([`telos_telemetry`]) come up first; buffered spans are flushed last,
/// after the drain or stop, so the handoff spans of a drain are exported.
///
/// The last line logged says how the process ended: the drain summary after
/// a SIGTERM (the project contract: an orchestrator reads it), `stopped` after a
/// SIGINT — after the shutdown, the server's stop and the trace flush, which
/// log their own troubles before it.
pub async fn run(cfg: WorldConfig, game: Arc<dyn Game>) -> anyhow::Result<()> {
    let telemetry = telos_telemetry::init("telos-world");
    // Gates, peers and strangers on the network each hold a socket.
    telos_telemetry::raise_open_file_limit();
    let result = serve(cfg, game).await;
    telemetry.shutdown().await;
    match result? {
        Some(drain) => drain.log(),
        None => info!("stopped"),
    }
    Ok(())
}

/// Serve until a signal; `Some` with the drain's outcome after a SIGTERM.
async fn serve(cfg: WorldConfig, game: Arc<dyn Game>) -> anyhow::Result<Option<DrainSummary>> {
    let health = Health::starting();
    if let Some(addr) = cfg.metrics_listen {
        telos_telemetry::warn_if_metrics_exposed(addr);
        // Histograms (not summaries): pauses and renews span 100 µs to
        // seconds.
        let builder =
            metrics_exporter_prometheus::PrometheusBuilder::new().set_buckets(HISTOGRAM_BUCKETS)?;
        serve_metrics_and_health(addr, builder, health.clone())
            .map_err(|e| anyhow::anyhow!("starting /metrics on {addr}: {e}"))?;
    }
    let listener = TcpListener::bind(cfg.grpc_listen)
        .await
        .with_context(|| format!("binding --grpc-listen {}", cfg.grpc_listen))?;
    let bound = listener.local_addr()?.to_string();
    let addr = cfg.advertise_addr.clone().unwrap_or_else(|| bound.clone());
    let shard = Shard::new(cfg, addr.clone(), game).await?;
    crate::runtime::start(&shard);
    let (grpc_health, grpc_health_service) = tonic_health::server::health_reporter();
    report_readiness(&shard, health.clone(), grpc_health);
    let server = grpc_server(&shard, listener, grpc_health_service)?;
    let server = tokio::spawn(server);
    // Readiness line for scripts and tests (they read the bound address).
    println!("telos-world {} listening on {bound}", shard.id());
    info!(shard = shard.id(), %bound, advertised = %addr, "listening");
    let signal = tokio::select! {
        signal = wait_for_signal() => signal?,
        // A newer process of this shard id took over while this one was
        // paused (or it was started twice): stop, and say so in the exit
        // status. Nothing is drained: the zones are not ours to hand on.
        _ = shard.superseded().cancelled() => Signal::Superseded,
    };
    // Not ready from the signal on, before anything moves: an orchestrator
    // stops sending players here first.
    shard.stop_being_ready();
    health.set(Err("stopping".into()));
    // SIGTERM drains: every zone moves to a peer while live. This runs on
    // the signal's own task; the zones' lifetime token is untouched until
    // the drain is done.
    let drained = match signal {
        Signal::Term => Some(crate::runtime::moves::drain::begin_drain(&shard).await),
        Signal::Int | Signal::Superseded => None,
    };
    stop(shard).await;
    // tonic's graceful shutdown waits for open streams; a client that never
    // closes its stream must not keep the process alive.
    if tokio::time::timeout(SERVER_STOP_GRACE, server)
        .await
        .is_err()
    {
        tracing::warn!("gRPC server did not stop within the grace period; exiting anyway");
    }
    if signal == Signal::Superseded {
        anyhow::bail!("superseded by a newer process of this shard id");
    }
    Ok(drained)
}

/// A running gRPC server's future.
type Serving = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<(), tonic::transport::Error>> + Send>,
>;

/// The shard's gRPC services on `listener`, until the shard stops: a keyed
/// shard speaks only mutual TLS, and each service checks the role in the
/// caller's certificate; a keyless one (the single-shard dev mode) speaks
/// plaintext.
fn grpc_server(
    shard: &Arc<Shard>,
    listener: TcpListener,
    grpc_health_service: tonic_health::pb::health_server::HealthServer<
        impl tonic_health::pb::health_server::Health,
    >,
) -> anyhow::Result<Serving> {
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    let stop_serving = shard.stopped().clone();
    let mut builder = tonic::transport::Server::builder()
        .max_concurrent_streams(max_streams_per_connection(shard.config().capacity))
        .initial_connection_window_size(PLAY_CONNECTION_WINDOW);
    let play = PlayServer::new(PlayService::new(shard.clone()));
    let handoff = HandoffServer::new(HandoffService::new(shard.clone()));
    let admin = AdminServer::new(AdminService::new(shard.clone()));
    let server: Serving = match shard.handoff().keys.as_ref().map(|k| k.tls.server()) {
        // A keyed shard speaks only mutual TLS, and each service checks
        // the role in the caller's certificate.
        Some(tls) => Box::pin(
            builder
                .tls_config(tls)
                .context("the shard's TLS certificate (--keys)")?
                .add_service(InterceptedService::new(play, PLAY_CALLERS))
                .add_service(InterceptedService::new(handoff, HANDOFF_CALLERS))
                .add_service(InterceptedService::new(admin, ADMIN_CALLERS))
                // Any certificate of the cluster may ask (mutual TLS).
                .add_service(grpc_health_service)
                .serve_with_incoming_shutdown(incoming, stop_serving.cancelled_owned()),
        ),
        // Keyless: the single-shard dev mode, plaintext.
        None => Box::pin(
            builder
                .add_service(play)
                .add_service(handoff)
                .add_service(admin)
                .add_service(grpc_health_service)
                .serve_with_incoming_shutdown(incoming, stop_serving.cancelled_owned()),
        ),
    };
    Ok(server)
}

#[derive(Debug, PartialEq, Eq)]
enum Signal {
    Term,
    Int,
    /// Not a signal: a newer process of this shard id took over.
    Superseded,
}

async fn wait_for_signal() -> anyhow::Result<Signal> {
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(tokio::select! {
        _ = term.recv() => {
            info!("SIGTERM: draining");
            Signal::Term
        }
        _ = int.recv() => {
            info!("SIGINT: stopping");
            Signal::Int
        }
    })
}

async fn stop(shard: Arc<Shard>) {
    let deadline = shard.config().drain_deadline;
    shard.shutdown(deadline).await;
}

/// How often `/readyz` is brought up to date with the shard.
const READINESS_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

/// Keep `health` (what `/readyz` answers) and `grpc.health.v1` (the
/// server-wide status, service "") current with the shard's own view; not
/// ready from the moment it stops.
fn report_readiness(
    shard: &Arc<Shard>,
    health: Arc<Health>,
    grpc: tonic_health::server::HealthReporter,
) {
    use tonic_health::ServingStatus;
    let shard = shard.clone();
    tokio::spawn(async move {
        // tonic-health starts "" as SERVING: not until the first check.
        let mut told = ServingStatus::NotServing;
        grpc.set_service_status("", told).await;
        loop {
            let ready = shard.readiness();
            let status = if ready.is_ok() {
                ServingStatus::Serving
            } else {
                ServingStatus::NotServing
            };
            if status != told {
                grpc.set_service_status("", status).await;
                told = status;
            }
            health.set(ready);
            tokio::select! {
                _ = shard.stopped().cancelled() => break,
                _ = tokio::time::sleep(READINESS_EVERY) => {}
            }
        }
        grpc.set_service_status("", ServingStatus::NotServing).await;
        health.set(Err("stopping".into()));
    });
}
