//! The listeners: accept players (plain telnet, and telnet over TLS with
//! `--tls-listen`), one task each, and the shutdown story (stop accepting,
//! cancel every connection, wait a bounded time). Both listeners share
//! every limit: a player's seat, the per-address and per-network caps and
//! the pre-login places count connections, whatever carries them.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::admit::{Admitted, admit_client};
use crate::config::GateConfig;
use crate::connection;
use crate::metrics as m;
use crate::player_tls::{HANDSHAKE_TIMEOUT, PlayerTls};
use crate::proxy;
use crate::registry::ShardRegistry;
use crate::shared::Shared;
use crate::stream::{PlayerIo, Prefixed, tune};

/// Pause after a failed `accept` (e.g. out of file descriptors) so the loop
/// does not spin while the condition lasts.
pub const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// Bound on the "gate full" notice and its lingering close: the connection
/// is refused either way and must not hold a task for long.
pub const FULL_NOTICE_TIMEOUT: Duration = Duration::from_millis(500);

/// Refusals lingering at once; more are closed without the notice.
pub const MAX_REFUSALS_IN_FLIGHT: usize = 256;

const PROXY_REQUIRED: &[u8] =
    b"This gate takes connections from this address only with a PROXY protocol header.\r\n";

/// Refuse a connection over its address's cap at once, holding nothing:
/// no task, no buffer. The line fits any fresh socket's send buffer, so a
/// non-blocking write delivers it whole or (on a socket already failed) not
/// at all; dropping the stream then closes it behind the line.
fn refuse_per_ip(stream: &TcpStream, notice: &[u8]) {
    let _ = stream.try_write(notice);
}

/// Read a PROXY header from a configured balancer: the player's address
/// (the balancer's own for a health check) and what followed the header.
/// A connection without a valid header within the bounds is closed.
async fn proxied(
    mut stream: TcpStream,
    peer: SocketAddr,
) -> Option<(TcpStream, SocketAddr, Vec<u8>)> {
    match tokio::time::timeout(proxy::HEADER_TIMEOUT, proxy::read_header(&mut stream)).await {
        Ok(Ok(p)) => Some((stream, p.client.unwrap_or(peer), p.rest)),
        Ok(Err(e)) => {
            m::disconnect("proxy_header");
            tracing::warn!(%peer, error = %e, "connection from a PROXY-protocol peer refused");
            let _ = stream.try_write(PROXY_REQUIRED);
            None
        }
        Err(_) => {
            m::disconnect("proxy_header");
            tracing::warn!(%peer, "no PROXY header within {:?}; connection refused", proxy::HEADER_TIMEOUT);
            None
        }
    }
}

/// The TLS handshake over an admitted socket (holding its places), bounded
/// by [`HANDSHAKE_TIMEOUT`]; `first_input` (read past a PROXY header) is
/// where the handshake starts. `None`: it failed and the socket is closed.
async fn handshake(
    stream: TcpStream,
    client: SocketAddr,
    tls: &PlayerTls,
    cancel: &CancellationToken,
    first_input: Vec<u8>,
) -> Option<PlayerIo> {
    tune(&stream);
    let accept = tls.acceptor().accept(Prefixed::new(first_input, stream));
    let why = tokio::select! {
        _ = cancel.cancelled() => return None,
        r = tokio::time::timeout(HANDSHAKE_TIMEOUT, accept) => match r {
            Ok(Ok(tls)) => return Some(PlayerIo::split(tls)),
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no handshake within {HANDSHAKE_TIMEOUT:?}"),
        },
    };
    m::disconnect("tls_handshake");
    tracing::debug!(%client, why, "TLS handshake failed");
    None
}

/// One admitted connection, start to end; `tls` for the TLS listener's.
async fn run_connection(
    stream: TcpStream,
    client: SocketAddr,
    shared: Arc<Shared>,
    cancel: CancellationToken,
    admitted: Admitted,
    first_input: Vec<u8>,
    tls: Option<Arc<PlayerTls>>,
) {
    metrics::gauge!(m::CONNECTIONS_OPEN).increment(1.0);
    let opened = match tls {
        None => Some((PlayerIo::tcp(stream), first_input)),
        Some(tls) => handshake(stream, client, &tls, &cancel, first_input)
            .await
            .map(|io| (io, Vec::new())),
    };
    if let Some((io, first_input)) = opened {
        connection::run(io, client, shared, cancel, admitted, first_input).await;
    }
    metrics::gauge!(m::CONNECTIONS_OPEN).decrement(1.0);
}

