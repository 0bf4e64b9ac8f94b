//! argon2id password hashing: bounded, off the async runtime, in memory
//! that is reused rather than allocated per hash.
//!
//! # Why bounded, why reused memory
//! A hash is 19 MiB of argon2 blocks and tens of ms of a core. Each used to
//! be a bare `spawn_blocking`, so a login storm ran one hash per login at
//! once (up to tokio's 512 blocking threads, each with its own 19 MiB), and
//! the memory was kept after the storm, about 19 MiB a login: glibc mmaps
//! the first 19 MiB buffer and, when it is freed, raises its mmap threshold
//! to that size, so every later buffer comes from a malloc arena instead;
//! argon2's `Block` is 64-byte aligned, so each buffer is a `posix_memalign`
//! that asks the arena for 19 MiB plus the alignment slack, which the hole
//! the previous buffer left (exactly 19 MiB) cannot serve: each hash takes
//! fresh memory at the top of the heap, and a freed hole is reused only
//! once its neighbours happen to coalesce. One thread alternates between
//! ~8 buffers' worth; every thread has an arena of its own (up to 8 per
//! core), so a storm leaves gigabytes resident.
//!
//! So hashes run on a [`HashPool`]: one worker per core, each with block
//! memory made once and reused by every hash it runs (nothing is allocated
//! per hash, so nothing is left for an allocator to keep: the shard holds
//! at most cores × 19 MiB for hashing, whatever the storm), a bounded queue
//! behind them, and [`StoreError::Busy`] beyond it. The bound alone still
//! left ~700 MiB after 2000 logins; another global allocator fixes the
//! memory too but adds a dependency, and jemalloc halved the login rate
//! (docs/operations.md, "Login storms", has the side-by-side figures).

use std::sync::LazyLock;

use argon2::password_hash::phc::{Output, ParamsString, Salt};
use argon2::{Algorithm, Argon2, Block, Params, PasswordHash, PasswordHasher, Version};

use super::error::StoreError;
use super::hash_pool::{HashPool, PoolError};

/// Hashes that may wait for a worker unless configured otherwise: at a few
/// tens of hashes a second per core, 128 waiting is a wait of a second or
/// two on a small machine — a login slowed, not refused — while a queued
/// hash costs only its request, not its 19 MiB.
pub const DEFAULT_LOGIN_HASH_QUEUE: usize = 128;

/// Hash of a throwaway password, checked against when the name is unknown so
/// that "no such character" costs the same time as "wrong password". Made
/// once at start, the crate's own way.
static DUMMY_HASH: LazyLock<Result<String, String>> = LazyLock::new(|| {
    Argon2::default()
        .hash_password(b"telos-dummy-password-for-timing")
        .map(|h| h.to_string())
        .map_err(|e| e.to_string())
});

/// The parameters of every new hash: argon2id with the crate defaults (v19,
/// m = 19 MiB, t = 2, p = 1: the OWASP baseline).
fn new_hash_argon2() -> Argon2<'static> {
    Argon2::default()
}

/// One worker's argon2 block memory, sized for [`new_hash_argon2`] and
/// reused by every hash the worker runs. argon2 writes every block before
/// reading it, so what a previous hash left there does not matter.
struct Memory(Vec<Block>);

impl Memory {
    fn new() -> Memory {
        Memory(vec![Block::new(); new_hash_argon2().params().block_count()])
    }

    /// argon2 of `password` and `salt` into `out`, in this memory. A stored
    /// hash made with more memory than ours (another version's parameters)
    /// gets a buffer of its own for that one hash.
    fn hash_into(
        &mut self,
        argon2: &Argon2<'_>,
        password: &[u8],
        salt: &[u8],
        out: &mut [u8],
    ) -> argon2::Result<()> {
        let need = argon2.params().block_count();
        match self.0.get_mut(..need) {
            Some(blocks) => argon2.hash_password_into_with_memory(password, salt, out, blocks),
            None => argon2.hash_password_into(password, salt, out),
        }
    }

    /// A new PHC string for `password`, with a fresh random salt.
    fn hash(&mut self, password: &[u8]) -> Result<String, String> {
        let argon2 = new_hash_argon2();
        let salt = Salt::generate();
        let mut out = [0u8; Params::DEFAULT_OUTPUT_LEN];
        self.hash_into(&argon2, password, &salt, &mut out)
            .map_err(|e| e.to_string())?;
        let phc = PasswordHash {
            algorithm: Algorithm::default().ident(),
            version: Some(Version::default().into()),
            params: ParamsString::try_from(argon2.params()).map_err(|e| e.to_string())?,
            salt: Some(salt),
            hash: Some(Output::new(&out).map_err(|e| e.to_string())?),
        };
        Ok(phc.to_string())
    }

