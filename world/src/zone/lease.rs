//! The zone lease as seen from this shard: the generation we hold and the
//! local deadline past which we must assume we no longer hold it.
//!
//! Fence twice: this loop stops a zone the moment its local deadline passes
//! without a successful renew, and the actor itself checks the deadline
//! before it applies anything (see `actor.rs`). The Lua scripts check the
//! generation before they write.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::directory::Directory;

/// Fraction of the TTL we trust locally. The server's TTL starts when Redis
/// runs the script, which is after we sent it; counting from the send time
/// and keeping 20 % back covers clock-rate drift and scheduling delay.
const TRUSTED_FRACTION: f64 = 0.8;

/// Renew this many times per TTL, so two lost renewals still leave one chance.
const RENEWS_PER_TTL: u32 = 3;

#[derive(Debug)]
struct Inner {
    generation: u64,
    deadline: Instant,
}

/// Shared between the renew loop and the zone actor.
#[derive(Debug, Clone)]
pub struct LeaseState {
    inner: Arc<Mutex<Inner>>,
    ttl: Duration,
}

impl LeaseState {
    /// A lease acquired at `generation` by a request sent at `sent_at`.
    pub fn new(generation: u64, ttl: Duration, sent_at: Instant) -> Self {
        LeaseState {
            inner: Arc::new(Mutex::new(Inner {
                generation,
                deadline: sent_at + ttl.mul_f64(TRUSTED_FRACTION),
            })),
            ttl,
        }
    }

    /// An adopted zone's lease before the flip has been observed: invalid
    /// (generation 0) until [`LeaseState::confirm`].
    pub fn unconfirmed(ttl: Duration) -> Self {
        LeaseState {
            inner: Arc::new(Mutex::new(Inner {
                generation: 0,
                deadline: Instant::now(),
            })),
            ttl,
        }
    }

    /// The flip landed: our own `ClaimZone` succeeded at `generation`.
    pub fn confirm(&self, generation: u64, sent_at: Instant) {
        let mut inner = self.inner.lock().expect("lease lock");
        inner.generation = generation;
        inner.deadline = sent_at + self.ttl.mul_f64(TRUSTED_FRACTION);
    }

    pub fn is_confirmed(&self) -> bool {
        self.generation() != 0
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    pub fn generation(&self) -> u64 {
        self.inner.lock().expect("lease lock").generation
    }

    pub fn deadline(&self) -> Instant {
        self.inner.lock().expect("lease lock").deadline
    }

    /// Still ours by the local clock.
    pub fn is_valid(&self) -> bool {
        Instant::now() < self.deadline()
    }

    fn renewed(&self, sent_at: Instant) {
        let mut inner = self.inner.lock().expect("lease lock");
        inner.deadline = inner
            .deadline
            .max(sent_at + self.ttl.mul_f64(TRUSTED_FRACTION));
    }

    /// Make the lease invalid now (refused renew).
    fn revoke(&self) {
        self.inner.lock().expect("lease lock").deadline = Instant::now();
    }
}

/// Renew `zone`'s lease until `stop` is cancelled. When the local deadline
/// passes without a successful renew, or Redis refuses the renew, cancel
/// `fence`: the zone stops at once, without a drain (we no longer own it).
pub async fn renew_loop(
    directory: Directory,
    zone: String,
    shard: String,
    lease: LeaseState,
    fence: CancellationToken,
    stop: CancellationToken,
) {
    let period = lease.ttl / RENEWS_PER_TTL;
    loop {
        let wake = (Instant::now() + period).min(lease.deadline());
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = fence.cancelled() => return,
            _ = tokio::time::sleep_until(wake) => {}
        }
        if stop.is_cancelled() {
            return;
        }
        if !lease.is_valid() {
            warn!(
                zone,
                "lease deadline passed without a renew; fencing the zone"
            );
            metrics::counter!("telos_lease_losses_total", "reason" => "deadline").increment(1);
            fence.cancel();
            return;
        }
        let sent_at = Instant::now();
        let attempt = tokio::time::timeout_at(
            lease.deadline(),
            directory.renew_zone(&zone, &shard, lease.generation(), lease.ttl),
        )
        .await;
        metrics::histogram!("telos_lease_renew_seconds").record(sent_at.elapsed().as_secs_f64());
        match attempt {
            Ok(Ok(true)) => {
                metrics::counter!("telos_lease_renewals_total").increment(1);
                lease.renewed(sent_at);
            }
            Ok(Ok(false)) if stop.is_cancelled() => return,
            Ok(Ok(false)) => {
                warn!(
                    zone,
                    generation = lease.generation(),
                    "lease renew refused; fencing the zone"
                );
                metrics::counter!("telos_lease_losses_total", "reason" => "refused").increment(1);
                lease.revoke();
                fence.cancel();
                return;
            }
            Ok(Err(e)) => {
                metrics::counter!("telos_redis_errors_total", "op" => "renew_zone").increment(1);
                warn!(zone, error = %e, "lease renew failed; will retry until the deadline");
            }
            Err(_) => info!(zone, "lease renew timed out at the deadline"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn deadline_trusts_only_part_of_the_ttl_from_the_send_time() {
        let sent = Instant::now();
        let lease = LeaseState::new(3, Duration::from_secs(10), sent);
        assert_eq!(lease.generation(), 3);
        assert_eq!(lease.deadline(), sent + Duration::from_secs(8));
        tokio::time::advance(Duration::from_secs(5)).await;
        assert!(lease.is_valid());
        lease.renewed(Instant::now());
        assert_eq!(lease.deadline(), sent + Duration::from_secs(13));
        // A late reply for an older send never moves the deadline backwards.
        lease.renewed(sent);
        assert_eq!(lease.deadline(), sent + Duration::from_secs(13));
        tokio::time::advance(Duration::from_secs(9)).await;
        assert!(!lease.is_valid());
        let fresh = LeaseState::new(4, Duration::from_secs(10), Instant::now());
        fresh.revoke();
        assert!(!fresh.is_valid());
    }
}
