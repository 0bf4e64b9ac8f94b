//! The zone's clock: every tick the game's world moves on (with the zone's
//! dice), what a player was not shown of a loud room is summarised, and a
//! player whose gate stopped reading is reclaimed; a lost lease fences the
//! zone here too. A sealed zone's clock stands still, a draining one only
//! fans its players off.

use tracing::{debug, warn};

use super::ZoneActor;
use crate::zone::leavers::Leaving;
use crate::zone::phase::Phase;

impl ZoneActor {
    pub(super) async fn on_tick(&mut self) {
        if let Some(lease) = self.lease.as_ref().filter(|l| l.is_confirmed()) {
            metrics::gauge!("telos_zone_generation", "zone" => self.id.clone())
                .set(lease.generation() as f64);
        }
        if matches!(self.phase, Phase::Sealed) {
            // The zone's state is final: the game's clock stands still.
            if self.lease_lost() {
                self.handle.cancel.cancel();
            }
            return;
        }
        if self.phase.is_draining() {
            // The lease has flipped (or is flipping) to the peer; we only
            // fan players off now, so our own lease no longer fences.
            self.drain_tick().await;
            return;
        }
        if self.lease_lost() {
            self.handle.cancel.cancel();
            return;
        }
        let mut rng = self.rng;
        let mut roll = |n: u32| {
            // xorshift64*: game dice, not security.
            rng ^= rng >> 12;
            rng ^= rng << 25;
            rng ^= rng >> 27;
            (rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as u32 % n.max(1)
        };
        let deliveries = self.state.tick(&mut roll);
        self.rng = rng;
        self.touch();
        self.deliver(deliveries);
        for m in self.sessions.values_mut() {
            m.stream.summarise_skipped();
        }
        // A gate that stopped reading: reclaim the player (save, remove)
        // rather than buffer frames for it without bound.
        let wedged: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, m)| m.stream.wedged)
            .map(|(k, _)| k.clone())
            .collect();
        for key in wedged {
            warn!(zone = %self.id, player = %key, "out channel full: reclaiming a wedged session");
            metrics::counter!("telos_wedged_reclaims_total").increment(1);
            self.leave_committed(&key, Leaving::Wedged).await;
        }
        self.reclaim_gone_streams().await;
    }

    /// A session whose stream to the gate is gone (its receiver dropped)
    /// that no `Detach` took out of play: its link is dead all the same.
    /// A stream's end detaches only its own session, and a `Detach` can
    /// miss one (it went to the zone the player left, or came while the
    /// player was frozen mid-move); nothing would ever write to such a
    /// session again, so it is saved and removed here as a dead link is.
    async fn reclaim_gone_streams(&mut self) {
        let gone: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, m)| m.stream.sender().is_closed())
            .map(|(k, _)| k.clone())
            .collect();
        for key in gone {
            debug!(zone = %self.id, player = %key, "stream gone: saving and removing");
            self.leave_committed(&key, Leaving::LinkDead).await;
        }
    }
}
