//! Whether this shard can take players now, as `/readyz` and
//! `grpc.health.v1` say: not while it drains (a drain flips readiness
//! first of all), not before its boot zones were claimed once, and not
//! while its registry heartbeat to Redis fails (the leases it renews the
//! same way are then at risk), nor while the gates cannot reach it (it
//! holds no zone then: `telos_redis::directory::reach`).

use std::sync::atomic::{AtomicBool, Ordering};

/// What the shard's loops report for its readiness.
#[derive(Debug, Default)]
pub struct Readiness {
    /// The boot zones' first claiming pass has run.
    booted: AtomicBool,
    /// The last registry heartbeat reached Redis.
    registry_ok: AtomicBool,
    /// A stop signal came (SIGTERM, SIGINT, superseded): never ready again.
    stopping: AtomicBool,
    /// The last heartbeat found the shard cut off from the gates.
    cut_off: AtomicBool,
}

impl Readiness {
    pub fn booted(&self) {
        self.booted.store(true, Ordering::Relaxed);
    }

    pub fn heartbeat(&self, ok: bool) {
        self.registry_ok.store(ok, Ordering::Relaxed);
    }

    /// The gates' view, as the last heartbeat found it; whether it changed.
    pub fn cut_off(&self, cut_off: bool) -> bool {
        self.cut_off.swap(cut_off, Ordering::Relaxed) != cut_off
    }

    /// Never ready again (a stop signal came).
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Relaxed);
    }

    /// `Ok` while a shard (`draining` or not) can take players; else why.
    pub fn check(&self, draining: bool) -> Result<(), String> {
        if self.stopping.load(Ordering::Relaxed) {
            return Err("stopping".into());
        }
        if draining {
            return Err("draining".into());
        }
        if !self.booted.load(Ordering::Relaxed) {
            return Err("claiming its boot zones".into());
        }
        if !self.registry_ok.load(Ordering::Relaxed) {
            return Err("its registry heartbeat does not reach Redis".into());
        }
        if self.cut_off.load(Ordering::Relaxed) {
            return Err("no gate can reach it".into());
        }
        Ok(())
    }
}
