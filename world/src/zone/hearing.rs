//! What a player is shown of others, at most: room chatter (what others
//! here did or said) is bounded per recipient, so a crowd acting at once
//! in one room — N players, N² lines — never fills anyone's stream.
//!
//! A player is shown a burst of [`BURST`] lines and then [`PER_SEC`] a
//! second, more than anyone reads; the lines beyond are not queued but
//! counted, and once the room quietens the player is told how many were
//! left out ([`Hearing::summary`]). The player's own answers, the world
//! speaking to them and the end of their session never count here.

use tokio::time::Instant;

/// Lines of chatter a player is shown at once: a screenful or two, far
/// below what fills a stream (`OUT_CHANNEL - OUT_RESERVE`).
pub const BURST: f64 = 100.0;
/// ...and then this many a second.
pub const PER_SEC: f64 = 20.0;

/// One player's chatter allowance (a token bucket) and what it left out.
#[derive(Debug)]
pub struct Hearing {
    tokens: f64,
    at: Instant,
    /// Lines of text left out since the last summary.
    skipped: u64,
}

impl Default for Hearing {
    fn default() -> Self {
        Hearing {
            tokens: BURST,
            at: Instant::now(),
            skipped: 0,
        }
    }
}

impl Hearing {
    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * PER_SEC).min(BURST);
        self.at = now;
    }

    /// May one more line (`text`) or event of chatter be shown now? A
    /// line refused is counted for the [`summary`](Self::summary).
    pub fn admit(&mut self, now: Instant, text: bool) -> bool {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return true;
        }
        if text {
            self.skipped += 1;
        }
        false
    }

    /// A line (`text`) or event of chatter was left out elsewhere (the
    /// stream was as full as chatter may make it): counted for the
    /// summary too.
    pub fn left_out(&mut self, text: bool) {
        if text {
            self.skipped += 1;
        }
    }

    /// How many lines were left out, once there is room to say so (the
    /// summary costs a line of the allowance): `None` if none were or the
    /// room is still too loud.
    pub fn summary(&mut self, now: Instant) -> Option<u64> {
        if self.skipped == 0 || !self.admit(now, false) {
            return None;
        }
        Some(std::mem::take(&mut self.skipped))
    }
}

/// The line that tells a player how much of a loud room they were not
/// shown.
pub fn summary_line(skipped: u64) -> String {
    let lines = if skipped == 1 { "line" } else { "lines" };
    format!("(The room is busy: {skipped} more {lines} from others here not shown.)\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_burst_then_a_rate_and_the_rest_counted_then_summarised() {
        let t0 = Instant::now();
        let mut h = Hearing {
            tokens: BURST,
            at: t0,
            skipped: 0,
        };
        let shown = (0..1000).filter(|_| h.admit(t0, true)).count();
        assert_eq!(shown, BURST as usize);
        assert_eq!(h.summary(t0), None, "no room yet to say so");
        let later = t0 + Duration::from_secs(1);
        assert_eq!(h.summary(later), Some(1000 - BURST as u64));
        assert_eq!(h.summary(later), None, "said once");
        let shown = (0..100).filter(|_| h.admit(later, true)).count();
        assert_eq!(
            shown,
            PER_SEC as usize - 1,
            "a second's worth, less the summary"
        );
    }

    #[test]
    fn refused_events_are_not_counted_as_lines() {
        let t0 = Instant::now();
        let mut h = Hearing {
            tokens: 0.0,
            at: t0,
            skipped: 0,
        };
        assert!(!h.admit(t0, false));
        assert_eq!(h.summary(t0 + Duration::from_secs(1)), None);
    }

    #[test]
    fn the_summary_says_how_many() {
        assert_eq!(
            summary_line(1),
            "(The room is busy: 1 more line from others here not shown.)\n"
        );
        assert!(summary_line(1940).contains("1940 more lines"));
    }
}
