//! How callers reach a zone actor: a [`ZoneHandle`] sends a private
//! [`Msg`] with a `oneshot` reply and turns a closed mailbox into
//! [`ZoneUnavailable`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use telos_proto::v1::ServerFrame;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::lease::LeaseState;
use super::phase::DrainReport;
use super::session::{Joining, SiblingMove};
use crate::handoff::source::{Begun, Refused};
use telos_redis::store::ClaimId;

/// Mailbox bound. Each session has at most one input in flight (it awaits the
/// reply), so the depth is about the number of sessions plus timers; 4096
/// leaves room for a crowd without letting a stuck actor absorb memory.
pub const MAILBOX: usize = 4096;

/// The zone's mailbox is closed: the zone stopped (fence, shutdown).
#[derive(Debug, Clone, thiserror::Error)]
#[error("zone {0} is unavailable")]
pub struct ZoneUnavailable(pub String);

/// Why a join was refused.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    #[error(transparent)]
    Unavailable(#[from] ZoneUnavailable),
    #[error("zone {0} is stopping")]
    Stopping(String),
    /// The player's room is in another zone (its row was saved elsewhere
    /// after the caller routed it here): route again, to this zone.
    #[error("the player stands in zone {0}, not here")]
    Misrouted(String),
    /// A newer claim of the character is in play here (a later login or
    /// resume that joined first): this older one must not take it over —
    /// the newer would refuse its saves. The caller claims again.
    #[error("a newer claim of the character is in play")]
    Superseded,
}

pub(crate) enum Msg {
    Join {
        player: Box<Joining>,
        reply: oneshot::Sender<Result<u64, JoinError>>,
    },
    JoinOrReturn {
        player: Box<Joining>,
        reply: oneshot::Sender<Result<u64, Box<Joining>>>,
    },
    Arrive {
        player: Box<SiblingMove>,
        reply: oneshot::Sender<Result<(), Box<SiblingMove>>>,
    },
    Input {
        key: String,
        conn_id: String,
        seq: u64,
        line: String,
        reply: oneshot::Sender<InputReply>,
    },
    Detach {
        key: String,
        conn_id: String,
        /// The stream that ended (see [`ZoneHandle::detach`]).
        stream: mpsc::WeakSender<ServerFrame>,
    },
    /// The player's client closed after its last line: end the session as
    /// `quit` does.
    Hangup { key: String, conn_id: String },
    /// A sibling refused a walking player: take them back and keep trying
    /// within the walk's window. The reply answers the move line; the
    /// transfer comes back on the second sender when this zone cannot hold
    /// the player either.
    TakeBack {
        transfer: Box<SiblingMove>,
        reply: oneshot::Sender<InputReply>,
        refused: oneshot::Sender<Box<SiblingMove>>,
    },
    /// The wait before another attempt at a frozen player's move is over.
    /// `departure` tells it from a later departure of the same player.
    RetryDeparture { key: String, departure: ClaimId },
    Shutdown {
        reason: String,
        reply: oneshot::Sender<()>,
    },
    /// Fan every player off in place, then stop (the lease has flipped).
    Drain {
        deadline: tokio::time::Instant,
        reply: oneshot::Sender<DrainReport>,
    },
    /// A private instance on a draining shard: walk everyone back out.
    Evacuate,
    /// The lease of a zone built ahead of it is ours at `generation`: open
    /// the zone's saved state before anyone is let in.
    Restore {
        generation: u64,
        reply: oneshot::Sender<bool>,
    },
    /// Freeze every player in place, stop the game's clock and save the
    /// zone's state: a hand-over is about to flip the lease.
    Seal { reply: oneshot::Sender<bool> },
    /// An adoption was never confirmed: tear down unless it has players or
    /// owes a durable write.
    Unadopt { reply: oneshot::Sender<Unadopted> },
    /// Words for one player of this zone (a `tell`): `true` once they
    /// have them, `false` when they are not here to hear (gone, or frozen
    /// mid-move).
    Hear {
        delivery: Box<crate::model::Delivery>,
        reply: oneshot::Sender<bool>,
    },
    /// A channel line for every player here but its speaker.
    Broadcast { line: Arc<crate::model::Broadcast> },
    /// `begin_handoff` for a frozen player finished. `departure` tells it
    /// from a later departure of the same player (the first was taken over).
    HandoffDone {
        key: String,
        departure: ClaimId,
        result: Result<Begun, Refused>,
    },
}

/// What happened to one input line.
pub enum InputReply {
    /// Applied; an `InputAck` went out.
    Applied,
    /// `seq <= applied_seq`: dropped, never re-applied.
    Duplicate,
    /// Applied, and the line walked the player into a sibling zone: the caller
    /// delivers the transfer to `to` and sends later lines there.
    Moved {
        to: ZoneHandle,
        transfer: Box<SiblingMove>,
    },
    /// The player is not (or no longer) in this zone under this connection
    /// (quit, taken over, or handed off to another shard).
    Gone,
    /// Inside the actor only, never a caller's answer: the line started a
    /// walk that is still being attempted; the reply is held and answered
    /// with the walk's outcome.
    Departing,
}

