//! Resume credentials: a random secret bound to (character, gate connection)
//! that lets a reconnecting session resume without the password. Redis holds
//! only its SHA-256 hash, so a leaked dump cannot be replayed.

use std::sync::LazyLock;
use std::time::Duration;

use redis::Script;
use sha2::{Digest, Sha256};

use super::error::StoreError;
use super::handle::{PREFIX, Store, normalize};

static CHECK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("credential_check.lua")));

/// 32 random bytes: 256 bits, not guessable within any TTL.
const CREDENTIAL_BYTES: usize = 32;
/// Domain separation, so this hash can never be confused with another use of
/// SHA-256 over the same bytes.
const HASH_DOMAIN: &[u8] = b"telos/resume-credential/v1\0";

fn key(name: &str, conn_id: &str) -> Result<String, StoreError> {
    Ok(format!("{PREFIX}cred:{}:{conn_id}", normalize(name)?))
}

fn digest(credential: &str) -> String {
    let mut h = Sha256::new();
    h.update(HASH_DOMAIN);
    h.update(credential.as_bytes());
    hex::encode(h.finalize())
}

impl Store {
    /// Mints a credential for (`name`, `conn_id`). An earlier one for the
    /// pair stays valid: two shards may both complete one connection's
    /// login — the gate gave up on one that stalled and logged in through
    /// another, and the stalled one finishes when it wakes — and only the
    /// gate knows which credential it kept (issue 17, overlap seed
    /// 113178421: the woken shard's credential replaced the one the gate
    /// held, the next resume was refused and the lines held for replay were
    /// lost). A connection logs in once, so a pair holds as many as the
    /// shards its login tried. They lapse together after `ttl` unless
    /// checked (which restarts it); `h` is the newest, as shards before this
    /// change read it.
    pub async fn issue_credential(
        &self,
        name: &str,
        conn_id: &str,
        ttl: Duration,
    ) -> Result<String, StoreError> {
        let key = key(name, conn_id)?;
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        if ms == 0 {
            return Err(StoreError::Invalid(format!(
                "credential ttl {ttl:?} rounds to 0 ms"
            )));
        }
        let credential = hex::encode(rand::random::<[u8; CREDENTIAL_BYTES]>());
        redis::pipe()
            .atomic()
            .cmd("HSET")
            .arg(&key)
            .arg(&[
                ("h".to_string(), digest(&credential)),
                (format!("d:{}", digest(&credential)), "1".to_string()),
                ("ttl".to_string(), ms.to_string()),
            ])
            .pexpire(&key, i64::try_from(ms).unwrap_or(i64::MAX))
            .exec_async(&mut self.conn())
            .await?;
        Ok(credential)
    }

    /// Whether `credential` is one issued for (`name`, `conn_id`) and still
    /// live; a valid check restarts their TTL.
    pub async fn check_credential(
        &self,
        name: &str,
        conn_id: &str,
        credential: &str,
    ) -> Result<bool, StoreError> {
        let valid: i64 = CHECK
            .key(key(name, conn_id)?)
            .arg(digest(credential))
            .invoke_async(&mut self.conn())
            .await?;
        Ok(valid == 1)
    }

    /// Forgets every credential for (`name`, `conn_id`): after a `quit`, a
    /// resume with it is refused. Idempotent (nothing to forget is fine).
    pub async fn revoke_credential(&self, name: &str, conn_id: &str) -> Result<(), StoreError> {
        let _: i64 = redis::cmd("DEL")
            .arg(key(name, conn_id)?)
            .query_async(&mut self.conn())
            .await?;
        Ok(())
    }
}