    /// Whether `password` hashes to the stored `phc`, with the parameters,
    /// salt and output length it names (compared in constant time by
    /// [`Output`]'s `PartialEq`).
    fn verify(&mut self, password: &[u8], phc: &str) -> Result<bool, argon2::password_hash::Error> {
        let stored = PasswordHash::new(phc)?;
        let (Some(salt), Some(expected)) = (&stored.salt, &stored.hash) else {
            return Ok(false);
        };
        let algorithm = Algorithm::try_from(stored.algorithm.as_str())?;
        let version = match stored.version {
            Some(v) => Version::try_from(v)?,
            None => Version::default(),
        };
        let argon2 = Argon2::new(algorithm, version, Params::try_from(&stored)?);
        let mut out = vec![0u8; expected.len()];
        self.hash_into(&argon2, password, salt, &mut out)?;
        Ok(Output::new(&out)? == *expected)
    }
}

/// The shard's password hasher (see the module docs).
pub struct Hasher {
    pool: HashPool<Memory>,
}

impl std::fmt::Debug for Hasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.pool.fmt(f)
    }
}

impl From<PoolError> for StoreError {
    fn from(e: PoolError) -> Self {
        match e {
            PoolError::Busy => StoreError::Busy,
            PoolError::Failed(why) => StoreError::Hash(why),
        }
    }
}

impl Hasher {
    /// One worker per core (`available_parallelism`), `queue` hashes
    /// waiting at most.
    pub fn new(queue: usize) -> Hasher {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Hasher {
            pool: HashPool::new(cores, queue, Memory::new),
        }
    }

    /// Hashes at once (one per core).
    pub fn workers(&self) -> usize {
        self.pool.workers()
    }

    /// Hashes that may wait for a worker.
    pub fn queue(&self) -> usize {
        self.pool.queue()
    }

    /// Hashes `password` for storage; `Busy` when the queue is full.
    pub async fn hash(&self, password: &str) -> Result<String, StoreError> {
        let password = password.to_owned();
        self.pool
            .run(move |memory| memory.hash(password.as_bytes()))
            .await?
            .map_err(StoreError::Hash)
    }

    /// Checks `password` against a stored PHC string, or against the dummy
    /// hash when `phc` is `None` (and then answers false whatever it
    /// computed); `Busy` when the queue is full.
    pub async fn verify(&self, password: &str, phc: Option<String>) -> Result<bool, StoreError> {
        let password = password.to_owned();
        self.pool
            .run(move |memory| {
                let known = phc.is_some();
                let phc = match phc {
                    Some(phc) => phc,
                    None => DUMMY_HASH.clone()?,
                };
                let ok = memory
                    .verify(password.as_bytes(), &phc)
                    .unwrap_or_else(|e| {
                        // A stored hash we cannot use: fail closed, but say so.
                        tracing::warn!(error = %e, "unusable stored password hash");
                        false
                    });
                Ok(known && ok)
            })
            .await?
            .map_err(StoreError::Hash)
    }
}

/// Computes the dummy hash ahead of the first login.
pub(super) async fn warm_up() -> Result<(), StoreError> {
    tokio::task::spawn_blocking(|| DUMMY_HASH.clone().map(drop))
        .await
        .map_err(|e| StoreError::Hash(e.to_string()))?
        .map_err(StoreError::Hash)
}

#[cfg(test)]
mod tests {
    use argon2::PasswordVerifier;

    use super::*;

    /// Memory a previous hash left dirty, as a worker's memory is.
    fn used_memory() -> Memory {
        let mut m = Memory::new();
        m.hash(b"something else entirely").unwrap();
        m
    }

    #[test]
    fn a_hash_in_reused_memory_is_the_crates_own() {
        let mut m = used_memory();
        let phc = m.hash(b"correct horse").unwrap();
        assert!(phc.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{phc}");
        let argon2 = Argon2::default();
        let parsed = PasswordHash::new(&phc).unwrap();
        assert!(argon2.verify_password(b"correct horse", &parsed).is_ok());
        assert!(argon2.verify_password(b"wrong horse", &parsed).is_err());
    }

    #[test]
    fn the_crates_hashes_verify_in_reused_memory() {
        let mut m = used_memory();
        let phc = Argon2::default()
            .hash_password(b"correct horse")
            .unwrap()
            .to_string();
        assert!(m.verify(b"correct horse", &phc).unwrap());
        assert!(!m.verify(b"wrong horse", &phc).unwrap());
        // Other parameters (less memory, more passes) verify as well.
        let params = Params::new(1024, 3, 1, Some(24)).unwrap();
        let phc = Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
            .hash_password(b"pw")
            .unwrap()
            .to_string();
        assert!(m.verify(b"pw", &phc).unwrap());
        assert!(m.verify(b"pw", "not a phc string").is_err());
    }

    #[tokio::test]
    async fn hasher_round_trip_and_dummy() {
        let h = Hasher::new(DEFAULT_LOGIN_HASH_QUEUE);
        assert_eq!(
            h.workers(),
            std::thread::available_parallelism().unwrap().get()
        );
        let phc = h.hash("hunter2hunter2").await.unwrap();
        assert!(h.verify("hunter2hunter2", Some(phc.clone())).await.unwrap());
        assert!(!h.verify("nope", Some(phc)).await.unwrap());
        // Unknown name: the dummy hash is checked, and the answer is false
        // even for the dummy's own password.
        assert!(
            !h.verify("telos-dummy-password-for-timing", None)
                .await
                .unwrap()
        );
    }
}
