//! The handle on the character store: its connection, its password
//! hasher, and the row keys.

use std::sync::Arc;

use super::error::StoreError;
use super::password::{self, DEFAULT_LOGIN_HASH_QUEUE, Hasher};
use crate::directory::connection::RedisConn;
use crate::target::RedisTarget;

/// Prefix of every Telos key (shared with the directory).
pub(super) const PREFIX: &str = "telos:";

/// A handle on the character store. Cheap to clone: clones share one
/// multiplexed, self-reconnecting connection ([`RedisConn`]) and one
/// password [`Hasher`].
#[derive(Clone)]
pub struct Store {
    conn: RedisConn,
    pub(super) hasher: Arc<Hasher>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

impl Store {
    /// Connects to Redis at `target` (a URL or a [`RedisTarget`]), hashing passwords with a queue of
    /// [`DEFAULT_LOGIN_HASH_QUEUE`].
    pub async fn connect(target: impl Into<RedisTarget>) -> Result<Store, StoreError> {
        Store::connect_with_hash_queue(target, DEFAULT_LOGIN_HASH_QUEUE).await
    }

    /// Connects to Redis at `target`; at most `hash_queue` password hashes wait
    /// for a worker (see [`Hasher`]), more are refused `Busy`.
    ///
    /// Besides reads (a password check, a row load), the one script sent
    /// again after a dropped connection or a timeout is
    /// `credential_check.lua`: it reads, and on a match restarts the
    /// credential's TTL, which a second run restarts again to the same end.
    /// A save (CAS on the version), a claim (mints an epoch), a create and a
    /// credential issue are sent once: a save whose reply was lost is
    /// adopted by the next save, a lost claim is made again at a newer
    /// epoch, a failed login is answered and tried again by the player.
    pub async fn connect_with_hash_queue(
        target: impl Into<RedisTarget>,
        hash_queue: usize,
    ) -> Result<Store, StoreError> {
        let idempotent = [redis::Script::new(include_str!("credential_check.lua"))];
        let conn = RedisConn::connect(&target.into(), &idempotent).await?;
        // Build the dummy hash now so the first unknown-name login is not
        // measurably slower than a known one.
        password::warm_up().await?;
        let hasher = Hasher::new(hash_queue);
        tracing::debug!(
            workers = hasher.workers(),
            queue = hasher.queue(),
            "password hashing bounded"
        );
        Ok(Store {
            conn,
            hasher: Arc::new(hasher),
        })
    }

    pub(super) fn conn(&self) -> RedisConn {
        self.conn.clone()
    }
}

/// Lowercase key name for a character; refuses names that cannot be keys.
pub(super) fn row_key(name: &str) -> Result<String, StoreError> {
    Ok(format!("{PREFIX}char:{}", normalize(name)?))
}

pub(super) fn normalize(name: &str) -> Result<String, StoreError> {
    if name.is_empty()
        || name
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == ':')
    {
        return Err(StoreError::InvalidName(name.to_owned()));
    }
    Ok(name.to_lowercase())
}