/// Tell a refused client the gate is full and close in order: FIN after
/// the notice, then read (and discard) until the client closes, so input it
/// already sent never turns the close into a reset that loses the notice.
/// The caller bounds it.
async fn refuse_full(stream: &mut TcpStream, line: &[u8]) -> std::io::Result<()> {
    stream.write_all(line).await?;
    stream.shutdown().await?;
    let mut sink = [0u8; 1024];
    while stream.read(&mut sink).await? > 0 {}
    Ok(())
}

/// [`admit_client`] for a TCP socket: a refused one is told why and
/// closed, holding nothing but (for the "full" kinds) a bounded, lingering
/// notice task. `plain`: the socket speaks plain telnet; a TLS one is
/// closed without the line (its client would read plain text as a broken
/// handshake).
fn admit(
    shared: &Shared,
    stream: TcpStream,
    client: SocketAddr,
    refusals: &Arc<Semaphore>,
    plain: bool,
) -> Option<(TcpStream, Admitted)> {
    let refused = match admit_client(shared, client) {
        Ok(admitted) => return Some((stream, admitted)),
        Err(r) => r,
    };
    m::disconnect(refused.reason);
    if !refused.linger {
        if plain {
            refuse_per_ip(&stream, refused.line.as_bytes());
        }
        return None;
    }
    // Not on the tracker: a refusal is not a connection. Bounded: a flood
    // of refused connections beyond it is closed at once.
    if plain && let Ok(permit) = refusals.clone().try_acquire_owned() {
        let mut stream = stream;
        tokio::spawn(async move {
            let notice = refused.line.as_bytes();
            let _ =
                tokio::time::timeout(FULL_NOTICE_TIMEOUT, refuse_full(&mut stream, notice)).await;
            drop(permit);
        });
    }
    None
}

/// How often the MSSP player count is read from the directory: a crawler
/// polls every few minutes; a count a few seconds old is exact enough, and
/// a crawler's answer never waits on Redis.
pub const PLAYER_COUNT_PERIOD: Duration = Duration::from_secs(2);

