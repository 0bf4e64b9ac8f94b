//! Players leaving for good (after their zone's commit), one player's row
//! healed alone (Redis lost it), and what a refused save means. Every
//! other write of a player's row is its zone's commit (`commit`).

use tokio::time::Instant;
use tracing::warn;

use super::{Leaving, RECONNECTING, ZoneActor};
use crate::zone::persist::{Saved, save_player};

impl ZoneActor {
    /// Save one player alone with the CAS on `state_version` and
    /// `owner_epoch` (a row Redis lost is healed from the session): on
    /// success the gate gets `DurableAck` for every line applied so far.
    /// Skipped while a handoff's `Commit` is in flight.
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

    /// A player leaves for good once what their lines did here is
    /// committed with their row, when that commit lands. When it cannot
    /// (Redis slow or away), the leaver still leaves and its final save is
    /// tried alone, as before one-command-one-commit: the one place a row
    /// is still written apart from its zone (the zone's own half follows
    /// at its next commit; a crash between the two is the gap left, see
    /// docs/operations.md).
    pub(super) async fn leave_committed(&mut self, key: &str, why: Leaving) {
        if !self.commit().await {
            warn!(zone = %self.id, player = %key, "a leaver's last commit did not land: its final save goes alone");
        }
        self.leave_for_good(key, why);
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
                m.stream
                    .output("Your character has been claimed elsewhere.\n".into());
            }
            self.close(key, "Claimed by a newer session.", true);
        } else {
            warn!(zone = %self.id, player = %key, carried, version, "save refused at our own epoch (state_version moved); keeping the session dirty");
        }
    }
}
