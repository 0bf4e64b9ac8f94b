//! The certificate a shard presents: one issued to its own shard id, so
//! that its peers can check that a request claiming to come from shard X
//! comes from X (see [`crate::holder`]).
//!
//! Looked for in the key folder `--keys DIR`, in this order:
//! 1. `DIR/shard.crt` issued to the shard's id: a folder of its own, as
//!    `telosctl cert CA --role shard --name ID --out DIR` writes it;
//! 2. `DIR/ID/shard.crt`: the subfolder `telosctl cert DIR --role shard
//!    --name ID` writes by default, beside keygen's files;
//! 3. neither, but `DIR/ca.key` is there (keygen's all-in-one folder, the
//!    local convenience): the shard issues itself a certificate for its id
//!    from that CA, in memory, at every start. Whoever holds `ca.key` can
//!    issue any certificate anyway, so this grants nothing new.
//!
//! Otherwise the shard does not start: keygen's role certificate
//! `shard.crt` is issued to the name `shard`, and may speak only for a
//! shard whose id is `shard`.

use std::path::{Path, PathBuf};

use crate::files::{self, CA_KEY};
use crate::grpc::{TlsError, TlsKeys};
use crate::issue::{self, DEFAULT_LEAF_DAYS, Leaf};
use crate::role::Role;

/// Where a shard's certificate came from (for its start-up log line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Read from this file.
    File(PathBuf),
    /// Issued at start from the folder's `ca.key`, never written.
    IssuedFromCa,
}

/// Load the certificate of shard `shard_id` from `dir` (see the module
/// documentation for where it is looked for).
pub fn load_shard(dir: &Path, shard_id: &str) -> Result<(TlsKeys, Source), TlsError> {
    let sub = dir.join(shard_id);
    let mut found_for = None;
    for folder in [dir, sub.as_path()] {
        let path = files::cert_file(folder, Role::Shard);
        if !path.exists() {
            continue;
        }
        let cert = files::read(&path)?;
        let key = files::read_secret(&files::key_file(folder, Role::Shard))?;
        let keys = TlsKeys::from_pem(dir, Role::Shard, &path, cert, key)?;
        if keys.holder() == shard_id {
            return Ok((keys, Source::File(path)));
        }
        found_for.get_or_insert((path, keys.holder().to_string()));
    }
    if dir.join(CA_KEY).exists() {
        let leaf = Leaf {
            role: Role::Shard,
            name: shard_id,
            days: DEFAULT_LEAF_DAYS,
        };
        let (cert, key) = issue::issue_in_memory(dir, &leaf).map_err(|e| TlsError::Malformed {
            path: dir.join(CA_KEY).display().to_string(),
            what: format!("issuing this shard's certificate: {e}"),
        })?;
        let keys = TlsKeys::from_pem(dir, Role::Shard, &dir.join(CA_KEY), cert, key)?;
        return Ok((keys, Source::IssuedFromCa));
    }
    Err(TlsError::NoShardCertificate {
        dir: dir.display().to_string(),
        shard: shard_id.to_string(),
        found: found_for.map(|(path, holder)| (path.display().to_string(), holder)),
    })
}
