//! A connection that follows the primary through a Sentinel failover.
//!
//! redis-rs's `ConnectionManager` reconnects to the address it was built
//! with and never asks Sentinel again (redis-rs issue 1438): after a
//! failover it would keep knocking on the dead primary, or keep writing to
//! the old primary turned replica. A [`SentinelLink`] instead asks the
//! Sentinels for the primary on **every** (re)connect, and drops the
//! connection it has — so the next request waits for a fresh lookup — when
//! a request on it:
//! - fails with an I/O error, a dropped connection or a timeout;
//! - is refused `READONLY` (the node was demoted) or `MASTERDOWN`;
//! - or when its health check (`ROLE` every [`HEALTH_PERIOD`]) finds the
//!   node no longer calls itself the primary.
//!
//! A lookup fails while the Sentinels still name a dead primary (its
//! `ROLE` check cannot connect); it is tried again every
//! [`RECONNECT_MIN_DELAY`]…[`RECONNECT_MAX_DELAY`], so a client is on the
//! new primary within about half a second of the Sentinels promoting it.
//!
//! One task per link owns the lookup ([`Resolver`] needs `&mut`) and
//! publishes the current connection on a watch channel; requests take a
//! clone of it (a multiplexed connection) and report it broken by its
//! number, so one broken connection causes one reconnect however many
//! requests saw it fail.

use std::sync::{Arc, Mutex};

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{
    AsyncConnectionConfig, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, RedisResult,
    ServerErrorKind, Value,
};
use tokio::sync::watch;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::timeouts::{
    CONNECT_TIMEOUT, HEALTH_PERIOD, RECONNECT_MAX_DELAY, RECONNECT_MIN_DELAY, REQUEST_TIMEOUT,
};
use crate::primary::Resolver;

/// The connection requests use now, and its number.
#[derive(Clone)]
struct Current {
    number: u64,
    conn: MultiplexedConnection,
}

/// A self-reconnecting connection to whichever node the Sentinels name the
/// primary. Cheap to clone; its tasks stop when the last clone is dropped.
#[derive(Clone)]
pub(crate) struct SentinelLink {
    shared: Shared,
    _stop: Arc<DropGuard>,
}

/// What the link's clones and its tasks share.
#[derive(Clone)]
struct Shared {
    current: watch::Receiver<Option<Current>>,
    /// The highest connection number a request found broken.
    broken: Arc<watch::Sender<u64>>,
    /// How many times the primary changed address since the first connect.
    changes: watch::Receiver<u64>,
    /// The last lookup or connect error, for the first connection's report.
    last_error: Arc<Mutex<Option<RedisError>>>,
}

impl SentinelLink {
    /// Starts the lookup task; the first connection is being made when this
    /// returns (see [`first_connection`](Self::first_connection)).
    /// `response_timeout` bounds one request on a live connection.
    pub(crate) fn start(resolver: Resolver, response_timeout: std::time::Duration) -> SentinelLink {
        let (current_tx, current) = watch::channel(None);
        let (broken, broken_rx) = watch::channel(0);
        let (changes_tx, changes) = watch::channel(0);
        let last_error = Arc::new(Mutex::new(None));
        let stop = CancellationToken::new();
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(response_timeout));
        tokio::spawn(run(
            resolver,
            config,
            current_tx,
            broken_rx,
            changes_tx,
            last_error.clone(),
            stop.clone(),
        ));
        let shared = Shared {
            current,
            broken: Arc::new(broken),
            changes,
            last_error,
        };
        tokio::spawn(health_check(shared.clone(), stop.clone()));
        SentinelLink {
            shared,
            _stop: Arc::new(stop.drop_guard()),
        }
    }

    /// Waits until the first connection is made, or `deadline` passes
    /// (then the last error is returned). Stops at once on an error no
    /// retry can fix (`refusal`: wrong credentials).
    pub(crate) async fn first_connection(
        &self,
        deadline: tokio::time::Instant,
        refusal: impl Fn(&RedisError) -> bool,
    ) -> RedisResult<()> {
        let mut current = self.shared.current.clone();
        loop {
            if current.borrow_and_update().is_some() {
                return Ok(());
            }
            if let Some(e) = self.shared.last_error.lock().expect("poisoned").as_ref()
                && refusal(e)
            {
                return Err(e.clone());
            }
            let wake = tokio::time::Instant::now() + RECONNECT_MIN_DELAY;
            tokio::select! {
                _ = current.changed() => {}
                _ = tokio::time::sleep_until(wake.min(deadline)) => {}
            }
            if tokio::time::Instant::now() >= deadline {
                let last = self.shared.last_error.lock().expect("poisoned").clone();
                return Err(last.unwrap_or_else(|| {
                    RedisError::from((ErrorKind::Io, "no primary found through Sentinel yet"))
                }));
            }
        }
    }

    /// A receiver of the number of times the primary changed address (a
    /// failover seen by this link).
    pub(crate) fn primary_changes(&self) -> watch::Receiver<u64> {
        self.shared.changes.clone()
    }

    /// Runs `cmd`, then `then` (if any) on the **same** connection: a
    /// `WAIT` only counts the writes of the connection it is sent on.
    pub(crate) async fn send_pinned(
        &self,
        cmd: &Cmd,
        then: Option<&Cmd>,
    ) -> RedisResult<(Value, Option<Value>)> {
        let shared = &self.shared;
        let Current { number, mut conn } = shared.connection().await?;
        let first = conn.send_packed_command(cmd).await;
        let first = first.inspect_err(|e| shared.report_if_broken(number, e))?;
        let Some(then) = then else {
            return Ok((first, None));
        };
        let second = conn.send_packed_command(then).await;
        let second = second.inspect_err(|e| shared.report_if_broken(number, e))?;
        Ok((first, Some(second)))
    }
}

