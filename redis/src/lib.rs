//! # Layout
//! Everything Telos keeps in Redis, below every process that uses it.
//! - [`acl`]: every command Telos sends, and the ACL line that grants them.
//! - [`directory`]: cluster coordination: zone leases, the shard registry and
//!   presence, drain reservations, pending transfers, the online list, and
//!   [`directory::connection::RedisConn`], the one way to talk to Redis.
//! - [`store`]: durable character rows: create, claim (owner epochs), load,
//!   fenced save, heal; passwords; resume credentials.
//! - [`status`]: the cluster view `telosctl status` and `Admin.Status` print.
//! - [`target`]: [`target::RedisTarget`], where Redis is and the credentials
//!   for it (ACL password, TLS CA); [`target::redact`] for every printed URL.
//! - [`sentinel`]: `redis+sentinel://` URLs and the lookup of the primary
//!   through Redis Sentinel.
//!
//! Every decision is one Lua script (the `*.lua` files beside the modules),
//! atomic on the server and on the server's clock.

pub mod acl;
pub mod directory;
pub mod primary;
pub mod sentinel;
pub mod status;
pub mod store;
pub mod target;
