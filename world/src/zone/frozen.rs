//! A player frozen mid-move: out of the room, the move line applied, their
//! next inputs held in order while the move is attempted.

use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::handle::InputReply;
use super::session::SessionMeta;
use crate::model::{Direction, PlayerBox};
use telos_redis::store::ClaimId;

/// The rule a walk is held to: every command answered within 2 s beyond
/// the fault in progress, as the player (and the soak's checker) counts
/// them, from the line leaving the client.
pub const ANSWER_BOUND: Duration = Duration::from_secs(2);

/// How long a walk keeps trying before it is refused: a lease in flight, an
/// adoption's flip being observed (one 50 ms poll) or a Redis restart all
/// settle well within it. Shorter than [`ANSWER_BOUND`] by the last
/// attempt's own round trip and the way back to the player: a window of
/// the whole bound answered at 2.0 s plus that, late (healthy soak seeds
/// 395006880 and 555928961, refusals at the first kill's aftermath).
pub const WALK_RETRY_WINDOW: Duration = Duration::from_millis(1500);

/// First wait before a transient refusal is tried again; doubles up to
/// [`RETRY_BACKOFF_MAX`], so the window makes about six attempts.
const RETRY_BACKOFF: Duration = Duration::from_millis(50);
const RETRY_BACKOFF_MAX: Duration = Duration::from_millis(400);

/// How often a walk into a sibling zone that is still opening here looks
/// again (the directory resolved the zone to this shard: the lease is ours,
/// its confirmation is one 50 ms poll away).
const OPENING_POLL: Duration = Duration::from_millis(20);

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

    /// The wait before the next attempt after a transient refusal at
    /// `now`: a poll when the zone ahead is opening on this shard, else the
    /// backoff (doubled for the time after) — never past the window's end,
    /// so the refusal comes at the window, not a backoff after it.
    pub(super) fn wait_before_retry(&mut self, opening: bool, now: Instant) -> Duration {
        let wait = if opening {
            OPENING_POLL
        } else {
            let wait = self.backoff;
            self.backoff = (self.backoff * 2).min(RETRY_BACKOFF_MAX);
            wait
        };
        wait.min(self.until.saturating_duration_since(now))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The moment a walk whose every attempt is refused (transiently, each
    /// refusal `attempt` after the attempt starts) is answered, counted
    /// from the move line reaching the zone.
    fn refused_at(attempt: Duration) -> Duration {
        let start = Instant::now();
        let mut walk = Walk::new(None, start + WALK_RETRY_WINDOW);
        let mut now = start;
        loop {
            now += attempt;
            // handoff.rs: a refusal past the window answers the player.
            if now >= walk.until {
                return now - start;
            }
            now += walk.wait_before_retry(false, now);
            // departure.rs: a retry whose window closed answers the player.
            if now >= walk.until {
                return now - start;
            }
        }
    }

    #[test]
    fn a_walk_refused_again_and_again_is_answered_within_the_bound() {
        // The answer bound leaves this much for the move line's way to the
        // zone and the refusal's way back to the player.
        let transport = Duration::from_millis(300);
        for ms in [0, 1, 10, 50, 120, 200] {
            let at = refused_at(Duration::from_millis(ms));
            assert!(
                at + transport <= ANSWER_BOUND,
                "attempts of {ms} ms: refused {at:?} after the move line arrived"
            );
        }
    }

    #[test]
    fn the_retries_keep_trying_up_to_the_window() {
        // Not refused early either: a walk tries for the whole window.
        assert!(refused_at(Duration::ZERO) >= WALK_RETRY_WINDOW);
        let mut walk = Walk::new(None, Instant::now() + WALK_RETRY_WINDOW);
        let now = Instant::now();
        assert_eq!(walk.wait_before_retry(false, now), RETRY_BACKOFF);
        assert_eq!(walk.wait_before_retry(true, now), OPENING_POLL);
        assert_eq!(walk.wait_before_retry(false, now), RETRY_BACKOFF * 2);
    }
}
