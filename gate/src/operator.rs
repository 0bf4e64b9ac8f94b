//! The operator page (`--operator-listen`, loopback by default like
//! `/metrics`): read only, the cluster as the registry in Redis says it is
//! — shards with their state and players, zones with their owner, lease
//! generation and pending transfer — read through the same
//! [`cluster_status`] as `telosctl status`, once a second; and what
//! changed between reads, kept as recent events: shards joining, leaving
//! and draining, transfers proposed, cancelled and completed (with how
//! long the zone's transfer was pending: its players' pause). `/` is the
//! page (live: it reads `/status.json` every second), `/status.json` the
//! same as JSON.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Serialize;
use telos_redis::directory::Directory;
use telos_redis::status::{ClusterStatus, ShardRow, ZoneRow, cluster_status};
use telos_redis::target::RedisTarget;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// How often the registry is read (and the page refreshes).
pub const POLL_EVERY: Duration = Duration::from_secs(1);
/// Bound on one read of the registry.
const READ_TIMEOUT: Duration = Duration::from_secs(3);
/// Recent events kept (the oldest are dropped).
pub const MAX_EVENTS: usize = 200;

const PAGE: &str = include_str!("operator.html");
const CSP: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'";

/// One change seen between two reads.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Event {
    /// When it was seen (Unix ms, the gate's clock).
    pub at_ms: u64,
    /// `shard_joined`, `shard_left`, `shard_state`, `transfer_proposed`,
    /// `transfer_cancelled`, `owner_changed`.
    pub kind: &'static str,
    pub zone: Option<String>,
    pub shard: Option<String>,
    pub from: Option<String>,
    pub to: Option<String>,
    /// For `owner_changed`: how long the zone's transfer was pending when
    /// last seen (its players' pause, to the read's second); `None` when
    /// no pending transfer was seen (a failover, or faster than a read).
    pub pending_s: Option<f64>,
    pub text: String,
}

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
        .with_state(snapshot);
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await;
        if let Err(e) = served {
            tracing::warn!(error = %e, "operator page listener failed");
        }
    });
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

