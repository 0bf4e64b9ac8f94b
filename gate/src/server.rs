//! The listener: accept players, one task each, and the shutdown story
//! (stop accepting, cancel every connection, wait a bounded time).

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
use crate::proxy;
use crate::registry::ShardRegistry;
use crate::shared::Shared;

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

/// One admitted connection, start to end.
async fn run_connection(
    stream: TcpStream,
    client: SocketAddr,
    shared: Arc<Shared>,
    cancel: CancellationToken,
    admitted: Admitted,
    first_input: Vec<u8>,
) {
    metrics::gauge!(m::CONNECTIONS_OPEN).increment(1.0);
    let Admitted {
        pre_login,
        _ip,
        _prefix,
    } = admitted;
    connection::run(stream, client, shared, cancel, pre_login, first_input).await;
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
/// notice task.
fn admit(
    shared: &Shared,
    stream: TcpStream,
    client: SocketAddr,
    refusals: &Arc<Semaphore>,
) -> Option<(TcpStream, Admitted)> {
    let refused = match admit_client(shared, client) {
        Ok(admitted) => return Some((stream, admitted)),
        Err(r) => r,
    };
    m::disconnect(refused.reason);
    if !refused.linger {
        refuse_per_ip(&stream, refused.line.as_bytes());
        return None;
    }
    // Not on the tracker: a refusal is not a connection. Bounded: a flood
    // of refused connections beyond it is closed at once.
    if let Ok(permit) = refusals.clone().try_acquire_owned() {
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

/// Serve players on `listener` until `shutdown` is cancelled, then give
/// every connection `cfg.shutdown_grace` to say goodbye and return.
pub async fn serve(
    listener: TcpListener,
    cfg: GateConfig,
    registry: Arc<dyn ShardRegistry>,
    shutdown: CancellationToken,
) {
    serve_all(listener, None, cfg, registry, shutdown).await
}

/// [`serve`], and the web client on `web` if given ([`crate::web`]):
/// both listeners share the limits, the seats and the links to the shards.
pub async fn serve_all(
    listener: TcpListener,
    web: Option<crate::web::WebListeners>,
    cfg: GateConfig,
    registry: Arc<dyn ShardRegistry>,
    shutdown: CancellationToken,
) {
    let grace = cfg.shutdown_grace;
    let port = listener.local_addr().map_or(0, |a| a.port());
    let shared = Arc::new(Shared::new(cfg, registry, port));
    let tracker = TaskTracker::new();
    if let Some(web) = web {
        crate::web::start(web, shared.clone(), tracker.clone(), shutdown.clone());
    }
    // Ends when `shutdown` does; not on the tracker, which counts players.
    tokio::spawn(crate::liveness::watch_shards(
        shared.clone(),
        shutdown.clone(),
    ));
    tokio::spawn(count_players(shared.clone(), shutdown.clone()));
    let refusals = Arc::new(Semaphore::new(MAX_REFUSALS_IN_FLIGHT));
    // PROXY headers being read at once: as many as strangers may hold.
    let handshakes = Arc::new(Semaphore::new(shared.cfg.edge.max_pre_login));
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => break,
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
        if shared.cfg.edge.is_proxy(peer.ip()) {
            // The player's address is in the header: read it (bounded in
            // time and size) before any limit counts the connection.
            let Ok(permit) = handshakes.clone().try_acquire_owned() else {
                m::disconnect("pre_login_full");
                continue;
            };
            let (shared, refusals) = (shared.clone(), refusals.clone());
            let cancel = shutdown.child_token();
            tracker.spawn(async move {
                let Some((stream, client, rest)) = proxied(stream, peer).await else {
                    return;
                };
                drop(permit);
                if let Some((stream, admitted)) = admit(&shared, stream, client, &refusals) {
                    run_connection(stream, client, shared, cancel, admitted, rest).await;
                }
            });
            continue;
        }
        let Some((stream, admitted)) = admit(&shared, stream, peer, &refusals) else {
            continue;
        };
        let shared = shared.clone();
        let cancel = shutdown.child_token();
        tracker.spawn(run_connection(
            stream,
            peer,
            shared,
            cancel,
            admitted,
            Vec::new(),
        ));
    }
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
