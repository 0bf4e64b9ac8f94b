//! The one way every Telos process talks to Redis (the [`Directory`] of
//! shards, gate and `telosctl`, and the [`Store`]): how a connection comes
//! back after Redis restarts, how long one request may take, and which
//! requests are sent again.
//!
//! [`Directory`]: super::Directory
//! [`Store`]: crate::store::Store
//!
//! ## Why (issue 11, defect 4)
//! A redis-rs 1.8 `ConnectionManager` with its defaults, as this project
//! used it, recovers from a Redis restart late and only partly:
//! - it notices a dropped connection only when a request fails on it, and
//!   hands that request's error (`broken pipe`) to the caller: the first
//!   request of every client that was idle through the outage fails, with
//!   Redis already back (a gate's first login, a shard's first password
//!   check);
//! - it reconnects with 6 attempts spaced 100 ms × 2ⁿ plus up to 100 %
//!   jitter, uncapped: during an outage the next attempt is soon 3–6 s
//!   away, so a client notices Redis is back seconds late (a shard's
//!   heartbeat, and so the registry every login needs, stays away); after
//!   the sixth failure (~6–13 s) the reconnect resolves to that error, every
//!   request waiting on it gets it, and the next request only starts
//!   another reconnect while failing itself;
//! - it retries nothing.
//!
//! ## What [`RedisConn`] does instead
//! - It reconnects without end, at most [`RECONNECT_MAX_DELAY`] (plus
//!   jitter) between attempts, so it is connected again within about
//!   half a second of Redis answering.
//! - A health check ([`HEALTH_PERIOD`]) uses the connection when nothing
//!   else does, so a drop is noticed and the reconnect started by the check,
//!   not by a player's request.
//! - Every request is bounded by [`REQUEST_TIMEOUT`], the wait for a
//!   connection included: with endless reconnects a request would otherwise
//!   wait for Redis for as long as it is down. A request during an outage
//!   fails within the bound, and callers answer clearly.
//! - Within that bound a request is sent again when that is safe: see
//!   `is_idempotent` and `retryable` below.
//! - A command not in [`crate::acl::COMMANDS`] is never sent: it fails at
//!   once, naming the command, so a path that needs a command the
//!   documented ACL lacks fails in its tests, not under an operator's ACL.
//! - Behind Sentinel the same bounds hold on a [`SentinelLink`]; see
//!   `sentinel_link` and [`RedisConn::durable`].

use super::connect_error::unreachable_text;
pub use super::connect_error::{ConnectError, REDIS_URL_HINT};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::{
    AsyncConnectionConfig, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, RedisResult,
    ServerErrorKind, Value,
};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::sentinel_link::SentinelLink;
use crate::target::RedisTarget;

pub use super::timeouts::{
    CONNECT_TIMEOUT, FIRST_CONNECT_TIMEOUT, HEALTH_PERIOD, RECONNECT_MAX_DELAY,
    RECONNECT_MIN_DELAY, REQUEST_TIMEOUT, RESPONSE_TIMEOUT, RETRY_PAUSE, WAIT_TIMEOUT,
};

/// Read-only commands: sending one twice is the same as sending it once.
/// (`SCRIPT` is here for `SCRIPT LOAD`, which `Script::invoke_async` sends
/// after a restart emptied the script cache; loading twice is loading once.)
const READ_COMMANDS: &[&str] = &[
    "GET",
    "MGET",
    "HGET",
    "HMGET",
    "HGETALL",
    "HEXISTS",
    "HLEN",
    "SMEMBERS",
    "SISMEMBER",
    "SCARD",
    "EXISTS",
    "TYPE",
    "TTL",
    "PTTL",
    "TIME",
    "PING",
    "SCRIPT",
];

/// Replicas that must have a fenced write before it counts (Sentinel only).
pub const WAIT_REPLICAS: i64 = 1;

/// The self-reconnecting connection underneath: redis-rs's manager for a
/// direct URL, a [`SentinelLink`] behind Sentinel.
#[derive(Clone)]
pub(crate) enum Link {
    Direct(ConnectionManager),
    Sentinel(SentinelLink),
}

impl ConnectionLike for Link {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Link::Direct(m) => m.req_packed_command(cmd),
            Link::Sentinel(l) => l.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Link::Direct(m) => m.req_packed_commands(pipeline, offset, count),
            Link::Sentinel(l) => l.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Link::Direct(m) => m.get_db(),
            Link::Sentinel(l) => l.get_db(),
        }
    }
}

