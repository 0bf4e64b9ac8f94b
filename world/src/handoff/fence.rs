//! The commit fence: a handed-off player plays before its `Commit` resolves,
//! but never writes until it has.
//!
//! The destination puts the player into play as soon as the gate attaches
//! and sends the signed `Commit` to the source alongside, so the player's
//! pause does not wait on that round trip. What the `Commit` decides is
//! only *which epoch the destination writes under*:
//! - accepted ([`CommitOutcome::Committed`]): the snapshot's epoch, minted by the
//!   source's `ClaimCharacter`, and the snapshot's `state_version`;
//! - refused (the source already saved the frozen snapshot at its pending
//!   TTL) or unanswered (the source crashed or hangs): a newer epoch, minted
//!   by the destination's own `ClaimCharacter`, from the row's current
//!   version ([`CommitOutcome::Reclaimed`]) — minted only if nobody else claimed
//!   the character meanwhile ([`CommitOutcome::Superseded`]).
//!
//! Until then the session is *held*: it applies input and the gate keeps
//! every line un-`DurableAck`ed, but no save is sent, so the source's
//! possible save of the frozen snapshot under the same epoch can never race
//! a destination write. Never two writers: the source removed the player
//! before the `Redirect` and only ever writes the frozen snapshot; the
//! destination writes only after the fence resolves. Nothing lost: whatever
//! the held session applied is either saved once the fence resolves or still
//! in the gate's replay buffer, above the durable row's `applied_seq` — a
//! `quit` that cannot be saved closes the session *not* final, so the gate
//! resumes and replays it rather than dropping its buffer.

use std::time::Duration;

use tokio::sync::watch;

use super::context::RPC_TIMEOUT;
use telos_redis::store::ClaimId;

/// How long a save that must not be skipped (quit, link loss, shutdown,
/// drain, another handoff) waits for an in-flight `Commit`: its RPC bound
/// plus a second for the destination's own claim when the source does not
/// answer. A store still failing after that leaves the fence unresolved
/// (the save is skipped as it would have failed).
pub const SETTLE_BOUND: Duration = Duration::from_millis(RPC_TIMEOUT.as_millis() as u64 + 1_000);

/// How an in-flight `Commit` resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitOutcome {
    /// The source accepted it: write under the snapshot's epoch and version.
    Committed,
    /// Refused or unanswered: a newer epoch was minted (under `claim`);
    /// write under it, from the row's version as that claim read it.
    Reclaimed {
        epoch: u64,
        claim: ClaimId,
        state_version: u64,
    },
    /// Refused or unanswered, and someone else (a login, a resume, a
    /// takeover) has claimed the character since: this session is stale.
    /// It keeps the handoff's epoch, so its next save is refused and it is
    /// closed as claimed elsewhere.
    Superseded { winner: u64 },
}

/// Who writes a player's row: the epoch (and the claim that minted it) and
/// the row version the write is based on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteAs {
    pub epoch: u64,
    pub claim: ClaimId,
    pub state_version: u64,
}

impl CommitOutcome {
    /// The settle rule, in one place: what a session holding `held` (the
    /// snapshot's identity) writes under once its `Commit` resolved.
    /// Committed: `held` stands. Reclaimed: the minted epoch, never lower
    /// (a refused handoff from here may have minted an even newer one
    /// meanwhile), from the row version its claim read. Superseded: `held`
    /// stands too, so a write is refused by the newer owner's epoch; a
    /// caller that must not even try asks [`CommitOutcome::is_superseded`].
    pub fn settle(self, held: WriteAs) -> WriteAs {
        match self {
            CommitOutcome::Committed | CommitOutcome::Superseded { .. } => held,
            CommitOutcome::Reclaimed {
                epoch,
                claim,
                state_version,
            } => {
                let (epoch, claim) = if epoch > held.epoch {
                    (epoch, claim)
                } else {
                    (held.epoch, held.claim)
                };
                WriteAs {
                    epoch,
                    claim,
                    state_version,
                }
            }
        }
    }

