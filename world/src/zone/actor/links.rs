//! What arrives on a player's link to the gate, as the actor's loop hands
//! it on: a handed-off arrival asking in, a line of input, the stream's
//! end, the client's hang-up. A player frozen mid-move keeps what comes
//! for it (its lines queue, a hang-up is acted on if the move is refused).

use tokio::sync::{mpsc, oneshot};
use tracing::debug;

use super::ZoneActor;
use crate::zone::handle::InputReply;
use crate::zone::leavers::Leaving;
use crate::zone::session::Joining;
use telos_proto::v1::ServerFrame;

impl ZoneActor {
    /// A handed-off arrival joins unless another session of the character
    /// is frozen here mid-move or leaving (the attach retries, then resumes
    /// from the durable row), a newer claim of it joined here first (a
    /// login: the arrival's older epoch must not take that over), it is
    /// not this zone's, or the zone takes nobody now.
    pub(super) fn join_or_return(&mut self, player: Box<Joining>) -> Result<u64, Box<Joining>> {
        let key = player.character.key();
        let busy = self.frozen.contains_key(&key)
            || self.quits.holds(&key)
            || self.newer_in_play(&key, &player.meta);
        let misrouted = self.misrouted(&*player.character).is_some();
        if busy || misrouted || self.stopping() || !self.lease_valid() {
            return Err(player);
        }
        Ok(self.join(*player).unwrap_or_default())
    }

    /// A line of input: applied and answered, or queued with a player
    /// frozen mid-move. Nothing changes a sealed zone any more: its player
    /// is frozen in place (and fanned off with the rest) and the line
    /// waits with them.
    pub(super) async fn on_input(
        &mut self,
        key: &str,
        conn_id: &str,
        seq: u64,
        line: String,
        reply: oneshot::Sender<InputReply>,
    ) {
        if self.phase.is_sealed() {
            self.freeze_in_place(key);
        }
        if let Some(f) = self.frozen.get_mut(key)
            && f.meta.conn_id == conn_id
        {
            f.queued.push((seq, line, reply));
            return;
        }
        let result = self.input(key, conn_id, seq, &line).await;
        self.answer(key, reply, result);
    }

    /// The stream `stream` ended: its session, if it is still that
    /// stream's, is saved and taken out of play (see
    /// [`ZoneHandle::detach`](crate::zone::handle::ZoneHandle::detach)).
    pub(super) async fn detach(
        &mut self,
        key: &str,
        conn_id: &str,
        stream: &mpsc::WeakSender<ServerFrame>,
    ) {
        let ended = stream.upgrade();
        let its_own = self.sessions.get(key).is_some_and(|m| {
            m.conn_id == conn_id
                && ended
                    .as_ref()
                    .is_some_and(|s| m.stream.sender().same_channel(s))
        });
        if its_own {
            debug!(zone = %self.id, player = %key, "link dead: saving and removing");
            self.leave_committed(key, Leaving::LinkDead).await;
        }
    }

    /// The client hung up after its last line: the session ends as a quit
    /// does. Mid-move, it is acted on if the move is refused and the
    /// player stays (see `unfreeze`).
    pub(super) async fn hang_up(&mut self, key: &str, conn_id: &str) {
        if let Some(f) = self.frozen.get_mut(key)
            && f.meta.conn_id == conn_id
        {
            f.hung_up = true;
        } else if self.sessions.get(key).is_some_and(|m| m.conn_id == conn_id) {
            debug!(zone = %self.id, player = %key, "client hung up: leaving as a quit");
            self.leave_committed(key, Leaving::Quit).await;
        }
    }
}
