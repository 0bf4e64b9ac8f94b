//! The operator page (`--operator-listen`, loopback by default like
//! `/metrics`): read only, the cluster as the registry in Redis says it is
//! — shards with their state, players, incarnation and version; zones with
//! their owner, home, lease generation and pending transfer — read through
//! the same [`cluster_status`] as `telosctl status`, once a second; and
//! what happened, from the shards' own event stream (`telos:events`, read
//! after the registry each time, so nothing between two reads is missed):
//! starts, drains and exits, transfers proposed and cancelled, zones moved
//! with their cause (drain, rebalance, operator) and claimed. `/` is the
//! page (live: it reads `/status.json` every second), `/status.json` the
//! same as JSON.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use std::net::IpAddr;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use serde::Serialize;
use telos_redis::directory::Directory;
use telos_redis::status::{ShardRow, ZoneRow, cluster_status};
use telos_redis::target::RedisTarget;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::operator_events::{Event, describe, lost_shards};
use crate::web::listen::{HEADER_READ_TIMEOUT, HTTP_BUFFER};

/// How often the registry is read (and the page refreshes).
pub const POLL_EVERY: Duration = Duration::from_secs(1);
/// Bound on one read of the registry.
const READ_TIMEOUT: Duration = Duration::from_secs(3);
/// Recent events kept and shown (the oldest are dropped); the stream
/// keeps more.
pub const MAX_EVENTS: usize = 200;

const PAGE: &str = include_str!("operator.html");
const CSP: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'";

/// What `/status.json` answers.
#[derive(Debug, Default, Serialize)]
pub struct Snapshot {
    pub taken_at_ms: u64,
    /// Why the last read failed, if it did (the tables are the last good).
    pub error: Option<String>,
    pub shards: Vec<ShardRow>,
    pub zones: Vec<ZoneRow>,
    pub events: VecDeque<Event>,
}

type Shared = Arc<Mutex<Snapshot>>;

/// Serve the page on `listener` and read the registry behind `target`
/// until `shutdown`.
pub fn start(listener: TcpListener, target: RedisTarget, shutdown: CancellationToken) {
    let snapshot: Shared = Arc::default();
    tokio::spawn(poll(target, snapshot.clone(), shutdown.clone()));
    let app = Router::new()
        .route("/", get(page))
        .route("/status.json", get(status))
        .with_state(snapshot)
        .layer(axum::middleware::from_fn(own_host_only));
    tokio::spawn(serve(listener, app, shutdown));
}

/// Each connection as the web listener serves one: HTTP/1.1 with a
/// header-read timeout and a bounded buffer (a client that sends its
/// headers a byte at a time, or never, holds nothing for long), until
/// `shutdown`.
async fn serve(listener: TcpListener, app: Router, shutdown: CancellationToken) {
    loop {
        let stream = tokio::select! {
            _ = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "operator page: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let (app, shutdown) = (app.clone(), shutdown.clone());
        tokio::spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .max_buf_size(HTTP_BUFFER);
            let conn =
                builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app));
            tokio::select! {
                _ = conn => {}
                _ = shutdown.cancelled() => {}
            }
        });
    }
}

/// DNS rebinding: a web page whose name an attacker points at this
/// address would otherwise read the page from a visitor's browser. Only a
/// request naming the page by an address (`127.0.0.1:9300`, `[::1]`) or
/// `localhost` is answered; any other `Host` is told 421. Behind a reverse
/// proxy under a name, the proxy passes the upstream address as `Host`.
async fn own_host_only(request: Request, next: Next) -> Response {
    // No `Host` at all (HTTP/1.0: a balancer's health check) is not a
    // browser's request: a browser always sends one.
    let host = match request.headers().get(header::HOST) {
        None => return next.run(request).await,
        Some(h) => h.to_str().unwrap_or(""),
    };
    if host_is_local_name(host) {
        return next.run(request).await;
    }
    metrics::counter!(crate::metrics::OPERATOR_REFUSED_TOTAL).increment(1);
    (
        StatusCode::MISDIRECTED_REQUEST,
        "name this page by its address or localhost\n",
    )
        .into_response()
}

/// Whether a `Host` header names an address or `localhost` (with or
/// without a port).
fn host_is_local_name(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => {
            return v6
                .split_once(']')
                .is_some_and(|(ip, _)| ip.parse::<IpAddr>().is_ok());
        }
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<IpAddr>().is_ok()
}

