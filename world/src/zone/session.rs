//! Per-player session state held by the zone actor next to the character.

use telos_proto::v1::{ServerFrame, server_frame::Frame};
use tokio::sync::mpsc;

use crate::game::Character;

/// Bound of a player's out channel (frames towards the gate). A gate that
/// stops reading fills it; the player is then "wedged" and reclaimed rather
/// than letting the actor block or buffer without bound.
pub const OUT_CHANNEL: usize = 512;

/// Session bookkeeping that travels with a player between zone actors.
#[derive(Debug)]
pub struct SessionMeta {
    /// Gate connection id; `seq` numbers are per connection.
    pub conn_id: String,
    /// The ownership epoch this session writes the durable row under.
    pub epoch: u64,
    /// The durable row's `state_version` (CAS base of the next save).
    pub state_version: u64,
    /// Highest input seq applied: a line with `seq <= applied_seq` is dropped.
    pub applied_seq: u64,
    /// `applied_seq` covered by the last successful save (last `DurableAck`).
    pub saved_seq: u64,
    /// Durable state changed since the last save.
    pub dirty: bool,
    /// Frames to the gate.
    pub out: mpsc::Sender<ServerFrame>,
    /// The out channel was found full: the gate stopped reading.
    pub wedged: bool,
    /// The durable row this character saves to (rides the handoff snapshot).
    pub persist_id: String,
}

impl SessionMeta {
    /// Queue a frame without ever blocking the actor. A full channel marks the
    /// session wedged; the frame is dropped (the actor reclaims the player).
    pub fn send(&mut self, frame: Frame) {
        match self.out.try_send(ServerFrame { frame: Some(frame) }) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => self.wedged = true,
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }

    pub fn output(&mut self, text: String) {
        if !text.is_empty() {
            self.send(Frame::Output(telos_proto::v1::Output { text }));
        }
    }

    /// Lines applied but not yet covered by a save.
    pub fn unsaved_lines(&self) -> u64 {
        self.applied_seq.saturating_sub(self.saved_seq)
    }

    pub fn needs_save(&self) -> bool {
        self.dirty || self.unsaved_lines() > 0
    }
}

/// A player entering a zone from a login, resume or takeover.
pub struct Joining {
    pub character: Character,
    pub meta: SessionMeta,
    /// The `Attached` frame to send first (its `ack_input_seq` is filled in
    /// by the actor, so it always precedes the room description).
    pub attached: telos_proto::v1::Attached,
}

/// A player moving between two zone actors of this shard.
pub struct Transfer {
    pub character: Character,
    pub meta: SessionMeta,
    /// Direction they walked, for the arrival message.
    pub dir: Option<crate::game::Direction>,
    /// Room to return to if the destination refuses.
    pub from_room: String,
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
        to: super::ZoneHandle,
        transfer: Box<Transfer>,
    },
    /// The player is not (or no longer) in this zone under this connection
    /// (quit, taken over, or handed off to another shard).
    Gone,
}