/// What an un-adoption did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unadopted {
    /// The unconfirmed zone was torn down.
    TornDown,
    /// Kept: it has acquired a player or owes a durable write (a
    /// recoverable leak beats a dropped player).
    Kept,
    /// Not an adoption (a claimed zone fences; it never deletes itself).
    NotAdopted,
    /// The actor had stopped already.
    Gone,
}

impl Unadopted {
    /// The zone no longer runs here.
    pub fn is_gone(self) -> bool {
        matches!(self, Unadopted::TornDown | Unadopted::Gone)
    }
}

/// A handle to a running zone actor.
#[derive(Clone)]
pub struct ZoneHandle {
    pub(super) id: Arc<str>,
    pub(super) tx: mpsc::Sender<Msg>,
    pub(super) cancel: CancellationToken,
    /// Set by the actor once it takes no more players (drain, fence,
    /// shutdown, un-adoption): shared so a sibling can tell before it
    /// sends one.
    pub(super) stopping: Arc<AtomicBool>,
    /// The zone's lease as this shard holds it (`None`: a private
    /// instance, which holds none).
    pub(super) lease: Option<LeaseState>,
}

impl ZoneHandle {
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The zone takes players now: running, not stopping, its lease
    /// confirmed and within its local deadline.
    pub fn accepts_arrivals(&self) -> bool {
        !self.is_stopping()
            && self
                .lease
                .as_ref()
                .is_none_or(|l| l.is_confirmed() && l.is_valid())
    }

    /// Built here ahead of a lease not yet observed (an adoption awaiting
    /// its flip, a transfer target awaiting completion): it will take
    /// players as soon as the lease is confirmed.
    pub fn is_opening(&self) -> bool {
        !self.is_stopping() && self.lease.as_ref().is_some_and(|l| !l.is_confirmed())
    }

    fn is_stopping(&self) -> bool {
        self.cancel.is_cancelled() || self.stopping.load(Ordering::SeqCst)
    }

    /// The same actor as `other` (not merely the same zone id: a zone
    /// rebuilt here is another actor).
    pub fn same_actor(&self, other: &ZoneHandle) -> bool {
        self.tx.same_channel(&other.tx)
    }

    /// The zone's lifetime token: cancelled when the zone stops for any reason.
    pub fn cancel_token(&self) -> &CancellationToken {
        &self.cancel
    }

    fn unavailable(&self) -> ZoneUnavailable {
        ZoneUnavailable(self.id.to_string())
    }