async fn page() -> Response {
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            ),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(CSP),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        PAGE,
    )
        .into_response()
}

async fn status(State(snapshot): State<Shared>) -> Response {
    let body = {
        let s = snapshot.lock().unwrap_or_else(|e| e.into_inner());
        serde_json::to_string(&*s).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    };
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Read the registry and then the event stream every [`POLL_EVERY`]; a
/// failed read keeps the last tables and says why.
async fn poll(target: RedisTarget, snapshot: Shared, shutdown: CancellationToken) {
    let mut reader = Reader {
        target,
        dir: None,
        last_id: None,
    };
    loop {
        let read = tokio::time::timeout(READ_TIMEOUT, reader.read())
            .await
            .unwrap_or_else(|_| Err(format!("no answer from Redis within {READ_TIMEOUT:?}")));
        apply(&snapshot, read);
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(POLL_EVERY) => {}
        }
    }
}

/// One read into the page's snapshot: the tables replaced, the events
/// added (and a shard whose entry expired untold); a failed read keeps
/// the last tables and says why.
fn apply(snapshot: &Shared, read: Result<Read, String>) {
    let mut guard = snapshot.lock().unwrap_or_else(|e| e.into_inner());
    let s = &mut *guard;
    s.taken_at_ms = now_ms();
    match read {
        Ok((shards, zones, events)) => {
            // An exit the stream told before the registry showed it is
            // among the kept events.
            keep(&mut s.events, events);
            let told = s.events.make_contiguous();
            let lost = lost_shards(&s.shards, &shards, told, s.taken_at_ms);
            keep(&mut s.events, lost);
            s.error = None;
            s.shards = shards;
            s.zones = zones;
        }
        Err(e) => s.error = Some(e),
    }
}

fn keep(kept: &mut VecDeque<Event>, events: Vec<Event>) {
    for e in events {
        if kept.len() == MAX_EVENTS {
            kept.pop_front();
        }
        kept.push_back(e);
    }
}

type Read = (Vec<ShardRow>, Vec<ZoneRow>, Vec<Event>);

/// The page's connection to Redis and how far it has read the stream.
struct Reader {
    target: RedisTarget,
    dir: Option<Directory>,
    /// The last stream entry taken (`None`: start from the latest
    /// [`MAX_EVENTS`]).
    last_id: Option<String>,
}

impl Reader {
    /// The tables, then the events since the last read (all of them:
    /// read in pages of [`MAX_EVENTS`]). Where it read up to is kept only
    /// once the whole read is done: a read cut off by its timeout loses
    /// no event (the next one reads them again).
    async fn read(&mut self) -> Result<Read, String> {
        if self.dir.is_none() {
            let dir = Directory::connect(self.target.clone()).await;
            self.dir = Some(dir.map_err(|e| e.to_string())?);
        }
        let d = self.dir.as_ref().expect("connected above");
        let status = cluster_status(d).await.map_err(|e| e.to_string())?;
        let mut cursor = self.last_id.clone();
        let mut events = Vec::new();
        loop {
            let page = match &cursor {
                None => d.recent_events(MAX_EVENTS).await,
                Some(id) => d.events_after(id, MAX_EVENTS).await,
            };
            let page = page.map_err(|e| e.to_string())?;
            let more = page.len() == MAX_EVENTS && cursor.is_some();
            cursor = match (page.last(), cursor) {
                (Some(e), _) => Some(e.id.clone()),
                (None, Some(c)) => Some(c),
                // An empty stream: from its start next time.
                (None, None) => Some("0-0".into()),
            };
            events.extend(page.into_iter().map(describe));
            if !more {
                break;
            }
        }
        self.last_id = cursor;
        Ok((status.shards, status.zones, events))
    }
}

#[cfg(test)]
mod tests {
    use super::host_is_local_name;

    #[test]
    fn only_addresses_and_localhost_name_the_page() {
        for ok in [
            "127.0.0.1:9300",
            "127.0.0.1",
            "[::1]:9300",
            "[::1]",
            "localhost:9300",
            "LOCALHOST",
            "10.0.0.5:9300",
        ] {
            assert!(host_is_local_name(ok), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:9300",
            "",
            "[evil]:1",
            "127.0.0.1.evil:80",
        ] {
            assert!(!host_is_local_name(bad), "{bad}");
        }
    }
}
