//! argon2id password hashing, always on a blocking thread: a hash takes tens
//! of milliseconds of CPU and must not stall a runtime worker.

use std::sync::LazyLock;

use argon2::{Argon2, PasswordHasher, PasswordVerifier};

use super::StoreError;

/// Hash of a throwaway password, checked against when the name is unknown so
/// that "no such character" costs the same time as "wrong password".
static DUMMY_HASH: LazyLock<Result<String, String>> =
    LazyLock::new(|| hash_blocking("telos-dummy-password-for-timing"));

/// argon2id with the crate defaults (v19, m = 19 MiB, t = 2, p = 1: the
/// OWASP baseline), random salt, PHC string out.
fn hash_blocking(password: &str) -> Result<String, String> {
    Argon2::default()
        .hash_password(password.as_bytes())
        .map(|h| h.to_string())
        .map_err(|e| e.to_string())
}

/// Hashes `password` for storage.
pub(super) async fn hash(password: &str) -> Result<String, StoreError> {
    let password = password.to_owned();
    tokio::task::spawn_blocking(move || hash_blocking(&password))
        .await
        .map_err(|e| StoreError::Hash(e.to_string()))?
        .map_err(StoreError::Hash)
}

/// Checks `password` against a stored PHC string, or against the dummy hash
/// when `phc` is `None` (and then answers false whatever it computed).
pub(super) async fn verify(password: &str, phc: Option<String>) -> Result<bool, StoreError> {
    let password = password.to_owned();
    tokio::task::spawn_blocking(move || {
        let known = phc.is_some();
        let phc = match phc {
            Some(phc) => phc,
            None => DUMMY_HASH.clone()?,
        };
        let ok = match Argon2::default().verify_password(password.as_bytes(), phc.as_str()) {
            Ok(()) => true,
            Err(argon2::password_hash::Error::PasswordInvalid) => false,
            Err(e) => {
                // A stored hash we cannot parse: fail closed, but say so.
                tracing::warn!(error = %e, "unusable stored password hash");
                false
            }
        };
        Ok(known && ok)
    })
    .await
    .map_err(|e| StoreError::Hash(e.to_string()))?
    .map_err(StoreError::Hash)
}

/// Computes the dummy hash ahead of the first login.
pub(super) async fn warm_up() -> Result<(), StoreError> {
    tokio::task::spawn_blocking(|| DUMMY_HASH.clone().map(drop))
        .await
        .map_err(|e| StoreError::Hash(e.to_string()))?
        .map_err(StoreError::Hash)
}
