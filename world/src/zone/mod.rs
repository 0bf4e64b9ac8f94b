//! # The zone actor
//! One tokio task per hosted zone is the single writer of that zone's state and
//! of every player in it. Callers hold a [`ZoneHandle`]; its methods send a
//! private [`Msg`] with a `oneshot` reply and turn a closed mailbox into
//! [`ZoneUnavailable`].
//!
//! Each module imports only those listed before it:
//! - [`lease`]: the renew loop and the local lease deadline (the fence).
//! - [`roster`]: who is online on this shard, published for `who`.
//! - [`events`]: a game's structured events as the Play stream carries them.
//! - [`hearing`]: how much of a room's chatter one player is shown.
//! - [`stream`]: a player's stream to the gate: answers held for the
//!   commit covering them, chatter bounded, the stream's end always
//!   delivered.
//! - [`session`]: per-player session state: the `applied_seq` watermark,
//!   epoch, its stream.
//! - [`phase`]: where an actor is in its life; a drain's report.
//! - [`comm`]: the queue of words leaving a zone (`tell`, `chat`).
//! - [`handle`]: [`ZoneHandle`], its messages and replies.
//! - [`hosted`]: [`Hosted`], the zones running here, and the one place it
//!   is decided that a zone opens here ([`Opening`]).
//! - [`env`]: what an actor needs from its shard.
//! - [`frozen`]: a player frozen mid-move.
//! - [`persist`]: the fenced save of one player.
//! - `state_row`: an actor's hold on its zone's durable state row.
//! - `awaiting`: what waits for the zone's next commit (output commit).
//! - `leavers`: final saves of players leaving for good, run beside the
//!   actor (a bounded number at once per zone).
//! - [`actor`]: the loop (`select!` over mailbox, tick, save cadence,
//!   cancellation, lease deadline) and command application; inside it, the
//!   player's departure and the drain.

mod actor;
mod awaiting;
pub mod comm;
pub mod env;
pub mod events;
mod frozen;
pub mod handle;
pub mod hearing;
pub mod hosted;
pub mod lease;
mod leavers;
mod persist;
pub mod phase;
pub mod roster;
pub mod session;
mod state_row;
pub mod stream;

pub use actor::{spawn_adopted_zone, spawn_zone};
pub use env::ZoneEnv;
pub use frozen::{ANSWER_BOUND, WALK_RETRY_WINDOW};
pub use handle::{InputReply, JoinError, MAILBOX, Unadopted, ZoneHandle, ZoneUnavailable};
pub use hosted::{Hosted, Opening, Taken};
pub use phase::DrainReport;
pub use session::{Joining, SessionMeta, SiblingMove};
pub use stream::GateStream;
