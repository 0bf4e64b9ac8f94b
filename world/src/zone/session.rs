//! Per-player session state held by the zone actor next to the character.

use tokio::time::Instant;

use crate::handoff::fence::{CommitFence, SETTLE_BOUND, WriteAs};
use crate::model::PlayerBox;
use crate::model::chat::ChatBucket;
pub use crate::zone::stream::GateStream;
use telos_redis::store::ClaimId;

pub use crate::zone::stream::OUT_CHANNEL;

/// Session bookkeeping that travels with a player between zone actors.
#[derive(Debug)]
pub struct SessionMeta {
    /// Gate connection id; `seq` numbers are per connection.
    pub conn_id: String,
    /// The ownership epoch this session writes the durable row under.
    pub epoch: u64,
    /// The claim that minted `epoch` (the row's `owner_claim`): tells this
    /// session's epoch from the same number minted again by someone else
    /// after Redis lost writes.
    pub claim: ClaimId,
    /// The claim id of this session's last departure that ended with the
    /// player staying. An attempt may have minted under it with its reply
    /// lost: an epoch the row holds under this id is this session's own
    /// (adopted at the next save), and the next departure reuses the id so
    /// its claim is answered with that epoch instead of being refused.
    pub departure_claim: Option<ClaimId>,
    /// The durable row's `state_version` (CAS base of the next save).
    pub state_version: u64,
    /// Highest input seq applied: a line with `seq <= applied_seq` is dropped.
    pub applied_seq: u64,
    /// `applied_seq` covered by the last successful save (last `DurableAck`).
    pub saved_seq: u64,
    /// Durable state changed since the last save.
    pub dirty: bool,
    /// The player quit (or hung up): the session's last line is applied
    /// and its save records that this connection's session ended there
    /// (the row's `quit_seq`), so a resume after a lost save reply is
    /// answered `Goodbye.` instead of played on.
    pub quit: bool,
    /// The stream to the player's gate.
    pub stream: GateStream,
    /// The durable row this character saves to (rides the handoff snapshot).
    pub persist_id: String,
    /// What the player may still say to others (the chat limit; it starts
    /// full on each shard).
    pub chat: ChatBucket,
    /// Handed off here and its `Commit` is still in flight: the session
    /// plays but must not write until it resolves (see
    /// [`fence`](crate::handoff::fence)).
    pub commit: Option<CommitFence>,
}

impl SessionMeta {
    /// Lines applied but not yet covered by a save.
    pub fn unsaved_lines(&self) -> u64 {
        self.applied_seq.saturating_sub(self.saved_seq)
    }

    pub fn needs_save(&self) -> bool {
        self.dirty || self.unsaved_lines() > 0
    }

    /// May this session write the durable row now? Settles a resolved
    /// commit fence into the epoch and version first; `false` while the
    /// `Commit` is still in flight.
    pub fn writable(&mut self) -> bool {
        let Some(fence) = &self.commit else {
            return true;
        };
        match fence.outcome() {
            None => false,
            Some(outcome) => {
                // Superseded too: the next save is refused by the newer
                // owner's epoch and the session is closed as stale.
                let w = outcome.settle(WriteAs {
                    epoch: self.epoch,
                    claim: self.claim,
                    state_version: self.state_version,
                });
                (self.epoch, self.claim, self.state_version) = (w.epoch, w.claim, w.state_version);
                self.commit = None;
                true
            }
        }
    }

    /// For a save that must not be skipped: wait (bounded) for an in-flight
    /// `Commit`, then settle it. `false`: still unresolved.
    pub async fn settle(&mut self) -> bool {
        self.settle_by(Instant::now() + SETTLE_BOUND).await
    }

    /// [`settle`](Self::settle) with a deadline shared by several sessions
    /// (a zone stopping saves everyone within one bound, not one each).
    pub async fn settle_by(&mut self, deadline: Instant) -> bool {
        if let Some(fence) = &mut self.commit {
            fence
                .wait(deadline.saturating_duration_since(Instant::now()))
                .await;
        }
        self.writable()
    }
}

