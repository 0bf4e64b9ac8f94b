//! Waits that bound a hang by progress: they fail when nothing happened
//! for a stretch, never because a wall-clock total passed. A loaded machine
//! is slow, not stuck: a hundred logins that take 3 minutes on a busy CI
//! runner still make progress every few seconds, while a real hang makes
//! none at all.

use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use anyhow::bail;
use tokio::time::Instant;

/// How often a wait looks again.
pub const POLL: Duration = Duration::from_millis(100);

/// Wait until `step` says done (`Ok(None)`). While it is not, it returns
/// its progress (`Ok(Some(p))`: a count, a tuple of counts, a state); the
/// wait fails when that progress has not changed for `stall`, or at once
/// when `step` fails (a worker that died will never make progress).
pub async fn until_progress<P: PartialEq + Debug>(
    what: &str,
    stall: Duration,
    mut step: impl FnMut() -> anyhow::Result<Option<P>>,
) -> anyhow::Result<()> {
    until_progress_async(what, stall, || std::future::ready(step())).await
}

/// [`until_progress`] for a `step` that must await (Redis, a socket).
pub async fn until_progress_async<P, F>(
    what: &str,
    stall: Duration,
    mut step: impl FnMut() -> F,
) -> anyhow::Result<()>
where
    P: PartialEq + Debug,
    F: Future<Output = anyhow::Result<Option<P>>>,
{
    let started = Instant::now();
    let mut last: Option<P> = None;
    let mut moved = Instant::now();
    loop {
        let Some(now) = step().await? else {
            return Ok(());
        };
        if last.as_ref() != Some(&now) {
            last = Some(now);
            moved = Instant::now();
        } else if moved.elapsed() > stall {
            bail!(
                "{what}: no progress for {stall:?} (stuck at {:?}, {:?} after the wait began)",
                last.expect("set above"),
                started.elapsed()
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Wait until `count()` reaches `target`; fail when it has not grown for
/// `stall`.
pub async fn until_count(
    what: &str,
    target: usize,
    stall: Duration,
    mut count: impl FnMut() -> usize,
) -> anyhow::Result<()> {
    until_progress(what, stall, || {
        let n = count();
        Ok((n < target).then_some(n))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(start_paused = true)]
    async fn slow_progress_is_waited_for_and_a_stall_fails() {
        // One step every 4 s, 40 s in all, with a 5 s stall bound: done.
        let n = Arc::new(AtomicUsize::new(0));
        let worker = {
            let n = n.clone();
            tokio::spawn(async move {
                for _ in 0..10 {
                    tokio::time::sleep(Duration::from_secs(4)).await;
                    n.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        let start = Instant::now();
        until_count("steps", 10, Duration::from_secs(5), || {
            n.load(Ordering::Relaxed)
        })
        .await
        .unwrap();
        assert!(start.elapsed() >= Duration::from_secs(40));
        worker.await.unwrap();

        // Stuck at 3: fails once 5 s passed without a change, not before.
        let start = Instant::now();
        let err = until_count("steps", 10, Duration::from_secs(5), || 3)
            .await
            .unwrap_err();
        let waited = start.elapsed();
        assert!(
            waited > Duration::from_secs(5) && waited < Duration::from_secs(6),
            "{waited:?}"
        );
        assert!(err.to_string().contains("stuck at 3"), "{err}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_failing_step_ends_the_wait_at_once() {
        let start = Instant::now();
        let err = until_progress::<u32>("players", Duration::from_secs(60), || {
            anyhow::bail!("a player task failed")
        })
        .await
        .unwrap_err();
        assert!(err.to_string().contains("a player task failed"));
        assert!(start.elapsed() < Duration::from_secs(1));
    }
}
