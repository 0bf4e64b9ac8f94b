//! What waits for a zone's next commit (output commit): the replies to
//! the lines it covers, whether the zone's state may have changed since
//! the last one, and when a commit that did not land is tried again. The
//! frames themselves wait in each session's stream ([`GateStream`](super::stream::GateStream)).

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::handle::InputReply;

/// A zone actor's replies and retry clock waiting for its next commit.
#[derive(Default)]
pub(crate) struct Awaiting {
    replies: Vec<(String, oneshot::Sender<InputReply>, InputReply)>,
    retry_at: Option<Instant>,
    touched: bool,
    /// Since when commits are refused by a row they cannot settle.
    refused_since: Option<Instant>,
}

impl Awaiting {
    /// `reply` answers `key`'s line once the commit covering it landed.
    pub(crate) fn reply(&mut self, key: &str, to: oneshot::Sender<InputReply>, reply: InputReply) {
        self.replies.push((key.to_string(), to, reply));
    }

    /// Answer the waiting lines of every player but those `waits` says
    /// still wait (their rows are not committed).
    pub(crate) fn answer(&mut self, waits: impl Fn(&str) -> bool) {
        let (wait, answer): (Vec<_>, Vec<_>) = std::mem::take(&mut self.replies)
            .into_iter()
            .partition(|(key, ..)| waits(key));
        self.replies = wait;
        for (_, to, reply) in answer {
            let _ = to.send(reply);
        }
    }

    /// Something may have changed the zone's state (a command, a tick).
    pub(crate) fn touch(&mut self) {
        self.touched = true;
    }

    pub(crate) fn touched(&self) -> bool {
        self.touched
    }

    /// A commit landed with the zone's state as it is now.
    pub(crate) fn committed(&mut self) {
        self.touched = false;
        self.retry_at = None;
    }

    /// A commit did not land: try again no sooner than `at`.
    pub(crate) fn retry_from(&mut self, at: Instant) {
        self.retry_at = Some(at);
    }

    /// When a commit that did not land is tried again.
    pub(crate) fn retry_at(&self) -> Option<Instant> {
        self.retry_at
    }

    /// A commit was refused by a row it could not settle: for how long
    /// that has been so.
    pub(crate) fn refused(&mut self) -> std::time::Duration {
        self.refused_since
            .get_or_insert_with(Instant::now)
            .elapsed()
    }

    /// A commit landed: no row refuses any more.
    pub(crate) fn refusals_ended(&mut self) {
        self.refused_since = None;
    }

    /// Whether a retry is due no sooner than now.
    pub(crate) fn backing_off(&self) -> bool {
        self.retry_at.is_some_and(|at| Instant::now() < at)
    }
}
