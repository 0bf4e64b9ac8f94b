//! Partitions: one shard's links cut, held one way, slowed or reset through
//! the cluster's proxies (`cluster`), then healed. What a partitioned shard
//! may do is exactly what its lease allows: cut from Redis past the TTL it
//! fences before a peer can claim its zones, and its players are resumed
//! where their zones are served then.

use crate::proxy::LinkMode;

use super::super::clock::Ms;
use super::super::config::{CUT_DETECTION, FaultKind, LEASE_TTL};
use super::super::history::FaultRecord;
use super::super::probe::View;
use super::super::schedule::{Planned, slow_delay};
use super::Driver;

/// One of a shard's links, as a fault names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    /// The shard's connections to Redis.
    Redis,
    /// The gate's connections to the shard.
    Gate,
    /// The shard's connections to and from every peer.
    Peers,
    /// The gate's and every peer's: the shard reaches Redis only.
    Service,
    /// All of them.
    All,
}

impl Link {
    fn name(self) -> &'static str {
        match self {
            Link::Redis => "redis link",
            Link::Gate => "gate link",
            Link::Peers => "peer links",
            Link::Service => "gate and peer links",
            Link::All => "every link",
        }
    }
}

/// Which link a fault hits and how.
fn plan(p: &Planned) -> (Link, LinkMode) {
    match p.kind {
        FaultKind::CutRedis => (Link::Redis, LinkMode::Blackhole),
        FaultKind::CutPeers => (Link::Peers, LinkMode::Blackhole),
        FaultKind::CutGate => (Link::Gate, LinkMode::Blackhole),
        FaultKind::CutService => (Link::Service, LinkMode::Blackhole),
        // Down: the client's requests land, their answers are held (a
        // lease renewed in Redis that the shard never hears of; a move
        // applied whose answer the gate never gets). Up: the other way.
        FaultKind::OneWay => match p.zone_pick % 4 {
            0 => (Link::Redis, LinkMode::DropDown),
            1 => (Link::Redis, LinkMode::DropUp),
            2 => (Link::Gate, LinkMode::DropDown),
            _ => (Link::Gate, LinkMode::DropUp),
        },
        FaultKind::Slow => {
            let link = match p.zone_pick % 3 {
                0 => Link::Redis,
                1 => Link::Gate,
                _ => Link::Peers,
            };
            (link, LinkMode::Delay(slow_delay(p)))
        }
        _ => (Link::All, LinkMode::Reset),
    }
}

/// How long a link still holds traffic once healed. A slow link delivers
/// every chunk it read before the heal its delay later, in order, so
/// whatever waited on one (a lease renew, a save, a claim) is slow until
/// then, and so is what follows from it: the fault is restored only once
/// that has arrived (partition 971045071: moves sent 0.7 s after the heal
/// of a 2.6 s delay on a shard's Redis link were held to the healthy 2 s
/// bound while the zone the delayed renew had cost was being re-homed).
/// The other modes hold nothing back: a cut or one-way link's held bytes
/// flow at once.
fn held_after_heal(mode: LinkMode) -> std::time::Duration {
    match mode {
        LinkMode::Delay(d) => d,
        _ => std::time::Duration::ZERO,
    }
}

impl Driver<'_> {
    /// Put one shard's link under the fault's mode for its hold, then heal.
    pub(super) async fn link(
        &mut self,
        p: &Planned,
        view: &View,
        rec: &mut FaultRecord,
    ) -> anyhow::Result<()> {
        let i = self.hit_shard(p, view, rec);
        let (link, mode) = plan(p);
        rec.target = format!("{} {}", rec.target, link.name());
        rec.notes.push(format!("{mode:?}"));
        self.set_link(i, link, mode);
        if p.kind == FaultKind::CutService {
            // Its players wait for the cut's detection and for its zones
            // to be served elsewhere (the shard's next renew is refused,
            // then a peer's orphan look claims: half a lease TTL), not for
            // its length: their answers are judged from a window that ends
            // there.
            let served = CUT_DETECTION + LEASE_TTL / 2;
            rec.window_end = Some(rec.start + served.as_millis() as Ms);
        }
        tokio::time::sleep(p.hold).await;
        self.heal_links();
        tokio::time::sleep(held_after_heal(mode)).await;
        rec.restored = Some(self.clock.now());
        Ok(())
    }

    fn set_link(&self, i: usize, link: Link, mode: LinkMode) {
        let shards = &self.cluster.shards;
        let me = &shards[i];
        match link {
            Link::Redis => me.redis_link.set(mode),
            Link::Gate => me.front.set_for("gate", mode),
            Link::Peers => self.set_peer_links(i, mode),
            Link::Service => {
                me.front.set_for("gate", mode);
                self.set_peer_links(i, mode);
            }
            Link::All => {
                me.redis_link.set(mode);
                me.front.set(mode);
            }
        }
    }

    /// Shard `i`'s links to and from every peer.
    fn set_peer_links(&self, i: usize, mode: LinkMode) {
        let shards = &self.cluster.shards;
        for (j, peer) in shards.iter().enumerate().filter(|(j, _)| *j != i) {
            shards[i].front.set_for(&peer.id, mode);
            shards[j].front.set_for(&shards[i].id, mode);
        }
    }

    /// Every link of every shard passes again.
    fn heal_links(&self) {
        for s in &self.cluster.shards {
            s.front.heal();
            s.redis_link.heal();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn only_a_slow_link_holds_traffic_past_its_heal_and_for_its_delay() {
        let d = Duration::from_millis(2641);
        assert_eq!(held_after_heal(LinkMode::Delay(d)), d);
        for mode in [
            LinkMode::Blackhole,
            LinkMode::DropUp,
            LinkMode::DropDown,
            LinkMode::Reset,
            LinkMode::Pass,
        ] {
            assert_eq!(held_after_heal(mode), Duration::ZERO, "{mode:?}");
        }
    }
}