/// A player entering a zone from a login, resume or takeover.
pub struct Joining {
    pub character: PlayerBox,
    pub meta: SessionMeta,
    /// The `Attached` frame to send first (its `ack_input_seq` is filled in
    /// by the actor, so it always precedes the room description).
    pub attached: telos_proto::v1::Attached,
    /// How the player comes in: what the room and the player are shown.
    pub arrival: crate::model::Arrival,
}

/// A player moving between two zone actors of this shard.
pub struct SiblingMove {
    pub character: PlayerBox,
    pub meta: SessionMeta,
    /// Direction they walked, for the arrival message.
    pub dir: Option<crate::model::Direction>,
    /// Room to return to if the destination refuses.
    pub from_room: String,
    /// When the walk is refused if it has not landed (see
    /// [`WALK_RETRY_WINDOW`](super::WALK_RETRY_WINDOW)).
    pub until: Instant,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handoff::fence::CommitOutcome;
    use crate::handoff::fence::commit_fence;
    use telos_proto::v1::ServerFrame;
    use tokio::sync::mpsc;

    fn meta(epoch: u64, state_version: u64) -> SessionMeta {
        meta_on(mpsc::channel(1).0, epoch, state_version)
    }

    fn meta_on(out: mpsc::Sender<ServerFrame>, epoch: u64, state_version: u64) -> SessionMeta {
        SessionMeta {
            conn_id: "c".into(),
            epoch,
            claim: ClaimId::from_u64(epoch),
            departure_claim: None,
            state_version,
            applied_seq: 5,
            saved_seq: 0,
            dirty: true,
            quit: false,
            stream: GateStream::new(out),
            persist_id: "p".into(),
            chat: ChatBucket::default(),
            commit: None,
        }
    }

    #[test]
    fn a_session_without_a_fence_is_writable() {
        assert!(meta(3, 1).writable());
    }

    #[test]
    fn held_until_committed_then_writes_under_the_snapshot_epoch() {
        let (resolver, fence) = commit_fence();
        let mut m = meta(7, 2);
        m.commit = Some(fence);
        assert!(!m.writable());
        assert!(!m.writable(), "still held on a second look");
        resolver.resolve(CommitOutcome::Committed);
        assert!(m.writable());
        assert_eq!((m.epoch, m.state_version), (7, 2));
        assert!(m.commit.is_none());
    }

    #[test]
    fn reclaimed_moves_to_the_newer_epoch_and_the_rows_version() {
        let (resolver, fence) = commit_fence();
        let mut m = meta(7, 2);
        m.commit = Some(fence);
        resolver.resolve(CommitOutcome::Reclaimed {
            epoch: 9,
            claim: ClaimId::from_u64(99),
            state_version: 3,
        });
        assert!(m.writable());
        assert_eq!((m.epoch, m.state_version), (9, 3));
        assert_eq!(m.claim, ClaimId::from_u64(99), "the claim that minted it");
    }

    #[test]
    fn reclaimed_never_lowers_an_epoch_minted_meanwhile() {
        let (resolver, fence) = commit_fence();
        let mut m = meta(7, 2);
        m.commit = Some(fence);
        m.epoch = 11; // a refused handoff from here minted 11
        resolver.resolve(CommitOutcome::Reclaimed {
            epoch: 9,
            claim: ClaimId::from_u64(99),
            state_version: 3,
        });
        assert!(m.writable());
        assert_eq!((m.epoch, m.state_version), (11, 3));
    }

    #[test]
    fn superseded_keeps_the_handoffs_epoch_so_the_next_save_is_refused() {
        let (resolver, fence) = commit_fence();
        let mut m = meta(7, 2);
        m.commit = Some(fence);
        resolver.resolve(CommitOutcome::Superseded { winner: 8 });
        assert!(m.writable());
        assert_eq!((m.epoch, m.state_version), (7, 2));
    }

    #[tokio::test]
    async fn settle_waits_for_the_outcome() {
        let (resolver, fence) = commit_fence();
        let mut m = meta(7, 2);
        m.commit = Some(fence);
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            resolver.resolve(CommitOutcome::Committed);
        });
        assert!(m.settle().await);
        assert!(m.commit.is_none());
    }
}
