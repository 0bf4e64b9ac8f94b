//! The listener: accept players, one task each, and the shutdown story
//! (stop accepting, cancel every connection, wait a bounded time).

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::GateConfig;
use crate::connection;
use crate::metrics as m;
use crate::ratelimit::ip_bucket;
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

const GATE_FULL: &[u8] = b"The gate is full; please try again later.\r\n";

/// What a connection over `--max-connections-per-ip` is told.
fn per_ip_refusal(cap: usize) -> String {
    format!(
        "Too many connections from your address (at most {cap} at once); close one and try again.\r\n"
    )
}

/// Refuse a connection over its address's cap at once, holding nothing:
/// no task, no buffer. The line fits any fresh socket's send buffer, so a
/// non-blocking write delivers it whole or (on a socket already failed) not
/// at all; dropping the stream then closes it behind the line.
fn refuse_per_ip(stream: TcpStream, notice: &[u8]) {
    let _ = stream.try_write(notice);
}

/// Tell a refused client the gate is full and close in order: FIN after
/// the notice, then read (and discard) until the client closes, so input it
/// already sent never turns the close into a reset that loses the notice.
/// The caller bounds it.
async fn refuse_full(stream: &mut TcpStream) -> std::io::Result<()> {
    stream.write_all(GATE_FULL).await?;
    stream.shutdown().await?;
    let mut sink = [0u8; 1024];
    while stream.read(&mut sink).await? > 0 {}
    Ok(())
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
    let grace = cfg.shutdown_grace;
    let max_connections = cfg.max_connections;
    let port = listener.local_addr().map_or(0, |a| a.port());
    let shared = Arc::new(Shared::new(cfg, registry, port));
    let tracker = TaskTracker::new();
    // Ends when `shutdown` does; not on the tracker, which counts players.
    tokio::spawn(crate::liveness::watch_shards(
        shared.clone(),
        shutdown.clone(),
    ));
    tokio::spawn(count_players(shared.clone(), shutdown.clone()));
    let refusals = Arc::new(Semaphore::new(MAX_REFUSALS_IN_FLIGHT));
    let per_ip_notice = per_ip_refusal(shared.cfg.max_connections_per_ip);
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => break,
            r = listener.accept() => r,
        };
        let (mut stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                continue;
            }
        };
        metrics::counter!(m::CONNECTIONS_TOTAL).increment(1);
        // Counted at accept, before the connection has any state: a flood
        // of sockets from one address costs one line and a close each.
        let Some(slot) = shared.per_ip.try_open(ip_bucket(peer.ip())) else {
            m::disconnect("ip_cap");
            tracing::debug!(%peer, "connection over the per-address cap refused");
            refuse_per_ip(stream, per_ip_notice.as_bytes());
            continue;
        };
        if tracker.len() >= max_connections {
            m::disconnect("full");
            // Not on the tracker: a refusal is not a connection, and must
            // not keep the count (and so the next refusal) up. Bounded: a
            // flood of refused connections beyond the cap is closed at once.
            if let Ok(permit) = refusals.clone().try_acquire_owned() {
                tokio::spawn(async move {
                    let _ =
                        tokio::time::timeout(FULL_NOTICE_TIMEOUT, refuse_full(&mut stream)).await;
                    drop(permit);
                });
            }
            continue;
        }
        let shared = shared.clone();
        let cancel = shutdown.child_token();
        tracker.spawn(async move {
            metrics::gauge!(m::CONNECTIONS_OPEN).increment(1.0);
            connection::run(stream, peer, shared, cancel).await;
            metrics::gauge!(m::CONNECTIONS_OPEN).decrement(1.0);
            drop(slot);
        });
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
