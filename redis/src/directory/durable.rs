//! Durable before acknowledged: the writes that fence or acknowledge — a
//! lease claim, renew or flip, an owner-epoch mint, a save the gate is told
//! is durable, a transfer's completion — count as done only once a replica
//! has them.
//!
//! Replication is asynchronous: a primary answers a write before any
//! replica has it, and the replica Sentinel promotes when the primary dies
//! can be missing the last writes. A lease generation that goes back lets
//! two shards own a zone; a save the gate dropped its lines for would
//! vanish. So behind Sentinel each such script is followed, on the same
//! connection, by `WAIT 1 <WAIT_TIMEOUT>` (`WAIT` counts the writes of the
//! connection it is sent on), and fewer than [`WAIT_REPLICAS`]
//! acknowledgements make the request fail: the caller treats it as any
//! failed write (a lease renew is retried until its local deadline and the
//! zone fences there; a save keeps the player's lines unacknowledged).
//!
//! `WAIT` blocks its connection until it returns, so these writes have a
//! connection of their own ([`RedisConn`]'s `fence` link) and never hold
//! up logins, reads or heartbeats; that link's response timeout is the
//! normal one plus [`WAIT_TIMEOUT`].
//!
//! A failed `WAIT` does not undo the write: it may still reach the replica,
//! or be lost in a failover. Either is safe, because nothing was built on
//! it: the claimant did not host, the saver did not acknowledge, and each
//! script's own fence (the generation, the owner epoch, the version)
//! decides what happens to a retry.
//!
//! A direct URL (one Redis, no Sentinel) runs the same scripts without
//! `WAIT`, as before: there is no replica to wait for.

use redis::aio::ConnectionLike;
use redis::{Cmd, ErrorKind, FromRedisValue, Pipeline, RedisError, RedisFuture, Value};

use super::connection::{REQUEST_TIMEOUT, RedisConn, WAIT_REPLICAS, WAIT_TIMEOUT};

/// A connection for fenced writes: see the module docs. From
/// [`RedisConn::durable`].
pub struct Durable {
    conn: RedisConn,
}

impl RedisConn {
    /// The connection for a write that must be on a replica before it
    /// counts (see `durable`).
    pub fn durable(&self) -> Durable {
        Durable { conn: self.clone() }
    }
}

/// `EVALSHA` / `EVAL`: a script run, the only way Telos writes what fences.
fn is_script_run(cmd: &Cmd) -> bool {
    cmd.args_iter()
        .next()
        .and_then(|a| match a {
            redis::Arg::Simple(name) => Some(name.to_ascii_uppercase()),
            _ => None,
        })
        .is_some_and(|name| name == b"EVALSHA" || name == b"EVAL")
}

/// The error a fenced write gets when no replica acknowledged it in time.
pub fn not_replicated(acked: i64) -> RedisError {
    RedisError::from((
        ErrorKind::Io,
        "write not acknowledged by a replica",
        format!(
            "{acked} of {WAIT_REPLICAS} replicas had it after {} ms (WAIT)",
            WAIT_TIMEOUT.as_millis()
        ),
    ))
}

/// Whether `error` is [`not_replicated`]'s.
pub fn is_not_replicated(error: &RedisError) -> bool {
    error.to_string().contains("not acknowledged by a replica")
}

impl ConnectionLike for Durable {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let Some(fence) = self.conn.fence.clone() else {
            return self.conn.req_packed_command(cmd);
        };
        let wait = is_script_run(cmd).then(|| {
            let mut wait = redis::cmd("WAIT");
            wait.arg(WAIT_REPLICAS).arg(WAIT_TIMEOUT.as_millis() as u64);
            wait
        });
        Box::pin(async move {
            // Sent once (never idempotent): its fence decides a retry.
            self.conn
                .bounded(false, REQUEST_TIMEOUT + WAIT_TIMEOUT, |_| {
                    let fence = fence.clone();
                    let wait = wait.clone();
                    async move {
                        let (value, acked) = fence.send_pinned(cmd, wait.as_ref()).await?;
                        if let Some(acked) = acked {
                            let acked = i64::from_redis_value(acked)?;
                            if acked < WAIT_REPLICAS {
                                metrics::counter!("telos_redis_not_replicated_total").increment(1);
                                return Err(not_replicated(acked));
                            }
                        }
                        Ok(value)
                    }
                })
                .await
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        // No fenced write is a pipeline; run it as any request.
        self.conn.req_packed_commands(pipeline, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.conn.get_db()
    }
}
