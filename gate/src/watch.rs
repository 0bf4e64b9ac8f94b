//! Which shards the gate has links to ([`Liveness`]) and the [`Watch`]
//! each link holds: a link's stream ends when its shard is condemned. The
//! hung-shard watch ([`crate::liveness`]) reads and condemns through it;
//! the upstream takes a watch for every link it opens. A leaf.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

/// The shards the gate has links to, by address, each with the token its
/// links wait on.
#[derive(Debug, Default)]
pub struct Liveness {
    watched: Mutex<HashMap<String, Watched>>,
    /// Numbers each entry, so a [`Watch`] of a condemned (replaced) entry
    /// never counts against the fresh one.
    next_id: std::sync::atomic::AtomicU64,
}

#[derive(Debug)]
struct Watched {
    id: u64,
    /// When the first of its links started.
    since: std::time::Instant,
    /// Cancelled when the shard is condemned.
    token: CancellationToken,
    /// Links (and attaches in flight) holding a [`Watch`] of this entry.
    users: usize,
}

/// Held by a link to a shard while it uses it: [`Watch::lost`] completes
/// when the shard is condemned.
#[derive(Debug)]
pub struct Watch {
    liveness: Arc<Liveness>,
    addr: String,
    id: u64,
    token: CancellationToken,
}

impl Watch {
    /// Completes when the shard behind this link stopped answering.
    pub async fn lost(&self) {
        self.token.cancelled().await
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut map = self.liveness.lock();
        if let Some(w) = map.get_mut(&self.addr)
            && w.id == self.id
        {
            w.users -= 1;
            if w.users == 0 {
                map.remove(&self.addr);
            }
        }
    }
}

impl Liveness {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Watched>> {
        self.watched.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Start watching `addr` for a link that is about to use it.
    pub fn watch(self: &Arc<Self>, addr: &str) -> Watch {
        let mut map = self.lock();
        let w = map.entry(addr.to_string()).or_insert_with(|| Watched {
            id: self
                .next_id
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            token: CancellationToken::new(),
            since: std::time::Instant::now(),
            users: 0,
        });
        w.users += 1;
        Watch {
            liveness: self.clone(),
            addr: addr.to_string(),
            id: w.id,
            token: w.token.clone(),
        }
    }

    /// Addresses with links now.
    #[cfg(test)]
    pub(crate) fn in_use(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    /// Addresses with links made before `before` (a registry read then
    /// could list their shards; a link made since may be to a shard that
    /// registered after it).
    pub(crate) fn in_use_before(&self, before: std::time::Instant) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(_, w)| w.since < before)
            .map(|(addr, _)| addr.clone())
            .collect()
    }

    /// End the links to `addr` if the first of them started before
    /// `before` (returns how many): a newer process publishing at the
    /// address was not yet listed then, so they may reach its paused
    /// predecessor; links all made since reach whatever answered them
    /// after it (a killed predecessor's broke, and their players resumed
    /// on the new process: ending those would only make them resume again).
    pub(crate) fn condemn_older(&self, addr: &str, before: std::time::Instant) -> usize {
        let mut map = self.lock();
        if map.get(addr).is_none_or(|w| w.since >= before) {
            return 0;
        }
        let w = map.remove(addr).expect("checked under the same lock");
        w.token.cancel();
        w.users
    }

    /// End every link to `addr` (returns how many); later links start a
    /// fresh watch.
    pub(crate) fn condemn(&self, addr: &str) -> usize {
        match self.lock().remove(addr) {
            Some(w) => {
                w.token.cancel();
                w.users
            }
            None => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_links_older_than_the_replacement_are_condemned() {
        let l = Arc::new(Liveness::default());
        let old = l.watch("a:1");
        let seen = std::time::Instant::now();
        // Links made since the replacement was not yet listed stay.
        assert_eq!(l.condemn_older("a:1", old_since(&l)), 0);
        assert!(!old.token.is_cancelled());
        assert_eq!(l.condemn_older("a:1", seen), 1);
        assert!(old.token.is_cancelled());
        let fresh = l.watch("a:1");
        assert_eq!(l.condemn_older("a:1", seen), 0, "made after `seen`");
        assert!(!fresh.token.is_cancelled());
    }

    fn old_since(l: &Liveness) -> std::time::Instant {
        l.lock()["a:1"].since
    }

    #[test]
    fn a_watch_counts_until_dropped_and_a_condemned_entry_is_replaced() {
        let l = Arc::new(Liveness::default());
        let first = l.watch("a:1");
        let second = l.watch("a:1");
        assert_eq!(l.in_use(), ["a:1"]);
        drop(first);
        assert_eq!(l.in_use(), ["a:1"], "one link left");
        assert_eq!(l.condemn("a:1"), 1);
        assert!(second.token.is_cancelled());
        assert!(l.in_use().is_empty());
        // A link made after the condemnation is not condemned with it, and
        // the old watch's drop does not count against it.
        let fresh = l.watch("a:1");
        drop(second);
        assert!(!fresh.token.is_cancelled());
        assert_eq!(l.in_use(), ["a:1"]);
        drop(fresh);
        assert!(l.in_use().is_empty());
    }
}
