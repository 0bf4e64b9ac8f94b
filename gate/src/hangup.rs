//! A client that hung up (closed or half-closed its side, or whose socket
//! failed) with lines still to apply: the gate stops reading and sends
//! what it holds, then `Hangup` (on every stream it attaches on until the
//! world answers `Closed{final}`), and the world ends the session as
//! `quit` does. The play loop ([`crate::session`]) drives it.

/// Bounded by `--resume-give-up` from the hang-up, the time the gate
/// grants the world to take a player back after an outage; past it (a
/// world that does not know `Hangup` keeps the session) the stream is
/// dropped and the world saves the player as link-dead.
pub struct HungUp {
    pub give_up: tokio::time::Instant,
    /// `Hangup` went out on the current stream.
    pub sent: bool,
}

/// Resolves at a hung-up session's give-up time; never without one.
pub async fn give_up(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
