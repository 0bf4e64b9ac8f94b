//! Login rate limiting per source IP: a token bucket shared by every
//! connection from that address, so opening many connections does not
//! multiply password guesses. A login attempt takes a token; a successful
//! one gives it back, so a busy NAT of honest players is only slowed by
//! failures.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Instant;

/// Addresses tracked before full buckets are pruned. A full bucket carries
/// no information, so pruning them loses nothing; this only bounds memory
/// against an attacker cycling source addresses.
pub const MAX_TRACKED_IPS: usize = 65_536;

/// A classic token bucket; time is passed in so it is testable.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    pub fn new(burst: u32, now: Instant) -> Self {
        Self {
            tokens: f64::from(burst),
            last: now,
        }
    }

    fn refill(&mut self, burst: u32, per_sec: f64, now: Instant) {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + dt * per_sec).min(f64::from(burst));
        self.last = now;
    }

    pub fn try_take(&mut self, burst: u32, per_sec: f64, now: Instant) -> bool {
        self.refill(burst, per_sec, now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    pub fn give_back(&mut self, burst: u32) {
        self.tokens = (self.tokens + 1.0).min(f64::from(burst));
    }

    fn is_full(&mut self, burst: u32, per_sec: f64, now: Instant) -> bool {
        self.refill(burst, per_sec, now);
        self.tokens >= f64::from(burst)
    }
}

#[derive(Debug)]
pub struct IpLimiter {
    burst: u32,
    per_sec: f64,
    buckets: Mutex<HashMap<IpAddr, TokenBucket>>,
}

impl IpLimiter {
    pub fn new(burst: u32, per_sec: f64) -> Self {
        Self {
            burst,
            per_sec,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// May `ip` try a login now? Takes a token if so.
    pub fn try_acquire(&self, ip: IpAddr, now: Instant) -> bool {
        let mut map = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MAX_TRACKED_IPS && !map.contains_key(&ip) {
            map.retain(|_, b| !b.is_full(self.burst, self.per_sec, now));
        }
        if map.len() >= MAX_TRACKED_IPS && !map.contains_key(&ip) {
            // Every tracked address is actively failing logins: refuse new
            // ones rather than grow without bound.
            return false;
        }
        map.entry(ip)
            .or_insert_with(|| TokenBucket::new(self.burst, now))
            .try_take(self.burst, self.per_sec, now)
    }

    /// The attempt succeeded: return its token.
    pub fn release(&self, ip: IpAddr) {
        let mut map = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = map.get_mut(&ip) {
            b.give_back(self.burst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn bucket_allows_burst_then_refills() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(3, t0);
        assert!((0..3).all(|_| b.try_take(3, 1.0, t0)));
        assert!(!b.try_take(3, 1.0, t0));
        assert!(!b.try_take(3, 1.0, t0 + Duration::from_millis(500)));
        assert!(b.try_take(3, 1.0, t0 + Duration::from_millis(1100)));
        // Refill never exceeds the burst.
        let later = t0 + Duration::from_secs(3600);
        assert!((0..3).all(|_| b.try_take(3, 1.0, later)));
        assert!(!b.try_take(3, 1.0, later));
    }

    #[test]
    fn limiter_is_shared_per_ip_and_success_refunds() {
        let l = IpLimiter::new(2, 0.0);
        let now = Instant::now();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        assert!(l.try_acquire(a, now));
        assert!(l.try_acquire(a, now));
        assert!(!l.try_acquire(a, now));
        assert!(l.try_acquire(b, now), "another address has its own bucket");
        l.release(a);
        assert!(l.try_acquire(a, now));
    }

    #[test]
    fn tracked_addresses_are_bounded() {
        let l = IpLimiter::new(1, 0.0);
        let now = Instant::now();
        for i in 0..(MAX_TRACKED_IPS as u32 + 10) {
            l.try_acquire(IpAddr::from(i.to_be_bytes()), now);
        }
        assert!(l.buckets.lock().unwrap().len() <= MAX_TRACKED_IPS);
    }
}