    /// Put a freshly claimed (or taken-over) player into the zone. Returns the
    /// session's `ack_input_seq`.
    pub async fn join(&self, player: Joining) -> Result<u64, JoinError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Msg::Join {
                player: Box::new(player),
                reply,
            })
            .await
            .map_err(|_| self.unavailable())?;
        rx.await.map_err(|_| self.unavailable())?
    }

    /// Like [`ZoneHandle::join`], but a refusal hands the player back so the
    /// caller can retry or save them.
    pub async fn join_or_return(&self, player: Joining) -> Result<u64, Option<Joining>> {
        let (reply, rx) = oneshot::channel();
        let msg = Msg::JoinOrReturn {
            player: Box::new(player),
            reply,
        };
        if let Err(mpsc::error::SendError(Msg::JoinOrReturn { player, .. })) =
            self.tx.send(msg).await
        {
            return Err(Some(*player));
        }
        match rx.await {
            Ok(r) => r.map_err(|b| Some(*b)),
            // The actor stopped holding the message: nothing to retry.
            Err(_) => Err(None),
        }
    }

    /// Hand a player walking in from a sibling zone of this shard. On refusal
    /// the transfer comes back so the caller can return the player.
    pub async fn arrive(&self, player: Box<SiblingMove>) -> Result<(), Box<SiblingMove>> {
        let (reply, rx) = oneshot::channel();
        if let Err(mpsc::error::SendError(msg)) = self.tx.send(Msg::Arrive { player, reply }).await
        {
            match msg {
                Msg::Arrive { player, .. } => return Err(player),
                _ => unreachable!("sent an Arrive"),
            }
        }
        // A dropped reply means the actor died holding the player; nothing to return.
        rx.await.unwrap_or(Ok(()))
    }

    /// A sibling refused the walking player this zone sent it: take them
    /// back (frozen, the move still being attempted). Answers the move line
    /// with the outcome; `Err` hands the player back when this zone cannot
    /// hold them either (it is stopping).
    pub async fn take_back(
        &self,
        transfer: Box<SiblingMove>,
    ) -> Result<InputReply, Option<Box<SiblingMove>>> {
        let (reply, answer) = oneshot::channel();
        let (refused, back) = oneshot::channel();
        let msg = Msg::TakeBack {
            transfer,
            reply,
            refused,
        };
        if let Err(mpsc::error::SendError(Msg::TakeBack { transfer, .. })) = self.tx.send(msg).await
        {
            return Err(Some(transfer));
        }
        match answer.await {
            Ok(r) => Ok(r),
            // Refused (the player comes back on `back`), or the actor died
            // holding them (nothing comes back).
            Err(_) => Err(back.await.ok()),
        }
    }

    /// Apply one input line (exactly once, by the session's watermark).
    pub async fn input(
        &self,
        key: &str,
        conn_id: &str,
        seq: u64,
        line: String,
    ) -> Result<InputReply, ZoneUnavailable> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Msg::Input {
                key: key.to_string(),
                conn_id: conn_id.to_string(),
                seq,
                line,
                reply,
            })
            .await
            .map_err(|_| self.unavailable())?;
        rx.await.map_err(|_| self.unavailable())
    }

    /// Give `delivery` to its player if they play here now; `false` when
    /// they do not (or the zone stopped).
    pub async fn hear(&self, delivery: crate::model::Delivery) -> bool {
        let (reply, rx) = oneshot::channel();
        let msg = Msg::Hear {
            delivery: Box::new(delivery),
            reply,
        };
        if self.tx.send(msg).await.is_err() {
            return false;
        }
        rx.await.unwrap_or(false)
    }

    /// Tell every player here `line` (but its speaker). Never waits: a zone
    /// whose mailbox is full misses a channel line rather than stall every
    /// other zone's.
    pub fn broadcast(&self, line: Arc<crate::model::Broadcast>) {
        if self.tx.try_send(Msg::Broadcast { line }).is_err() {
            metrics::counter!("telos_channel_lines_dropped_total").increment(1);
        }
    }

    /// The player's stream `stream` ended: save them and take them out of
    /// play — if that stream is still theirs. A newer stream of the same
    /// connection (a resume after the gate gave the old one up) may carry
    /// the session by now, and the old stream's end (its reset, held by a
    /// cut link until it healed) must not end it (partition seed 3030: a
    /// resumed player's stream ended 80 ms after it attached, its takeover
    /// view with it).
    pub async fn detach(&self, key: &str, conn_id: &str, stream: mpsc::WeakSender<ServerFrame>) {
        let _ = self
            .tx
            .send(Msg::Detach {
                key: key.to_string(),
                conn_id: conn_id.to_string(),
                stream,
            })
            .await;
    }

    /// The player's client hung up after every line already sent: the
    /// session ends as `quit` ends it (saved, resume credential revoked,
    /// `Closed{final}`). A player frozen mid-move leaves when the move is
    /// refused; one handed off meanwhile is hung up by the gate again at
    /// the destination.
    pub async fn hangup(&self, key: &str, conn_id: &str) {
        let _ = self
            .tx
            .send(Msg::Hangup {
                key: key.to_string(),
                conn_id: conn_id.to_string(),
            })
            .await;
    }

    /// Fan every player off in place (the lease has flipped to a peer) and
    /// stop; resolves with the per-player outcomes when the zone is empty or
    /// the deadline passed.
    pub async fn drain(
        &self,
        deadline: tokio::time::Instant,
    ) -> Result<DrainReport, ZoneUnavailable> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Msg::Drain { deadline, reply })
            .await
            .map_err(|_| self.unavailable())?;
        rx.await.map_err(|_| self.unavailable())
    }

    /// The lease of this zone, built ahead of it, is ours at `generation`
    /// (observed, not yet confirmed): open its saved state. False when it
    /// could not be opened (the zone must not be confirmed).
    pub async fn restore(&self, generation: u64) -> bool {
        let (reply, rx) = oneshot::channel();
        if self
            .tx
            .send(Msg::Restore { generation, reply })
            .await
            .is_err()
        {
            return false;
        }
        rx.await.unwrap_or(false)
    }

    /// Before a hand-over flips the lease: freeze every player in place,
    /// stop the zone's clock and save its state, so the new owner opens
    /// exactly this. True when the state is saved (or the game keeps none).
    pub async fn seal(&self) -> bool {
        let (reply, rx) = oneshot::channel();
        if self.tx.send(Msg::Seal { reply }).await.is_err() {
            return false;
        }
        rx.await.unwrap_or(false)
    }

    /// Walk every player of a private instance back to where they entered.
    pub async fn evacuate(&self) {
        let _ = self.tx.send(Msg::Evacuate).await;
    }

    /// Tear down an unconfirmed adoption (refused if it has a player or
    /// owes a durable write).
    pub async fn unadopt(&self) -> Unadopted {
        let (reply, rx) = oneshot::channel();
        if self.tx.send(Msg::Unadopt { reply }).await.is_err() {
            return Unadopted::Gone;
        }
        rx.await.unwrap_or(Unadopted::Gone)
    }

    /// Save every player, close their sessions with `reason` (gates resume
    /// them elsewhere) and stop.
    pub async fn shutdown(&self, reason: &str) {
        let (reply, rx) = oneshot::channel();
        if self
            .tx
            .send(Msg::Shutdown {
                reason: reason.to_string(),
                reply,
            })
            .await
            .is_ok()
        {
            let _ = rx.await;
        }
    }
}
