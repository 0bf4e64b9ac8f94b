//! How fast one player's commands go to the world: a token bucket per
//! session, a burst and then a steady rate (`--command-burst`,
//! `--commands-per-sec`). A command over the rate is not dropped: it waits
//! in the gate (and what follows it in the socket, as TCP backpressure)
//! until its turn, and the player is told once per flood. So a pasted
//! script or a client's speedwalk goes through whole, while no one player
//! can make a shard apply thousands of commands a second for everyone else
//! in their zone to wait behind.

use std::time::Instant;

use crate::metrics as m;
use crate::notices::command_throttled;
use crate::output::{Output, SlowClient};
use crate::ratelimit::TokenBucket;

/// A session's pace: its rate, and until when its next command waits.
#[derive(Debug)]
pub struct Pacer {
    rate: CommandRate,
    per_sec: u32,
    /// The next command waits its turn until then (the session sleeps
    /// until it and clears it).
    pub wait: Option<Instant>,
}

impl Pacer {
    pub fn new(burst: u32, per_sec: u32) -> Self {
        Self {
            rate: CommandRate::new(burst, per_sec, Instant::now()),
            per_sec,
            wait: None,
        }
    }

    /// Whether the next command may go now; when not, it waits in the
    /// reader until [`Self::wait`], and the first wait of a flood is told.
    pub fn turn(&mut self, out: &Output) -> Result<bool, SlowClient> {
        match self.rate.take(Instant::now()) {
            Turn::Go => Ok(true),
            Turn::WaitUntil { at, tell } => {
                if tell {
                    metrics::counter!(m::COMMANDS_THROTTLED_TOTAL).increment(1);
                    out.line(&command_throttled(self.per_sec))?;
                }
                self.wait = Some(at);
                Ok(false)
            }
        }
    }
}

/// One session's command budget. Time is passed in, so it is testable.
#[derive(Debug)]
pub struct CommandRate {
    bucket: TokenBucket,
    burst: u32,
    per_sec: f64,
    /// The throttle notice was given and the bucket has not been full
    /// since: one notice per flood.
    told: bool,
}

/// What the next command may do.
#[derive(Debug, PartialEq, Eq)]
pub enum Turn {
    /// Send it now.
    Go,
    /// Wait until then; `tell` is true the first time in a flood.
    WaitUntil { at: Instant, tell: bool },
}

impl CommandRate {
    pub fn new(burst: u32, per_sec: u32, now: Instant) -> Self {
        Self {
            bucket: TokenBucket::new(burst, now),
            burst,
            per_sec: f64::from(per_sec.max(1)),
            told: false,
        }
    }

    /// Take a token for one command, or say when one will be there.
    pub fn take(&mut self, now: Instant) -> Turn {
        if self.told && self.bucket.level(self.burst, self.per_sec, now) >= f64::from(self.burst) {
            self.told = false;
        }
        if self.bucket.try_take(self.burst, self.per_sec, now) {
            return Turn::Go;
        }
        let missing = 1.0 - self.bucket.level(self.burst, self.per_sec, now);
        let at = now + std::time::Duration::from_secs_f64(missing.max(0.0) / self.per_sec);
        let tell = !std::mem::replace(&mut self.told, true);
        Turn::WaitUntil { at, tell }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_burst_goes_at_once_then_one_a_tick_and_one_notice_per_flood() {
        let t0 = Instant::now();
        let mut r = CommandRate::new(3, 10, t0);
        for _ in 0..3 {
            assert_eq!(r.take(t0), Turn::Go);
        }
        let Turn::WaitUntil { at, tell } = r.take(t0) else {
            panic!("the fourth command waits");
        };
        assert!(tell, "the first wait is told");
        assert_eq!(at - t0, Duration::from_millis(100));
        // Not yet: it still waits, told already.
        assert!(matches!(
            r.take(t0 + Duration::from_millis(50)),
            Turn::WaitUntil { tell: false, .. }
        ));
        assert_eq!(r.take(at), Turn::Go);
        // A full bucket ends the flood: the next one is told again.
        let later = at + Duration::from_secs(1);
        for _ in 0..3 {
            assert_eq!(r.take(later), Turn::Go);
        }
        assert!(matches!(r.take(later), Turn::WaitUntil { tell: true, .. }));
    }

    #[test]
    fn a_zero_rate_is_not_a_division_by_zero() {
        let t0 = Instant::now();
        let mut r = CommandRate::new(1, 0, t0);
        assert_eq!(r.take(t0), Turn::Go);
        let Turn::WaitUntil { at, .. } = r.take(t0) else {
            panic!("waits");
        };
        assert_eq!(at - t0, Duration::from_secs(1));
    }
}