/// Keep the MSSP `PLAYERS` count (everyone online, every shard) fresh
/// until `shutdown`. A failed read keeps the last count.
async fn count_players(shared: Arc<Shared>, shutdown: CancellationToken) {
    loop {
        match shared.registry.players_online().await {
            Ok(n) => shared.mssp.set_players(n),
            Err(e) => tracing::debug!(error = %e, "player count for MSSP unavailable"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(PLAYER_COUNT_PERIOD) => {}
        }
    }
}

/// What the gate accepts players on.
pub struct Listeners {
    /// Plain telnet (`--listen`).
    pub telnet: TcpListener,
    /// Telnet over TLS (`--tls-listen`), with the certificate it shows.
    pub tls: Option<(TcpListener, Arc<PlayerTls>)>,
    /// The web client and its WebSocket endpoint (`--web-listen`).
    pub web: Option<crate::web::WebListeners>,
}

/// Serve players on `listener` (plain telnet only) until `shutdown` is
/// cancelled; see [`serve_all`].
pub async fn serve(
    listener: TcpListener,
    cfg: GateConfig,
    registry: Arc<dyn ShardRegistry>,
    shutdown: CancellationToken,
) {
    let listeners = Listeners {
        telnet: listener,
        tls: None,
        web: None,
    };
    serve_all(listeners, cfg, registry, shutdown).await
}

/// Serve players on every listener until `shutdown` is cancelled, then
/// give every connection `cfg.shutdown_grace` to say goodbye and return.
/// Every listener shares the limits, the seats and the links to the
/// shards.
pub async fn serve_all(
    listeners: Listeners,
    cfg: GateConfig,
    registry: Arc<dyn ShardRegistry>,
    shutdown: CancellationToken,
) {
    let grace = cfg.shutdown_grace;
    // MSSP's PORT: the plain telnet port, where crawlers look.
    let port = listeners.telnet.local_addr().map_or(0, |a| a.port());
    let shared = Arc::new(Shared::new(cfg, registry, port));
    let tracker = TaskTracker::new();
    if let Some(web) = listeners.web {
        crate::web::start(web, shared.clone(), tracker.clone(), shutdown.clone());
    }
    // Ends when `shutdown` does; not on the tracker, which counts players.
    // One registry read a period, for both watchers.
    let feed = crate::registry_feed::start(shared.clone(), shutdown.clone());
    tokio::spawn(crate::liveness::watch_shards(
        shared.clone(),
        feed.clone(),
        shutdown.clone(),
    ));
    tokio::spawn(crate::reachability::watch(
        shared.clone(),
        feed,
        shutdown.clone(),
    ));
    tokio::spawn(count_players(shared.clone(), shutdown.clone()));
    // Memory back to the system after a crowd leaves (glibc only).
    if shared.cfg.edge.malloc_trim {
        tokio::spawn(crate::trim::give_back_memory(
            tracker.clone(),
            shutdown.clone(),
        ));
    }
    let accept = Accept {
        // PROXY headers being read at once: as many as strangers may hold.
        handshakes: Arc::new(Semaphore::new(shared.cfg.edge.max_pre_login)),
        shared,
        tracker: tracker.clone(),
        refusals: Arc::new(Semaphore::new(MAX_REFUSALS_IN_FLIGHT)),
        shutdown,
    };
    let tls = async {
        if let Some((listener, tls)) = listeners.tls {
            accept.run(listener, Some(tls)).await;
        }
    };
    tokio::join!(accept.run(listeners.telnet, None), tls);
    tracker.close();
    tracing::info!(connections = tracker.len(), "gate stopping");
    // Each connection already bounds its goodbye by `grace`; the extra grace
    // covers tasks stuck elsewhere (e.g. mid-login) before we give up on them.
    if tokio::time::timeout(grace * 2, tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            left = tracker.len(),
            "connections still open after the shutdown grace"
        );
    }
}

/// What every accept loop shares.
struct Accept {
    shared: Arc<Shared>,
    tracker: TaskTracker,
    refusals: Arc<Semaphore>,
    handshakes: Arc<Semaphore>,
    shutdown: CancellationToken,
}

impl Accept {
    /// Accept on `listener` until shutdown; `tls` for the TLS listener.
    async fn run(&self, listener: TcpListener, tls: Option<Arc<PlayerTls>>) {
        let shared = &self.shared;
        loop {
            let accepted = tokio::select! {
                _ = self.shutdown.cancelled() => break,
                r = listener.accept() => r,
            };
            let (stream, peer) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                    continue;
                }
            };
            metrics::counter!(m::CONNECTIONS_TOTAL).increment(1);
            let tls = tls.clone();
            if shared.cfg.edge.is_proxy(peer.ip()) {
                // The player's address is in the header: read it (bounded in
                // time and size) before any limit counts the connection.
                let Ok(permit) = self.handshakes.clone().try_acquire_owned() else {
                    m::disconnect("pre_login_full");
                    continue;
                };
                let (shared, refusals) = (shared.clone(), self.refusals.clone());
                let cancel = self.shutdown.child_token();
                self.tracker.spawn(async move {
                    let Some((stream, client, rest)) = proxied(stream, peer).await else {
                        return;
                    };
                    drop(permit);
                    if let Some((stream, admitted)) =
                        admit(&shared, stream, client, &refusals, tls.is_none())
                    {
                        run_connection(stream, client, shared, cancel, admitted, rest, tls).await;
                    }
                });
                continue;
            }
            let Some((stream, admitted)) =
                admit(shared, stream, peer, &self.refusals, tls.is_none())
            else {
                continue;
            };
            let cancel = self.shutdown.child_token();
            self.tracker.spawn(run_connection(
                stream,
                peer,
                shared.clone(),
                cancel,
                admitted,
                Vec::new(),
                tls,
            ));
        }
    }
}
