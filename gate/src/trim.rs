//! Giving memory back after a crowd leaves. glibc's malloc keeps the pages
//! of freed chunks in its arenas: a gate that once held 2000 idle players
//! kept all of their memory after they left (issue 18: 23 → 145 MiB, still
//! 144 MiB after all closed). `malloc_trim(0)` hands every wholly free page
//! of every arena back to the kernel. The gate calls it when its
//! connection count has fallen a lot from its peak and stayed down for a
//! few seconds ([`TrimPolicy`]): once per crowd that leaves, never while
//! players come and go at a steady count, so it costs nothing in play.
//! `scripts/bench gatemem` measured it against mimalloc and jemalloc
//! (docs/operations.md, "Memory after players leave").
//!
//! `--malloc-trim false` turns it off (the bench's baseline). Only on
//! glibc targets ([`SUPPORTED`]); elsewhere the watcher does not run.
//! Under another global allocator glibc's heap holds almost nothing and a
//! trim does no harm.
//!
//! The call runs on a blocking thread, but it locks each arena in turn
//! while it walks it: a worker that allocates from that arena meanwhile
//! waits for that arena's share of the walk (43 ms in all for 2000 players'
//! worth of freed memory). That is once per crowd that leaves.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How often the connection count is read.
pub const TRIM_CHECK: Duration = Duration::from_secs(1);
/// A fall counts once the count is at most half its peak...
pub const TRIM_FALL_DIVISOR: usize = 2;
/// ...and at least this many connections below it (a gate of a few
/// players never trims: there is nothing worth giving back).
pub const TRIM_MIN_FALL: usize = 64;
/// Checks in a row the fall must hold before the trim: the crowd has
/// left, its tasks have ended and freed their buffers.
pub const TRIM_SETTLED_CHECKS: u32 = 3;

/// When to trim, from the connection count read every [`TRIM_CHECK`].
#[derive(Debug, Default)]
pub struct TrimPolicy {
    /// The highest count since the last trim (or since start).
    peak: usize,
    /// Checks in a row the count has been down from `peak`.
    settled: u32,
}

impl TrimPolicy {
    /// The count now; true when the memory should be given back now.
    pub fn observe(&mut self, count: usize) -> bool {
        self.peak = self.peak.max(count);
        let fallen = count <= self.peak / TRIM_FALL_DIVISOR && self.peak - count >= TRIM_MIN_FALL;
        if !fallen {
            self.settled = 0;
            return false;
        }
        self.settled += 1;
        if self.settled < TRIM_SETTLED_CHECKS {
            return false;
        }
        // A new peak from here: the next trim takes another crowd leaving.
        self.peak = count;
        self.settled = 0;
        true
    }
}

/// Whether this build can trim: glibc's `malloc_trim` exists only there.
pub const SUPPORTED: bool = cfg!(all(target_os = "linux", target_env = "gnu"));

/// Watch `connections` (the gate's connection tasks) and trim the heap
/// when a crowd has left, until `shutdown`. Returns at once when the
/// build cannot trim ([`SUPPORTED`]).
pub async fn give_back_memory(connections: TaskTracker, shutdown: CancellationToken) {
    if !SUPPORTED {
        return;
    }
    let mut policy = TrimPolicy::default();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(TRIM_CHECK) => {}
        }
        let count = connections.len();
        if policy.observe(count) {
            // Walks every arena (each locked in turn): a few ms for a large
            // heap, once per crowd, off the runtime's threads.
            let started = std::time::Instant::now();
            let released = tokio::task::spawn_blocking(malloc_trim)
                .await
                .unwrap_or(false);
            let took_ms = started.elapsed().as_millis() as u64;
            if released {
                tracing::info!(
                    connections = count,
                    took_ms,
                    "gave freed memory back to the system"
                );
            } else {
                tracing::info!(
                    connections = count,
                    took_ms,
                    "trimmed the heap after a crowd left: nothing to give back"
                );
            }
        }
    }
}

/// `malloc_trim(0)`: true when glibc released memory.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn malloc_trim() -> bool {
    // SAFETY: malloc_trim takes no pointers and is thread-safe (it locks
    // each arena in turn).
    unsafe { libc::malloc_trim(0) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn malloc_trim() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checks until the policy first fires, or None within `limit`.
    fn fires_after(policy: &mut TrimPolicy, count: usize, limit: u32) -> Option<u32> {
        (1..=limit).find(|_| policy.observe(count))
    }

    #[test]
    fn a_crowd_leaving_is_trimmed_once_it_stayed_gone() {
        let mut p = TrimPolicy::default();
        for n in [0, 500, 2000, 2000] {
            assert!(!p.observe(n), "trimmed while the crowd is in ({n})");
        }
        assert_eq!(fires_after(&mut p, 10, 10), Some(TRIM_SETTLED_CHECKS));
        // Trimmed once: the same low count does not trim again.
        assert_eq!(fires_after(&mut p, 10, 20), None);
    }

    #[test]
    fn a_fall_that_comes_back_resets_the_wait() {
        let mut p = TrimPolicy::default();
        p.observe(1000);
        for _ in 1..TRIM_SETTLED_CHECKS {
            assert!(!p.observe(100));
        }
        // Back above half the peak before the fall settled.
        assert!(!p.observe(600));
        assert_eq!(fires_after(&mut p, 100, 10), Some(TRIM_SETTLED_CHECKS));
    }

    #[test]
    fn small_or_shallow_falls_never_trim() {
        let mut p = TrimPolicy::default();
        // A small gate emptying: fewer than TRIM_MIN_FALL gone.
        p.observe(TRIM_MIN_FALL - 1);
        assert_eq!(fires_after(&mut p, 0, 20), None);
        // A big gate losing a third: not half.
        let mut p = TrimPolicy::default();
        p.observe(3000);
        assert_eq!(fires_after(&mut p, 2000, 20), None);
    }

    #[test]
    fn a_second_crowd_is_trimmed_again() {
        let mut p = TrimPolicy::default();
        p.observe(2000);
        assert!(fires_after(&mut p, 0, 10).is_some());
        p.observe(1500);
        assert_eq!(fires_after(&mut p, 5, 10), Some(TRIM_SETTLED_CHECKS));
    }
}