/// A connection to Redis; cheap to clone (clones share one multiplexed,
/// self-reconnecting connection and its health check).
#[derive(Clone)]
pub struct RedisConn {
    link: Link,
    /// Behind Sentinel: the dedicated link fenced writes and their `WAIT`
    /// go on, so a `WAIT` never holds up other requests.
    pub(crate) fence: Option<SentinelLink>,
    /// SHA1s of the scripts this client may send again (see [`is_idempotent`]).
    idempotent_scripts: Arc<HashSet<String>>,
    /// Stops the health check when the last clone is dropped.
    _health: Arc<DropGuard>,
}

impl std::fmt::Debug for RedisConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConn").finish_non_exhaustive()
    }
}

impl RedisConn {
    /// Connects to `target` and returns once Redis answered, or fails after
    /// [`FIRST_CONNECT_TIMEOUT`] (at once when Redis refuses the
    /// credentials). `idempotent_scripts` are the scripts (by their source)
    /// that may be sent again after a failure: each must leave Redis the
    /// same whether it runs once or twice.
    pub async fn connect(
        target: &RedisTarget,
        idempotent_scripts: &[redis::Script],
    ) -> Result<RedisConn, ConnectError> {
        let idempotent_scripts: Arc<HashSet<String>> = Arc::new(
            idempotent_scripts
                .iter()
                .map(|s| s.get_hash().to_owned())
                .collect(),
        );
        if target.is_sentinel() {
            return Self::connect_sentinel(target, idempotent_scripts).await;
        }
        let client = target.client()?;
        first_contact(&client, target).await?;
        let config = ConnectionManagerConfig::new()
            .set_min_delay(RECONNECT_MIN_DELAY)
            .set_max_delay(RECONNECT_MAX_DELAY)
            // Never give up: a reconnect that ended in an error would hand
            // it to every waiting request, and the next request would only
            // start another while failing itself.
            .set_number_of_retries(usize::MAX)
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT));
        // Lazy, then one bounded PING: with endless retries the eager
        // constructor would wait for an absent Redis for ever.
        let manager = ConnectionManager::new_lazy_with_config(client, config)
            .map_err(|source| ConnectError::unreachable(target, source))?;
        let stop = CancellationToken::new();
        let conn = RedisConn {
            link: Link::Direct(manager.clone()),
            fence: None,
            idempotent_scripts,
            _health: Arc::new(stop.clone().drop_guard()),
        };
        tokio::time::timeout(
            FIRST_CONNECT_TIMEOUT,
            manager.clone().send_packed_command(&redis::cmd("PING")),
        )
        .await
        .map_err(|_| timed_out(FIRST_CONNECT_TIMEOUT))
        .and_then(|answer| answer)
        .map_err(|source| ConnectError::unreachable(target, source))?;
        tokio::spawn(health_check(manager, stop));
        Ok(conn)
    }

    /// [`connect`](Self::connect) behind Sentinel: two links (requests;
    /// fenced writes), each asking the Sentinels on every reconnect.
    async fn connect_sentinel(
        target: &RedisTarget,
        idempotent_scripts: Arc<HashSet<String>>,
    ) -> Result<RedisConn, ConnectError> {
        let resolver = || target.resolver().map(|r| r.expect("a Sentinel target"));
        let link = SentinelLink::start(resolver()?, RESPONSE_TIMEOUT);
        // Its response timeout must outlast the `WAIT` it carries.
        let fence = SentinelLink::start(resolver()?, RESPONSE_TIMEOUT + WAIT_TIMEOUT);
        let deadline = Instant::now() + FIRST_CONNECT_TIMEOUT;
        for l in [&link, &fence] {
            l.first_connection(deadline, is_refusal)
                .await
                .map_err(|source| match is_refusal(&source) {
                    true => ConnectError::Refused {
                        url: target.redacted(),
                        source,
                    },
                    false => ConnectError::unreachable(target, source),
                })?;
        }
        Ok(RedisConn {
            link: Link::Sentinel(link),
            fence: Some(fence),
            idempotent_scripts,
            // The links run their own health checks.
            _health: Arc::new(CancellationToken::new().drop_guard()),
        })
    }

    /// The number of primary changes (Sentinel failovers) this connection
    /// has followed, as a watch: a lease holder re-validates its leases on
    /// the new primary when it moves. Never moves for a direct URL.
    pub fn primary_changes(&self) -> watch::Receiver<u64> {
        match &self.fence {
            Some(fence) => fence.primary_changes(),
            None => watch::channel(0).1,
        }
    }

    /// Whether `cmd` may be sent again: a read-only command, or one of this
    /// client's idempotent scripts.
    fn is_idempotent(&self, cmd: &Cmd) -> bool {
        is_idempotent(cmd, &self.idempotent_scripts)
    }

    /// Run `send` until it succeeds, fails for good, or [`REQUEST_TIMEOUT`]
    /// passes; `idempotent` says whether it may be sent again after an
    /// error that leaves its outcome unknown.
    pub(crate) async fn bounded<T, F, Fut>(
        &self,
        idempotent: bool,
        bound: Duration,
        mut send: F,
    ) -> RedisResult<T>
    where
        F: FnMut(Link) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let deadline = Instant::now() + bound;
        loop {
            let error = match tokio::time::timeout_at(deadline, send(self.link.clone())).await {
                Err(_) => return Err(timed_out(bound)),
                Ok(Ok(value)) => return Ok(value),
                Ok(Err(e)) => e,
            };
            if !retryable(&error, idempotent) || Instant::now() + RETRY_PAUSE >= deadline {
                return Err(error);
            }
            tracing::debug!(error = %error, "redis request failed; sending it again");
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }
}

