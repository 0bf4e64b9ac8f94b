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
//! - [`session`]: per-player session state: the `applied_seq` watermark,
//!   epoch, out channel.
//! - [`phase`]: where an actor is in its life; a drain's report.
//! - [`handle`]: [`ZoneHandle`], its messages and replies; [`Hosted`].
//! - [`env`]: what an actor needs from its shard.
//! - [`frozen`]: a player frozen mid-move.
//! - [`persist`]: the fenced save of one player.
//! - [`actor`]: the loop (`select!` over mailbox, tick, save cadence,
//!   cancellation, lease deadline) and command application; inside it, the
//!   player's departure and the drain.

mod actor;
pub mod env;
pub mod events;
mod frozen;
pub mod handle;
pub mod lease;
mod persist;
pub mod phase;
pub mod roster;
pub mod session;

pub use actor::{spawn_adopted_zone, spawn_zone};
pub use env::ZoneEnv;
pub use frozen::WALK_RETRY_WINDOW;
pub use handle::{Hosted, InputReply, JoinError, MAILBOX, Unadopted, ZoneHandle, ZoneUnavailable};
pub use phase::DrainReport;
pub use session::{Joining, SessionMeta, SiblingMove};
