//! Proof that a restarted shard's predecessor is gone: with `--data-dir`,
//! every process of a shard id holds an exclusive lock on
//! `DIR/<shard-id>.lock` for its life. A process that takes the lock at
//! once knows no earlier process of its shard id on this host (or on the
//! volume the folder lives on) is running — killed, not paused: a
//! SIGSTOPped process still holds its lock — and takes their live leases
//! over at a new generation instead of waiting them out. Without the
//! lock (held by a live process, or no `--data-dir`) it waits as before.

use std::fs::{File, OpenOptions};
use std::path::Path;

use anyhow::Context;

/// The lock, held while this value lives (the process's life).
#[derive(Debug)]
pub struct HostLock {
    _file: File,
}

/// What taking the lock proved.
#[derive(Debug)]
pub enum Predecessors {
    /// Taken at once: no earlier process of this shard id holds it.
    Gone(HostLock),
    /// Another live process of this shard id holds it (perhaps paused).
    MaybeAlive,
}

/// Try to take `dir/<shard_id>.lock` (the folder is made if missing).
pub fn take(dir: &Path, shard_id: &str) -> anyhow::Result<Predecessors> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("invalid setting --data-dir: creating {}", dir.display()))?;
    let path = dir.join(format!("{shard_id}.lock"));
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("invalid setting --data-dir: opening {}", path.display()))?;
    use rustix::fs::{FlockOperation, flock};
    match flock(&file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Predecessors::Gone(HostLock { _file: file })),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(Predecessors::MaybeAlive),
        Err(e) => Err(std::io::Error::from(e))
            .with_context(|| format!("locking {} (--data-dir)", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_is_proof_only_while_nobody_holds_it() {
        let dir = tempfile::tempdir().unwrap();
        let first = take(dir.path(), "shard-a").unwrap();
        assert!(matches!(first, Predecessors::Gone(_)));
        // A second process of the same id (a twin, or a paused predecessor).
        assert!(matches!(
            take(dir.path(), "shard-a").unwrap(),
            Predecessors::MaybeAlive
        ));
        assert!(matches!(
            take(dir.path(), "shard-b").unwrap(),
            Predecessors::Gone(_)
        ));
        drop(first);
        assert!(matches!(
            take(dir.path(), "shard-a").unwrap(),
            Predecessors::Gone(_)
        ));
    }
}