    /// Claimed elsewhere meanwhile: the session is stale.
    pub fn is_superseded(self) -> bool {
        matches!(self, CommitOutcome::Superseded { .. })
    }
}

/// The session's side: travels with the player in its `SessionMeta`.
#[derive(Debug, Clone)]
pub struct CommitFence(watch::Receiver<Option<CommitOutcome>>);

/// The `Commit` task's side: resolves the fence exactly once.
#[derive(Debug)]
pub struct CommitResolver(watch::Sender<Option<CommitOutcome>>);

/// A new, unresolved fence.
pub fn commit_fence() -> (CommitResolver, CommitFence) {
    let (tx, rx) = watch::channel(None);
    (CommitResolver(tx), CommitFence(rx))
}

impl CommitFence {
    /// The outcome, if the `Commit` has resolved.
    pub fn outcome(&self) -> Option<CommitOutcome> {
        *self.0.borrow()
    }

    /// Wait for the outcome, at most `bound`. `None`: still unresolved (or
    /// its task is gone, which resolves nothing).
    pub async fn wait(&mut self, bound: Duration) -> Option<CommitOutcome> {
        let waited = tokio::time::timeout(bound, self.0.wait_for(Option::is_some)).await;
        match waited {
            Ok(Ok(outcome)) => *outcome,
            _ => None,
        }
    }
}

impl CommitResolver {
    pub fn resolve(self, outcome: CommitOutcome) {
        // No receiver left: the session ended meanwhile; nothing to tell.
        let _ = self.0.send(Some(outcome));
    }

    /// Every session copy is gone (the player left while unresolved).
    pub fn abandoned(&self) -> bool {
        self.0.is_closed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn unresolved_until_resolved_then_every_copy_sees_it() {
        let (resolver, mut fence) = commit_fence();
        let mut copy = fence.clone();
        assert_eq!(fence.outcome(), None);
        assert_eq!(fence.wait(Duration::from_millis(10)).await, None);
        let reclaimed = CommitOutcome::Reclaimed {
            epoch: 9,
            claim: ClaimId::from_u64(9),
            state_version: 4,
        };
        resolver.resolve(reclaimed);
        assert_eq!(fence.outcome(), Some(reclaimed));
        assert_eq!(copy.wait(Duration::from_secs(1)).await, Some(reclaimed));
    }

    #[tokio::test]
    async fn abandoned_once_every_session_copy_is_dropped() {
        let (resolver, fence) = commit_fence();
        let copy = fence.clone();
        drop(fence);
        assert!(!resolver.abandoned());
        drop(copy);
        assert!(resolver.abandoned());
    }

    #[tokio::test]
    async fn a_dropped_resolver_never_resolves() {
        let (resolver, mut fence) = commit_fence();
        drop(resolver);
        assert_eq!(fence.wait(Duration::from_millis(50)).await, None);
    }
}

#[cfg(test)]
mod settle_tests {
    use super::*;

    #[test]
    fn the_settle_rule_moves_only_to_a_newer_minted_epoch() {
        let (old, minted) = (ClaimId::random(), ClaimId::random());
        let held = WriteAs {
            epoch: 5,
            claim: old,
            state_version: 9,
        };
        assert_eq!(CommitOutcome::Committed.settle(held), held);
        assert_eq!(CommitOutcome::Superseded { winner: 7 }.settle(held), held);
        assert!(CommitOutcome::Superseded { winner: 7 }.is_superseded());
        let reclaimed = CommitOutcome::Reclaimed {
            epoch: 6,
            claim: minted,
            state_version: 11,
        };
        assert_eq!(
            reclaimed.settle(held),
            WriteAs {
                epoch: 6,
                claim: minted,
                state_version: 11
            }
        );
        // A newer epoch minted here meanwhile is never lowered; the version
        // is the reclaim's.
        let newer = WriteAs { epoch: 8, ..held };
        assert_eq!(
            reclaimed.settle(newer),
            WriteAs {
                epoch: 8,
                claim: old,
                state_version: 11
            }
        );
    }
}
