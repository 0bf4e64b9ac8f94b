//! A player frozen mid-move: out of the room, the move line applied, their
//! next inputs held in order while the move is attempted.

use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::handle::InputReply;
use super::session::SessionMeta;
use crate::model::{Direction, PlayerBox};
use telos_redis::store::ClaimId;

/// How long a walk keeps trying before it is refused: a lease in flight, an
/// adoption's flip being observed (one 50 ms poll) or a Redis restart all
/// settle well within it, and a player waiting longer than this for a step
/// would take it for a hang (the rule: every command answered within 2 s
/// beyond the fault in progress).
pub const WALK_RETRY_WINDOW: Duration = Duration::from_secs(2);

/// First wait before a transient refusal is tried again; doubles up to
/// [`RETRY_BACKOFF_MAX`], so a 2 s window makes about six attempts.
const RETRY_BACKOFF: Duration = Duration::from_millis(50);
pub(super) const RETRY_BACKOFF_MAX: Duration = Duration::from_millis(400);

/// How often a walk into a sibling zone that is still opening here looks
/// again (the directory resolved the zone to this shard: the lease is ours,
/// its confirmation is one 50 ms poll away).
pub(super) const OPENING_POLL: Duration = Duration::from_millis(20);

/// The line a walk refused because the zone ahead never opened hears.
pub const OPENING_REFUSED: &str =
    "You can't go that way right now: the way ahead is still forming; try again shortly.";

/// A player frozen after applying the move line (or by a drain), while the
/// move is attempted. Their next input waits here (the session forwards one
/// line at a time): dropped on success (the gate replays it at the
/// destination), applied in order on failure (the player stays).
pub(super) struct FrozenPlayer {
    pub(super) character: PlayerBox,
    pub(super) meta: SessionMeta,
    pub(super) from_room: String,
    pub(super) target_room: String,
    pub(super) queued: Vec<(u64, String, oneshot::Sender<InputReply>)>,
    /// The client hung up after the queued lines (`Hangup`): if the move is
    /// refused, the player leaves as a quit once those lines are applied.
    pub(super) hung_up: bool,
    /// A `begin_handoff` for this player is running.
    pub(super) in_flight: bool,
    /// The player walked (not a drain's fan-off).
    pub(super) walk: Option<Walk>,
    /// This departure's id: the claim id every attempt mints the
    /// destination's epoch under (so a retry after a lost reply gets the
    /// same epoch back), and what tells this departure's timers and results
    /// from those of a later departure of the same player.
    pub(super) departure: ClaimId,
}

/// What a walk carries while it is attempted.
pub(super) struct Walk {
    /// The direction walked, for the arrival line of a sibling move.
    pub(super) dir: Option<Direction>,
    /// When the walk is refused if it has not landed.
    pub(super) until: Instant,
    /// The move line's reply, answered with the outcome.
    pub(super) reply: Option<oneshot::Sender<InputReply>>,
    /// Wait before the next attempt after a transient refusal.
    pub(super) backoff: Duration,
    /// What the last attempt was refused with: what the player hears if
    /// the window closes before another attempt lands.
    pub(super) refusal: Option<String>,
}

impl Walk {
    pub(super) fn new(dir: Option<Direction>, until: Instant) -> Walk {
        Walk {
            dir,
            until,
            reply: None,
            backoff: RETRY_BACKOFF,
            refusal: None,
        }
    }

    pub(super) fn answer(&mut self, reply: InputReply) {
        if let Some(tx) = self.reply.take() {
            let _ = tx.send(reply);
        }
    }

    pub(super) fn expired(&self) -> bool {
        Instant::now() >= self.until
    }
}

impl FrozenPlayer {
    /// Every caller waiting on this player is answered `Gone`: their lines
    /// are replayed wherever the player is served next.
    pub(super) fn release_callers(&mut self) {
        for (_, _, reply) in self.queued.drain(..) {
            let _ = reply.send(InputReply::Gone);
        }
        if let Some(walk) = &mut self.walk {
            walk.answer(InputReply::Gone);
        }
    }
}
