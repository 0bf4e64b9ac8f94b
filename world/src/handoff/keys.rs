//! The two cluster credentials written by `telosctl keygen`:
//! - the **handoff** keypair signs phase-2 messages (`Commit`, `Abort`);
//! - the **snapshot** keypair signs `PlayerSnapshot`s.
//!
//! They are distinct so that a leak of one does not let an attacker forge
//! the other. The same folder holds the shard's TLS certificate (see
//! [`telos_tls`]): a keyed shard speaks only mutual TLS. Files hold the 32-byte secret or public key as hex; secrets
//! are written readable by the owner only.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use ed25519_dalek::{SigningKey, VerifyingKey};
use telos_tls::TlsKeys;
use telos_tls::shard::{Source, load_shard};

pub const HANDOFF_KEY: &str = "handoff.key";
pub const HANDOFF_PUB: &str = "handoff.pub";
pub const SNAPSHOT_KEY: &str = "snapshot.key";
pub const SNAPSHOT_PUB: &str = "snapshot.pub";

/// Both credentials of a keyed shard.
pub struct ClusterKeys {
    pub handoff: SigningKey,
    pub snapshot: SigningKey,
    /// The shard certificate every gRPC connection is made with, issued
    /// to this shard's id.
    pub tls: TlsKeys,
    /// Where that certificate came from.
    pub tls_source: Source,
}

impl ClusterKeys {
    pub fn handoff_public(&self) -> VerifyingKey {
        self.handoff.verifying_key()
    }

    pub fn snapshot_public(&self) -> VerifyingKey {
        self.snapshot.verifying_key()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: not a 32-byte hex key")]
    Malformed { path: String },
    #[error("{path}: public key does not match the secret key")]
    Mismatch { path: String },
    #[error("{path}: secret key file is readable by group or others (chmod 600)")]
    TooOpen { path: String },
    #[error("{path}: already exists; refusing to overwrite a key")]
    Exists { path: String },
    #[error(transparent)]
    Tls(#[from] telos_tls::TlsError),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> KeyError + '_ {
    move |source| KeyError::Io {
        path: path.display().to_string(),
        source,
    }
}

fn write_file(path: &Path, text: &str, mode: u32) -> Result<(), KeyError> {
    if path.exists() {
        return Err(KeyError::Exists {
            path: path.display().to_string(),
        });
    }
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(io(path))?;
    f.write_all(text.as_bytes()).map_err(io(path))?;
    Ok(())
}

/// Write both keypairs into `dir` (created if missing). Refuses to overwrite.
pub fn generate(dir: &Path) -> Result<(), KeyError> {
    fs::create_dir_all(dir).map_err(io(dir))?;
    let mut rng = rand::rng();
    for (secret, public) in [(HANDOFF_KEY, HANDOFF_PUB), (SNAPSHOT_KEY, SNAPSHOT_PUB)] {
        let key = SigningKey::generate(&mut rng);
        write_file(&dir.join(secret), &hex::encode(key.to_bytes()), 0o600)?;
        write_file(
            &dir.join(public),
            &hex::encode(key.verifying_key().to_bytes()),
            0o600,
        )?;
    }
    Ok(())
}

fn read_32(path: &Path) -> Result<[u8; 32], KeyError> {
    let text = fs::read_to_string(path).map_err(io(path))?;
    let bytes = hex::decode(text.trim()).map_err(|_| KeyError::Malformed {
        path: path.display().to_string(),
    })?;
    bytes.try_into().map_err(|_| KeyError::Malformed {
        path: path.display().to_string(),
    })
}

fn load_pair(dir: &Path, secret: &str, public: &str) -> Result<SigningKey, KeyError> {
    let path = dir.join(secret);
    let mode = fs::metadata(&path).map_err(io(&path))?.permissions().mode();
    if mode & 0o077 != 0 {
        return Err(KeyError::TooOpen {
            path: path.display().to_string(),
        });
    }
    let key = SigningKey::from_bytes(&read_32(&path)?);
    let pub_path = dir.join(public);
    if read_32(&pub_path)? != key.verifying_key().to_bytes() {
        return Err(KeyError::Mismatch {
            path: pub_path.display().to_string(),
        });
    }
    Ok(key)
}

/// Load both keypairs and the certificate of shard `shard_id` from `dir`
/// ([`load_shard`] says where it is looked for).
pub fn load(dir: &Path, shard_id: &str) -> Result<ClusterKeys, KeyError> {
    let (tls, tls_source) = load_shard(dir, shard_id)?;
    match &tls_source {
        Source::File(path) => tracing::info!(cert = %path.display(), "shard certificate loaded"),
        Source::IssuedFromCa => tracing::warn!(
            "the key folder holds the cluster CA's key (ca.key) and no certificate for shard \
             {shard_id}: issued one in memory. Keep ca.key off machines that run Telos \
             (docs/operations.md, \"Keys\")"
        ),
    }
    Ok(ClusterKeys {
        handoff: load_pair(dir, HANDOFF_KEY, HANDOFF_PUB)?,
        snapshot: load_pair(dir, SNAPSHOT_KEY, SNAPSHOT_PUB)?,
        tls,
        tls_source,
    })
}

/// Whether `dir` already holds the two keypairs (a folder written before
/// keygen also wrote certificates).
pub fn exists(dir: &Path) -> bool {
    dir.join(HANDOFF_KEY).exists() && dir.join(SNAPSHOT_KEY).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keygen_writes_two_distinct_owner_only_keypairs_and_loads_them() {
        let dir = std::env::temp_dir().join(format!("telos-keys-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        generate(&dir).unwrap();
        telos_tls::issue::generate(&dir).unwrap();
        for f in [HANDOFF_KEY, HANDOFF_PUB, SNAPSHOT_KEY, SNAPSHOT_PUB] {
            let mode = fs::metadata(dir.join(f)).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "{f}");
        }
        let keys = load(&dir, "shard-a").unwrap();
        assert_eq!(keys.tls.holder(), "shard-a");
        assert_ne!(keys.handoff_public(), keys.snapshot_public());
        assert!(matches!(generate(&dir), Err(KeyError::Exists { .. })));
        fs::set_permissions(dir.join(HANDOFF_KEY), fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            load(&dir, "shard-a"),
            Err(KeyError::TooOpen { .. })
        ));
        fs::remove_dir_all(&dir).unwrap();
    }
}