impl Shared {
    /// The current connection, waiting while a lookup is under way (the
    /// caller bounds the wait).
    async fn connection(&self) -> RedisResult<Current> {
        let mut current = self.current.clone();
        let found = current
            .wait_for(Option::is_some)
            .await
            .map_err(|_| RedisError::from((ErrorKind::Io, "the Sentinel link stopped")))?;
        Ok(found.clone().expect("waited for Some"))
    }

    fn report_if_broken(&self, number: u64, error: &RedisError) {
        if breaks_connection(error) {
            self.report_broken(number);
        }
    }

    fn report_broken(&self, number: u64) {
        self.broken.send_if_modified(|highest| {
            let newer = number > *highest;
            if newer {
                *highest = number;
            }
            newer
        });
    }
}

impl ConnectionLike for SentinelLink {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move { self.send_pinned(cmd, None).await.map(|(v, _)| v) })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let shared = &self.shared;
            let Current { number, mut conn } = shared.connection().await?;
            conn.send_packed_commands(pipeline, offset, count)
                .await
                .inspect_err(|e| shared.report_if_broken(number, e))
        })
    }

    fn get_db(&self) -> i64 {
        0
    }
}

/// Whether `error` means the connection is no good (or no longer on the
/// primary): look the primary up again.
pub(crate) fn breaks_connection(error: &RedisError) -> bool {
    error.is_io_error()
        || error.is_connection_dropped()
        || error.is_timeout()
        || error.is_unrecoverable_error()
        || matches!(
            error.kind(),
            ErrorKind::Server(ServerErrorKind::ReadOnly | ServerErrorKind::MasterDown)
        )
        || matches!(error.code(), Some("READONLY" | "MASTERDOWN"))
}

/// The lookup task: connect to the primary the Sentinels name, publish the
/// connection, wait until a request reports it broken, start over.
async fn run(
    mut resolver: Resolver,
    config: AsyncConnectionConfig,
    current: watch::Sender<Option<Current>>,
    mut broken: watch::Receiver<u64>,
    changes: watch::Sender<u64>,
    last_error: Arc<Mutex<Option<RedisError>>>,
    stop: CancellationToken,
) {
    let mut number = 0;
    let mut last_addr: Option<String> = None;
    let mut delay = RECONNECT_MIN_DELAY;
    loop {
        let attempt = async {
            let (addr, client) = resolver.primary().await?;
            let conn = client
                .get_multiplexed_async_connection_with_config(&config)
                .await?;
            Ok::<_, RedisError>((addr, conn))
        };
        let attempt = tokio::select! {
            _ = stop.cancelled() => return,
            a = tokio::time::timeout(REQUEST_TIMEOUT, attempt) => a,
        };
        match attempt {
            Ok(Ok((addr, conn))) => {
                number += 1;
                if last_addr.as_ref().is_some_and(|last| *last != addr) {
                    changes.send_modify(|n| *n += 1);
                    tracing::warn!(primary = %addr, "Redis primary changed (Sentinel failover)");
                } else {
                    tracing::debug!(primary = %addr, "connected to the Redis primary");
                }
                last_addr = Some(addr);
                *last_error.lock().expect("poisoned") = None;
                current.send_replace(Some(Current { number, conn }));
                delay = RECONNECT_MIN_DELAY;
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = broken.wait_for(|b| *b >= number) => {}
                }
                current.send_replace(None);
                tracing::debug!("Redis primary connection lost; asking Sentinel again");
                continue;
            }
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "no Redis primary through Sentinel yet");
                *last_error.lock().expect("poisoned") = Some(e);
            }
            Err(_) => {
                *last_error.lock().expect("poisoned") = Some(RedisError::from((
                    ErrorKind::Io,
                    "Sentinel lookup timed out",
                )));
            }
        }
        let jitter = rand::random_range(0..=delay.as_millis() as u64);
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(delay + std::time::Duration::from_millis(jitter)) => {}
        }
        delay = (delay * 2).min(RECONNECT_MAX_DELAY);
    }
}

/// Asks the current connection's node `ROLE` every [`HEALTH_PERIOD`]: a
/// failed request or an answer other than `master` (a demoted primary that
/// kept its connections) reports the connection broken. Falls back to
/// `PING` when the ACL user may not run `ROLE`.
async fn health_check(link: Shared, stop: CancellationToken) {
    let mut role_allowed = true;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(HEALTH_PERIOD) => {}
        }
        let Ok(Ok(Current { number, mut conn })) =
            tokio::time::timeout(REQUEST_TIMEOUT, link.connection()).await
        else {
            continue;
        };
        let cmd = if role_allowed {
            redis::cmd("ROLE")
        } else {
            redis::cmd("PING")
        };
        match conn.send_packed_command(&cmd).await {
            Ok(Value::Array(items)) => {
                let role = match items.first() {
                    Some(Value::BulkString(role)) => role.as_slice(),
                    Some(Value::SimpleString(role)) => role.as_bytes(),
                    _ => b"",
                };
                if role != b"master" {
                    tracing::warn!(
                        "the Redis node is no longer the primary; asking Sentinel again"
                    );
                    link.report_broken(number);
                }
            }
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoPerm) => {
                role_allowed = false;
            }
            Err(e) => link.report_if_broken(number, &e),
        }
    }
}
