//! Where a zone actor is in its life, where it came from, and what a drain
//! reports.

use tokio::sync::oneshot;
use tokio::time::Instant;

/// Per-player outcomes of one zone's drain.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DrainReport {
    pub redirected: u64,
    pub reclaimed: u64,
    pub client_fault: u64,
}

impl std::ops::AddAssign for DrainReport {
    fn add_assign(&mut self, o: DrainReport) {
        self.redirected += o.redirected;
        self.reclaimed += o.reclaimed;
        self.client_fault += o.client_fault;
    }
}

pub(super) struct DrainState {
    pub(super) deadline: Instant,
    pub(super) reply: Option<oneshot::Sender<DrainReport>>,
    pub(super) report: DrainReport,
}

/// Where a zone actor is in its life. Only [`Phase::Open`] takes players;
/// the handle's `stopping` flag mirrors every other phase for callers.
pub(super) enum Phase {
    /// Taking players and applying input. A zone built ahead of its lease
    /// is open too: its unconfirmed lease keeps players out until it is
    /// confirmed.
    Open,
    /// About to be handed over (a drain, before its lease flip): every
    /// player is frozen in place, nothing is applied and the game does not
    /// tick, so the zone state saved at the seal is the zone's last; the
    /// drain that follows fans the players off.
    Sealed,
    /// The lease has flipped to a peer: every player is being fanned off in
    /// place (the zone's own lease no longer fences it).
    Draining(DrainState),
    /// Every player was fanned off: the loop ends (still not fenced).
    Drained,
    /// Fenced or shutting down: players are saved and closed, then the
    /// loop ends. A drain under way when the stop came is kept (`drain`):
    /// its caller is answered only when the actor has ended, so nothing
    /// that waits on a drain (a transfer's close releasing the lease) runs
    /// while this actor still applies input.
    Stopping { drain: Option<DrainState> },
    /// Un-adopted: the loop ends.
    Finished,
}

impl Phase {
    /// The actor's loop ends after the current message or tick.
    pub(super) fn is_over(&self) -> bool {
        matches!(self, Phase::Drained | Phase::Finished)
    }

    /// The zone's state is final here: sealed, or its players are being
    /// fanned off.
    pub(super) fn is_sealed(&self) -> bool {
        matches!(self, Phase::Sealed) || self.is_draining()
    }

    /// The zone's players are (being) fanned off to the lease's new owner.
    pub(super) fn is_draining(&self) -> bool {
        matches!(
            self,
            Phase::Draining(_) | Phase::Drained | Phase::Stopping { drain: Some(_) }
        )
    }
}

/// How the zone came to run here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Origin {
    /// Claimed: a boot or orphaned zone, or one opened for a transfer. Never
    /// un-adopted (a boot zone that loses its lease fences).
    Claimed,
    /// Built at runtime ahead of its lease (a drain adoption, a transfer
    /// target): the only kind ever un-adopted.
    Adopted,
    /// A private instance (`<zone>#<n>`), which holds no lease and ends once
    /// the last player has left it; `occupied` once anyone entered.
    Instance { occupied: bool },
}
