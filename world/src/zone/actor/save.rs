//! Saving players: the cadence and early saves, a final save when a player
//! leaves for good, and what a refused save means.

use tokio::time::Instant;
use tracing::warn;

use super::{Leaving, RECONNECTING, ZoneActor};
use crate::handoff::fence::SETTLE_BOUND;
use crate::zone::persist::{Saved, save_player};

impl ZoneActor {
    /// Save one player with the CAS on `state_version` and `owner_epoch`;
    /// on success the gate gets `DurableAck` for every line applied so far.
    /// A cadence or early save: skipped while a handoff's `Commit` is in
    /// flight (the player stays dirty; the next one catches up).
    pub(super) async fn save(&mut self, key: &str) {
        self.save_as(key, None).await;
    }

    /// A player leaves for good: removed from play at once, saved off the
    /// actor's loop, and (for a quit) closed once the save's outcome is
    /// known — final only if it landed, so that otherwise the gate resumes
    /// and replays the lines only it holds, the quit included (see
    /// [`super::quits`]). A session a handoff's `Commit` still holds is
    /// saved once the `Commit` resolves (bounded), in the same pool.
    pub(super) fn leave_for_good(&mut self, key: &str, why: Leaving) {
        if matches!(why, Leaving::Quit)
            && let Some(m) = self.sessions.get_mut(key)
        {
            // The save below records that the session ended here (its
            // lines may be committed already: the mark is written anyway).
            m.quit = true;
            m.dirty = true;
        }
        self.leave_saving(key, why);
    }

    /// `settle_by`: a final save, waiting for an in-flight `Commit` until
    /// then; `None`: a cadence save, skipped while one is in flight.
    pub(super) async fn save_as(&mut self, key: &str, settle_by: Option<Instant>) {
        let (Some(character), Some(meta)) = (self.state.player(key), self.sessions.get_mut(key))
        else {
            return;
        };
        if let Some(deadline) = settle_by
            && meta.needs_save()
            && !meta.settle_by(deadline).await
        {
            warn!(zone = %self.id, player = %key, "Commit unresolved: not saving (the gate keeps the lines)");
        }
        match save_player(&self.env.store, &self.id, character, meta).await {
            Saved::NotOwner {
                carried,
                winner,
                version,
            } => self.ownership_lost(key, carried, winner, version),
            // Not provably ours to write, nor provably stale: the gate
            // resumes from the durable row and replays what only it holds.
            Saved::Reissued => self.close(key, RECONNECTING, false),
            Saved::Done | Saved::Failed | Saved::Held => {}
        }
    }

    /// A save came back not-owner. Compare against the epoch that won, not
    /// the one this save carried: only a newer claim elsewhere evicts.
    pub(super) fn ownership_lost(&mut self, key: &str, carried: u64, winner: u64, version: u64) {
        if winner > carried {
            warn!(zone = %self.id, player = %key, carried, winner, "character claimed elsewhere; closing this session");
            if let Some(m) = self.sessions.get_mut(key) {
                m.output("Your character has been claimed elsewhere.\n".into());
            }
            self.close(key, "Claimed by a newer session.", true);
        } else {
            warn!(zone = %self.id, player = %key, carried, version, "save refused at our own epoch (state_version moved); keeping the session dirty");
        }
    }

    /// Save everyone who needs it; `settle`: as final saves, all within one
    /// settle bound.
    pub(super) async fn save_all(&mut self, settle: bool) {
        let keys: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, m)| m.needs_save())
            .map(|(k, _)| k.clone())
            .collect();
        let settle_by = settle.then(|| Instant::now() + SETTLE_BOUND);
        for key in keys {
            // A cadence save stops at the lease's local deadline (one save
            // in flight at most runs past it); a settling save (a stop, a
            // fence) saves whatever the epochs still let it.
            if !settle && !self.lease_valid() {
                break;
            }
            self.save_as(&key, settle_by).await;
        }
    }
}