impl ConnectionLike for RedisConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        if let Some(name) = crate::acl::unlisted(cmd) {
            return Box::pin(std::future::ready(Err(crate::acl::not_granted(name))));
        }
        let idempotent = self.is_idempotent(cmd);
        Box::pin(
            self.bounded(idempotent, REQUEST_TIMEOUT, move |mut l| async move {
                l.req_packed_command(cmd).await
            }),
        )
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        if let Some(name) = pipeline.cmd_iter().find_map(crate::acl::unlisted) {
            return Box::pin(std::future::ready(Err(crate::acl::not_granted(name))));
        }
        let idempotent = pipeline.cmd_iter().all(|c| self.is_idempotent(c));
        Box::pin(
            self.bounded(idempotent, REQUEST_TIMEOUT, move |mut l| async move {
                l.req_packed_commands(pipeline, offset, count).await
            }),
        )
    }

    fn get_db(&self) -> i64 {
        self.link.get_db()
    }
}

/// One direct connection and `PING`, tried again until
/// [`FIRST_CONNECT_TIMEOUT`]: the self-reconnecting manager retries every
/// failure for ever, a refused password included, so a process with the
/// wrong credentials would wait the whole deadline and report only a
/// timeout. Here a refusal ends the wait at once, and a timeout reports the
/// last error seen (connection refused, an unknown TLS issuer).
async fn first_contact(client: &redis::Client, target: &RedisTarget) -> Result<(), ConnectError> {
    let deadline = Instant::now() + FIRST_CONNECT_TIMEOUT;
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT));
    let mut last = timed_out(FIRST_CONNECT_TIMEOUT);
    let mut warned = false;
    loop {
        let attempt = async {
            let mut conn = client
                .get_multiplexed_async_connection_with_config(&config)
                .await?;
            redis::cmd("PING").query_async::<()>(&mut conn).await
        };
        match tokio::time::timeout_at(deadline, attempt).await {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(source)) if is_refusal(&source) => {
                return Err(ConnectError::Refused {
                    url: target.redacted(),
                    source,
                });
            }
            Ok(Err(e)) => {
                // Said at the first failure, not only at the deadline: an
                // operator who named the wrong port learns it at once.
                if !std::mem::replace(&mut warned, true) {
                    tracing::warn!(
                        "{}; trying again for {FIRST_CONNECT_TIMEOUT:?}",
                        unreachable_text(&target.redacted(), &e)
                    );
                }
                last = e;
            }
            Err(_) => return Err(ConnectError::unreachable(target, last)),
        }
        if Instant::now() + RECONNECT_MAX_DELAY >= deadline {
            return Err(ConnectError::unreachable(target, last));
        }
        tokio::time::sleep(RECONNECT_MAX_DELAY).await;
    }
}

