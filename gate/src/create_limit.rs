//! Character creation, limited three ways (issue 30, the edge): per
//! address (`--create-ip-burst`, `--create-ip-per-hour`), per network
//! (IPv4 /24, IPv6 /48: `--create-network-per-hour`) and for the whole
//! gate (`--create-per-hour`). Per address alone let a script spread over
//! a /24's addresses, or over twenty /24s, mint 2000 characters in under a
//! minute. A creation takes a token from all three or from none.

use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Instant;

use crate::config::GateConfig;
use crate::ratelimit::{IpLimiter, TokenBucket, ip_bucket, prefix_bucket};

const SECS_PER_HOUR: f64 = 3600.0;

/// The three budgets a creation spends from.
#[derive(Debug)]
pub struct CreateLimits {
    address: IpLimiter,
    network: IpLimiter,
    gate: Mutex<TokenBucket>,
    gate_burst: u32,
    gate_per_sec: f64,
}

impl CreateLimits {
    pub fn new(cfg: &GateConfig) -> Self {
        let caps = cfg.edge.create;
        let network_per_sec = f64::from(caps.per_network_per_hour) / SECS_PER_HOUR;
        let gate_burst = (caps.per_hour / 5).max(1);
        CreateLimits {
            address: IpLimiter::new(cfg.create_ip_burst, cfg.create_ip_per_hour / SECS_PER_HOUR),
            network: IpLimiter::new(caps.per_network_per_hour, network_per_sec),
            gate: Mutex::new(TokenBucket::new(gate_burst, Instant::now())),
            gate_burst,
            gate_per_sec: f64::from(caps.per_hour) / SECS_PER_HOUR,
        }
    }

    /// Would a creation from `ip` be let in now? Takes nothing (asked
    /// before the dialogue, so a refusal comes before the player typed).
    pub fn has_token(&self, ip: IpAddr, now: Instant) -> bool {
        self.address.has_token(ip_bucket(ip), now)
            && self.network.has_token(prefix_bucket(ip), now)
            && self.gate().level(self.gate_burst, self.gate_per_sec, now) >= 1.0
    }

    /// Take a token from every budget, or from none.
    pub fn try_acquire(&self, ip: IpAddr, now: Instant) -> bool {
        if !self.address.try_acquire(ip_bucket(ip), now) {
            return false;
        }
        if !self.network.try_acquire(prefix_bucket(ip), now) {
            self.address.release(ip_bucket(ip));
            return false;
        }
        if !self
            .gate()
            .try_take(self.gate_burst, self.gate_per_sec, now)
        {
            self.address.release(ip_bucket(ip));
            self.network.release(prefix_bucket(ip));
            return false;
        }
        true
    }

    /// The creation was not made (refused, or never sent): its tokens back.
    pub fn release(&self, ip: IpAddr) {
        self.address.release(ip_bucket(ip));
        self.network.release(prefix_bucket(ip));
        self.gate().give_back(self.gate_burst);
    }

    fn gate(&self) -> std::sync::MutexGuard<'_, TokenBucket> {
        self.gate.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config_edge::CreateCaps;

    fn limits(per_network_per_hour: u32, per_hour: u32) -> CreateLimits {
        let mut cfg = GateConfig {
            create_ip_burst: 5,
            create_ip_per_hour: 5.0,
            ..GateConfig::default()
        };
        cfg.edge.create = CreateCaps {
            per_network_per_hour,
            per_hour,
        };
        CreateLimits::new(&cfg)
    }

    fn addr(s: &str) -> IpAddr {
        s.parse().expect("an address")
    }

    #[test]
    fn a_network_spread_over_its_addresses_meets_its_own_budget() {
        let l = limits(20, 1_000_000);
        let now = Instant::now();
        let made = (1..=254)
            .filter(|i| (0..5).any(|_| l.try_acquire(addr(&format!("198.51.100.{i}")), now)))
            .count();
        assert_eq!(made, 20, "one /24: its 20, whatever its addresses");
        assert!(!l.has_token(addr("198.51.100.77"), now));
        assert!(l.try_acquire(addr("203.0.113.1"), now), "another network");
    }

    #[test]
    fn many_networks_meet_the_gates_budget() {
        let l = limits(20, 100);
        let now = Instant::now();
        let made = (0..=255u8)
            .map(|n| addr(&format!("10.{n}.0.1")))
            .filter(|ip| l.try_acquire(*ip, now))
            .count();
        assert_eq!(made, 20, "a fifth of 100 at once");
    }

    #[test]
    fn a_refusal_takes_nothing_and_a_release_gives_all_back() {
        let l = limits(1, 1_000_000);
        let now = Instant::now();
        let ip = addr("192.0.2.1");
        assert!(l.try_acquire(ip, now));
        // The network is spent: the address's own budget (5) is not
        // charged by the refusals, which the network's refused.
        for _ in 0..10 {
            assert!(!l.try_acquire(ip, now));
        }
        let left = l.address.level(ip_bucket(ip), now);
        assert!((3.9..4.1).contains(&left), "the address holds {left}");
        l.release(ip);
        assert!(l.try_acquire(ip, now));
    }

    #[test]
    fn a_refusal_by_the_gates_budget_gives_the_others_back() {
        let l = limits(1_000_000, 5); // the gate: one at once
        let now = Instant::now();
        assert!(l.try_acquire(addr("192.0.2.1"), now));
        assert!(!l.try_acquire(addr("198.51.100.1"), now));
        let ip = addr("198.51.100.1");
        assert!((4.9..5.1).contains(&l.address.level(ip_bucket(ip), now)));
        assert!(l.network.level(prefix_bucket(ip), now) > 1_000_000.0 - 1.1);
    }
}
