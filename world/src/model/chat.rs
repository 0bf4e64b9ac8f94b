//! The chat limit: how much a player may say to others. The runtime owns
//! the limit and the clock ([`ChatBucket`], one per session); a game asks
//! [`ChatAllowance::check`] before it sends a player's words to others and
//! reports what it sent ([`super::Outcome::chat_spent`]), so what counts as
//! chat (`say`, a shout, a tell) is the game's to decide. Pure arithmetic:
//! the caller reads the clock.

use std::time::{Duration, Instant};

/// The configured limit: a token bucket in bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChatLimit {
    /// What a player may say at once, in bytes ([`ChatLimit::cost`]).
    pub burst_bytes: f64,
    /// ...refilled at this many bytes a second.
    pub bytes_per_sec: f64,
}

/// What one chat line costs besides its text: a line of a few characters is
/// still a line every listener reads, so a flood of short lines is held to
/// a few a second, not hundreds.
pub const CHAT_LINE_OVERHEAD: usize = 256;

impl ChatLimit {
    /// 16 KiB at once, 1 KiB a second: a conversation never meets it (a
    /// hundred-character line costs 356 bytes: ~45 lines at once, ~3 a
    /// second after), while a flood of 4 KiB lines gets three out and then
    /// one every four seconds.
    pub const DEFAULT: ChatLimit = ChatLimit {
        burst_bytes: 16.0 * 1024.0,
        bytes_per_sec: 1024.0,
    };

    /// No limit (tests and benches of other things).
    pub const UNLIMITED: ChatLimit = ChatLimit {
        burst_bytes: f64::INFINITY,
        bytes_per_sec: f64::INFINITY,
    };

    /// What saying `len` bytes costs.
    pub fn cost(len: usize) -> f64 {
        (len + CHAT_LINE_OVERHEAD) as f64
    }
}

/// One session's bucket. Starts full.
#[derive(Clone, Copy, Debug, Default)]
pub struct ChatBucket {
    /// Tokens at `at`; `None`: full.
    tokens: Option<(f64, Instant)>,
}

impl ChatBucket {
    fn tokens(&self, limit: &ChatLimit, now: Instant) -> f64 {
        match self.tokens {
            None => limit.burst_bytes,
            Some((t, at)) => {
                let refill = now.saturating_duration_since(at).as_secs_f64() * limit.bytes_per_sec;
                (t + refill).min(limit.burst_bytes)
            }
        }
    }

    /// What the player may say now.
    pub fn allowance(&self, limit: &ChatLimit, now: Instant) -> ChatAllowance {
        ChatAllowance {
            tokens: self.tokens(limit, now),
            limit: *limit,
        }
    }

    /// The player said `len` bytes to others.
    pub fn spend(&mut self, limit: &ChatLimit, len: usize, now: Instant) {
        if len == 0 || limit.burst_bytes.is_infinite() {
            return;
        }
        let left = self.tokens(limit, now) - ChatLimit::cost(len);
        self.tokens = Some((left, now));
    }
}

/// What a player may say at this moment, as a game sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChatAllowance {
    tokens: f64,
    limit: ChatLimit,
}

impl ChatAllowance {
    /// No limit.
    pub const UNLIMITED: ChatAllowance = ChatAllowance {
        tokens: f64::INFINITY,
        limit: ChatLimit::UNLIMITED,
    };

    /// `Ok` if `len` bytes may be said now; else how long until they may
    /// (whole seconds, at least one). A line longer than the whole burst
    /// may be said on a full bucket, so no line is refused for ever.
    pub fn check(&self, len: usize) -> Result<(), Duration> {
        let cost = ChatLimit::cost(len);
        if cost <= self.tokens || self.tokens >= self.limit.burst_bytes {
            return Ok(());
        }
        let need = cost.min(self.limit.burst_bytes) - self.tokens;
        let secs = (need / self.limit.bytes_per_sec).ceil().max(1.0);
        Err(Duration::from_secs(secs as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: ChatLimit = ChatLimit {
        burst_bytes: 4096.0,
        bytes_per_sec: 512.0,
    };

    #[test]
    fn a_burst_then_a_refusal_that_says_how_long_then_a_refill() {
        let t0 = Instant::now();
        let mut b = ChatBucket::default();
        let line = 1024 - CHAT_LINE_OVERHEAD;
        for _ in 0..4 {
            assert_eq!(b.allowance(&LIMIT, t0).check(line), Ok(()));
            b.spend(&LIMIT, line, t0);
        }
        assert_eq!(
            b.allowance(&LIMIT, t0).check(line),
            Err(Duration::from_secs(2))
        );
        let later = t0 + Duration::from_secs(2);
        assert_eq!(b.allowance(&LIMIT, later).check(line), Ok(()));
    }

    #[test]
    fn a_line_longer_than_the_burst_goes_out_on_a_full_bucket_only() {
        let t0 = Instant::now();
        let mut b = ChatBucket::default();
        assert_eq!(b.allowance(&LIMIT, t0).check(8000), Ok(()));
        b.spend(&LIMIT, 8000, t0);
        let wait = b.allowance(&LIMIT, t0).check(8000).unwrap_err();
        assert!(wait >= Duration::from_secs(8), "{wait:?}");
    }

    #[test]
    fn unlimited_never_refuses() {
        let t0 = Instant::now();
        let mut b = ChatBucket::default();
        for _ in 0..1000 {
            b.spend(&ChatLimit::UNLIMITED, 4096, t0);
            let a = b.allowance(&ChatLimit::UNLIMITED, t0);
            assert_eq!(a.check(4096), Ok(()));
        }
        assert_eq!(ChatAllowance::UNLIMITED.check(usize::MAX / 2), Ok(()));
    }
}