/// One connection attempt and `PING` (behind Sentinel: to the primary the
/// Sentinels name), bounded by [`CONNECT_TIMEOUT`]: for
/// a one-shot tool (`telosctl`) that should say at once that Redis is not
/// there rather than wait out [`FIRST_CONNECT_TIMEOUT`].
pub async fn probe(target: &RedisTarget) -> Result<(), ConnectError> {
    // Bad settings are told as such; a Sentinel URL's primary is looked up
    // within the attempt's bound.
    target.check()?;
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT));
    let attempt = async {
        let client = target.primary_client().await?;
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        redis::cmd("PING").query_async::<()>(&mut conn).await
    };
    match tokio::time::timeout(CONNECT_TIMEOUT + RESPONSE_TIMEOUT, attempt).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(source)) if is_refusal(&source) => Err(ConnectError::Refused {
            url: target.redacted(),
            source,
        }),
        Ok(Err(source)) => Err(ConnectError::unreachable(target, source)),
        Err(_) => Err(ConnectError::unreachable(
            target,
            timed_out(CONNECT_TIMEOUT + RESPONSE_TIMEOUT),
        )),
    }
}

/// Redis refused who we are: `AUTH` failed (`WRONGPASS`), no credentials
/// where it needs them (`NOAUTH`), or the ACL user may not run `PING`
/// (`NOPERM`).
pub(crate) fn is_refusal(error: &RedisError) -> bool {
    matches!(
        error.kind(),
        ErrorKind::AuthenticationFailed | ErrorKind::Server(ServerErrorKind::NoPerm)
    ) || matches!(error.code(), Some("NOAUTH" | "WRONGPASS"))
}

/// Sends a `PING` every [`HEALTH_PERIOD`] until `stop`. Its only job is
/// the side effect: a `PING` that fails on a dropped connection makes the
/// manager start reconnecting now, while nobody else is using it.
async fn health_check(mut manager: ConnectionManager, stop: CancellationToken) {
    let ping = redis::cmd("PING");
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(HEALTH_PERIOD) => {}
        }
        // Bounded: while Redis is down the request waits on the reconnect.
        let _ = tokio::time::timeout(REQUEST_TIMEOUT, manager.send_packed_command(&ping)).await;
    }
}

/// Whether a request that failed with `error` may be sent again.
///
/// Any request, when the error proves it was not executed: Redis answered
/// `LOADING` (it is reading its append-only file after a restart and
/// rejected the request unexecuted). An idempotent request also after
/// errors that leave the outcome unknown: the connection dropped or timed
/// out (it may have run; running it again changes nothing).
fn retryable(error: &RedisError, idempotent: bool) -> bool {
    if error.kind() == ErrorKind::Server(ServerErrorKind::BusyLoading) {
        return true;
    }
    idempotent && (error.is_io_error() || error.is_connection_dropped() || error.is_timeout())
}

/// Read-only commands, and `EVALSHA` of a script in `scripts` (SHA1s; the
/// only way `Script::invoke_async` runs a script). Everything else — a save's CAS, a claim that mints an epoch or
/// a generation, a create, a lease claim or flip, every plain write — is
/// sent once: after an unknown outcome the caller's own fence or retry
/// decides (a save adopts the version its lost write made, a claim is made
/// again under a newer epoch, a heartbeat comes again in a second).
fn is_idempotent(cmd: &Cmd, scripts: &HashSet<String>) -> bool {
    let mut args = cmd.args_iter().filter_map(|a| match a {
        redis::Arg::Simple(bytes) => Some(bytes),
        _ => None,
    });
    let Some(name) = args.next().and_then(|n| std::str::from_utf8(n).ok()) else {
        return false;
    };
    let name = name.to_ascii_uppercase();
    match name.as_str() {
        "EVALSHA" => args
            .next()
            .and_then(|sha| std::str::from_utf8(sha).ok())
            .is_some_and(|sha| scripts.contains(&sha.to_ascii_lowercase())),
        // MULTI/EXEC only wrap a pipeline; its commands decide.
        "MULTI" | "EXEC" => true,
        _ => READ_COMMANDS.contains(&name.as_str()),
    }
}

pub(crate) fn timed_out(after: Duration) -> RedisError {
    std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("no answer from redis in {after:?}"),
    )
    .into()
}

#[cfg(test)]
#[path = "connection_tests.rs"]
mod tests;
