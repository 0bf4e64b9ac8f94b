//! Why a first connection to Redis gave up, said in one line an operator
//! can act on: the URL tried (redacted) and how to name another.

use redis::RedisError;

use crate::target::{RedisTarget, TargetError};

/// Why [`RedisConn::connect`] gave up. Every URL in it is redacted.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error(transparent)]
    Target(#[from] TargetError),
    /// Redis answered and said no: a wrong password or user, or a user
    /// not allowed `PING`. Trying again cannot help.
    #[error(
        "Redis at {url} refused the credentials: {source} (check the URL's user and \
         password, or --redis-password-file)"
    )]
    Refused { url: String, source: RedisError },
    /// Redis could not be reached, or its TLS handshake failed, until the
    /// first connection's deadline. Said in one line with the URL tried and
    /// how to name another (the error's own text repeats its cause, so it
    /// is not chained as a source).
    #[error("{}", unreachable_text(.url, .error))]
    Unreachable { url: String, error: RedisError },
}

/// How to point a binary at the cluster's Redis, said with every failure
/// to reach one.
pub const REDIS_URL_HINT: &str = "name the cluster's Redis with --redis-url URL or \
     TELOS_REDIS_URL (scripts/cluster writes it to .cluster/redis.url)";

pub(super) fn unreachable_text(url: &str, error: &RedisError) -> String {
    if error.kind() == redis::ErrorKind::Parse {
        return format!(
            "something answers at {url}, but it is not Redis (its reply is not the Redis \
             protocol); {REDIS_URL_HINT}"
        );
    }
    format!(
        "no Redis answers at {url} ({}); {REDIS_URL_HINT}",
        short_reason(error)
    )
}

/// The last, most specific words of a Redis error ("Connection refused");
/// a one-word last part keeps the words that say what it is about
/// ("invalid peer certificate: UnknownIssuer").
fn short_reason(e: &RedisError) -> String {
    let text = e.to_string();
    let parts: Vec<&str> = text.split(": ").map(str::trim).collect();
    let one_word = parts.last().is_some_and(|p| !p.contains(' '));
    let keep = if one_word && parts.len() >= 2 { 2 } else { 1 };
    let last = parts[parts.len() - keep.min(parts.len())..].join(": ");
    last.split(" (os error").next().unwrap_or(&last).to_string()
}

impl ConnectError {
    /// Redis answered and refused the credentials: a setting to fix, not an
    /// outage to wait out.
    pub fn is_refusal(&self) -> bool {
        matches!(self, ConnectError::Refused { .. })
    }

    pub(super) fn unreachable(target: &RedisTarget, error: RedisError) -> ConnectError {
        ConnectError::Unreachable {
            url: target.redacted(),
            error,
        }
    }
}
