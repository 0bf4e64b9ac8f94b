//! The cluster's handoff keys, written by the real `telosctl keygen` (the
//! way an operator makes them), so tests, benches and the soak all run
//! shards on keys made by the one code path the product ships.

use std::path::Path;
use std::time::Duration;

use anyhow::bail;
use telos_tls::{Role, TlsKeys};

use crate::cli::{clean_command, run_to_exit};
use crate::process::blocking;

/// `telosctl keygen` writes four small files; this only turns a hang into
/// a failure with a message.
const KEYGEN_TIMEOUT: Duration = Duration::from_secs(30);

/// Write both keypairs into `dir` with `telosctl keygen` (it refuses to
/// overwrite keys that are there).
pub fn generate(dir: &Path) -> anyhow::Result<()> {
    let mut keygen = clean_command("telosctl");
    keygen.arg("keygen").arg(dir);
    let done = blocking(|| run_to_exit("telosctl-keygen", keygen, KEYGEN_TIMEOUT))?;
    if !done.success() {
        bail!("telosctl keygen {} failed: {}", dir.display(), done.stderr);
    }
    Ok(())
}

/// Give shard `id` its own certificate in the key folder `dir` with
/// `telosctl cert DIR --role shard --name ID` (into `DIR/ID/`, where a
/// shard started with `--keys DIR --shard-id ID` finds it), unless it has
/// one already.
pub fn issue_shard(dir: &Path, id: &str) -> anyhow::Result<()> {
    issue(dir, Role::Shard, id)
}

/// `telosctl cert DIR --role ROLE --name NAME` (into `DIR/NAME/`), unless
/// that folder holds the certificate already.
pub fn issue(dir: &Path, role: Role, name: &str) -> anyhow::Result<()> {
    crate::process::issue_cert(dir, role, name)
}

/// A fresh key folder in the temp dir, removed on drop: what a keyed shard
/// under test is given as `--keys`.
pub struct TempKeys {
    dir: tempfile::TempDir,
}

impl TempKeys {
    pub fn generate() -> anyhow::Result<TempKeys> {
        let dir = tempfile::Builder::new()
            .prefix("telos-test-keys-")
            .tempdir()?;
        generate(dir.path())?;
        Ok(TempKeys { dir })
    }

    /// The folder holding the keys.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The certificate `role` presents, with the cluster CA.
    pub fn tls(&self, role: Role) -> TlsKeys {
        TlsKeys::load(self.path(), role).expect("telosctl keygen wrote every role's certificate")
    }

    /// The certificate shard `id` presents (issued to it on first use), as
    /// a peer of the cluster's shards dials them.
    pub fn shard_tls(&self, id: &str) -> TlsKeys {
        issue_shard(self.path(), id).expect("telosctl cert issues a shard certificate");
        telos_tls::shard::load_shard(self.path(), id)
            .expect("the shard certificate just issued loads")
            .0
    }

    /// Another certificate of `role` issued to `name` (on first use), as a
    /// second gate or operator would hold.
    pub fn cert(&self, role: Role, name: &str) -> TlsKeys {
        issue(self.path(), role, name).expect("telosctl cert issues a certificate");
        TlsKeys::load(&self.path().join(name), role).expect("the certificate just issued loads")
    }

    /// `--keys DIR` for a gate (or telosctl) started on these keys.
    pub fn flag(&self) -> [String; 2] {
        ["--keys".to_string(), self.path().display().to_string()]
    }
}

/// The environment switch a bench reads: `TELOS_BENCH_TLS=0` runs it
/// without TLS (a plaintext baseline, to measure what TLS costs); unset or
/// any other value, with TLS, as a cluster runs.
pub const BENCH_TLS_ENV: &str = "TELOS_BENCH_TLS";

/// Whether a bench runs with TLS ([`BENCH_TLS_ENV`]).
pub fn bench_tls() -> bool {
    std::env::var(BENCH_TLS_ENV).map_or(true, |v| v.trim() != "0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_folder_holds_both_pairs_and_goes_with_its_owner() {
        let keys = TempKeys::generate().unwrap();
        let dir = keys.path().to_path_buf();
        for file in [
            "handoff.key",
            "handoff.pub",
            "snapshot.key",
            "snapshot.pub",
            "ca.crt",
            "ca.key",
            "shard.crt",
            "shard.key",
            "gate.crt",
            "gate.key",
            "operator.crt",
            "operator.key",
        ] {
            assert!(dir.join(file).is_file(), "{file}");
        }
        drop(keys);
        assert!(!dir.exists());
    }
}