/// Read the registry every [`POLL_EVERY`]; a failed read keeps the last
/// tables and says why.
async fn poll(target: RedisTarget, snapshot: Shared, shutdown: CancellationToken) {
    let mut dir: Option<Directory> = None;
    let mut pending: HashMap<String, f64> = HashMap::new();
    let mut first = true;
    loop {
        let read = async {
            if dir.is_none() {
                dir = Some(
                    Directory::connect(target.clone())
                        .await
                        .map_err(|e| e.to_string())?,
                );
            }
            let d = dir.as_ref().expect("connected above");
            cluster_status(d).await.map_err(|e| e.to_string())
        };
        let read = tokio::time::timeout(READ_TIMEOUT, read)
            .await
            .unwrap_or_else(|_| Err(format!("no answer from Redis within {READ_TIMEOUT:?}")));
        {
            let mut s = snapshot.lock().unwrap_or_else(|e| e.into_inner());
            s.taken_at_ms = now_ms();
            match read {
                Ok(new) => {
                    if !first {
                        let events = diff(&s.shards, &s.zones, &new, &mut pending, s.taken_at_ms);
                        for e in events {
                            if s.events.len() == MAX_EVENTS {
                                s.events.pop_front();
                            }
                            s.events.push_back(e);
                        }
                    } else {
                        remember_pending(&new, &mut pending);
                    }
                    first = false;
                    s.error = None;
                    s.shards = new.shards;
                    s.zones = new.zones;
                }
                Err(e) => s.error = Some(e),
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(POLL_EVERY) => {}
        }
    }
}

fn remember_pending(new: &ClusterStatus, pending: &mut HashMap<String, f64>) {
    for z in &new.zones {
        if let Some(t) = &z.transfer {
            pending.insert(z.id.clone(), t.age_s);
        }
    }
}

/// What changed from the last read (`shards`, `zones`) to `new`.
/// `pending`: each zone's transfer's age when last seen pending.
pub fn diff(
    shards: &[ShardRow],
    zones: &[ZoneRow],
    new: &ClusterStatus,
    pending: &mut HashMap<String, f64>,
    at_ms: u64,
) -> Vec<Event> {
    let mut out = Vec::new();
    let ev = |kind, text: String| Event {
        at_ms,
        kind,
        zone: None,
        shard: None,
        from: None,
        to: None,
        pending_s: None,
        text,
    };
    for s in &new.shards {
        match shards.iter().find(|o| o.id == s.id) {
            None => out.push(Event {
                shard: Some(s.id.clone()),
                ..ev(
                    "shard_joined",
                    format!("shard {} joined ({}, {})", s.id, s.addr, s.state),
                )
            }),
            Some(o) if o.state != s.state => out.push(Event {
                shard: Some(s.id.clone()),
                from: Some(o.state.clone()),
                to: Some(s.state.clone()),
                ..ev(
                    "shard_state",
                    format!("shard {}: {} -> {}", s.id, o.state, s.state),
                )
            }),
            Some(_) => {}
        }
    }
    for o in shards
        .iter()
        .filter(|o| !new.shards.iter().any(|s| s.id == o.id))
    {
        out.push(Event {
            shard: Some(o.id.clone()),
            ..ev("shard_left", format!("shard {} left the registry", o.id))
        });
    }
    for z in &new.zones {
        let old = zones.iter().find(|o| o.id == z.id);
        if let Some(t) = &z.transfer {
            if old.is_none_or(|o| o.transfer.is_none()) {
                out.push(Event {
                    zone: Some(z.id.clone()),
                    from: Some(t.from.clone()),
                    to: Some(t.to.clone()),
                    ..ev(
                        "transfer_proposed",
                        format!("transfer of {}: {} -> {} proposed", z.id, t.from, t.to),
                    )
                });
            }
            pending.insert(z.id.clone(), t.age_s);
        }
        let Some(old) = old else { continue };
        if old.owner != z.owner {
            let from = old.owner.clone().unwrap_or_else(|| "-".into());
            let to = z.owner.clone().unwrap_or_else(|| "-".into());
            let pending_s = if z.transfer.is_none() {
                pending.remove(&z.id)
            } else {
                None
            };
            let how = match pending_s {
                Some(p) => format!(" (transfer; pending {p:.1} s)"),
                None => String::new(),
            };
            out.push(Event {
                zone: Some(z.id.clone()),
                from: Some(from.clone()),
                to: Some(to.clone()),
                pending_s,
                ..ev(
                    "owner_changed",
                    format!("zone {}: {from} -> {to}, gen {}{how}", z.id, z.r#gen),
                )
            });
        } else if z.transfer.is_none() && old.transfer.is_some() {
            pending.remove(&z.id);
            let why = z
                .transfer_cancelled
                .clone()
                .unwrap_or_else(|| "no reason kept".into());
            out.push(Event {
                zone: Some(z.id.clone()),
                ..ev(
                    "transfer_cancelled",
                    format!("transfer of {} cancelled: {why}", z.id),
                )
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use telos_redis::status::TransferRow;

    fn shard(id: &str, state: &str) -> ShardRow {
        ShardRow {
            id: id.into(),
            addr: "127.0.0.1:1".into(),
            state: state.into(),
            players: 0,
            capacity: 10,
            incarnation: 1,
            version: None,
            handoff_version: 1,
        }
    }

    fn zone(id: &str, owner: &str, r#gen: u64, transfer: Option<(&str, &str, f64)>) -> ZoneRow {
        ZoneRow {
            id: id.into(),
            owner: Some(owner.into()),
            home: None,
            r#gen,
            players: 1,
            transfer: transfer.map(|(from, to, age_s)| TransferRow {
                from: from.into(),
                to: to.into(),
                age_s,
            }),
            transfer_cancelled: None,
        }
    }

    #[test]
    fn a_drain_and_a_transfer_with_its_pause_are_events() {
        let mut pending = HashMap::new();
        let before = ClusterStatus {
            shards: vec![shard("a", "live"), shard("b", "live")],
            zones: vec![zone("forest", "a", 1, None)],
        };
        let proposed = ClusterStatus {
            shards: vec![shard("a", "draining"), shard("b", "live")],
            zones: vec![zone("forest", "a", 1, Some(("a", "b", 0.4)))],
        };
        let e = diff(&before.shards, &before.zones, &proposed, &mut pending, 1);
        let kinds: Vec<_> = e.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, ["shard_state", "transfer_proposed"]);
        assert_eq!(e[0].text, "shard a: live -> draining");
        let done = ClusterStatus {
            shards: vec![shard("a", "draining"), shard("b", "live")],
            zones: vec![zone("forest", "b", 2, None)],
        };
        let e = diff(&proposed.shards, &proposed.zones, &done, &mut pending, 2);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].kind, "owner_changed");
        assert_eq!(e[0].pending_s, Some(0.4));
        assert_eq!(
            e[0].text,
            "zone forest: a -> b, gen 2 (transfer; pending 0.4 s)"
        );
        let gone = ClusterStatus {
            shards: vec![shard("b", "live")],
            zones: vec![zone("forest", "b", 2, None)],
        };
        let e = diff(&done.shards, &done.zones, &gone, &mut pending, 3);
        assert_eq!(e[0].kind, "shard_left");
    }
}
