//! The audit log: one structured INFO line (target `telos::audit`) for each
//! login, failed login, creation, quit, hang-up and takeover, so an
//! operator can answer "who was on, from where, and how did they leave"
//! from the logs alone (metrics only count). A password is never logged:
//! nothing here is given one.

use std::net::SocketAddr;

use crate::client::End;

/// A login or a creation answered by the world (or refused before it).
pub fn login(peer: SocketAddr, conn_id: &str, name: &str, create: bool, outcome: &str) {
    let what = if create { "create" } else { "login" };
    tracing::info!(target: "telos::audit", event = what, outcome, player = name, %peer, conn_id, "audit");
}

/// The world closed a player's session for good (`Closed{final}`): a quit,
/// a takeover by another login, or the world's own reason. Read from the
/// world's words, for the log line only.
pub fn closed(peer: SocketAddr, conn_id: &str, name: &str, reason: &str) {
    let how = if reason.starts_with("Goodbye") {
        "quit"
    } else if reason.contains("logged in as you") {
        "taken over"
    } else {
        "closed by the world"
    };
    tracing::info!(target: "telos::audit", event = "session end", how, reason, player = name, %peer, conn_id, "audit");
}

/// A logged-in player's session ended at the gate: how, as an operator
/// reads it (the world's closes are [`closed`]'s).
pub fn session_end(peer: SocketAddr, conn_id: &str, name: &str, end: &End) {
    let how = match end {
        End::Closed(_) => return,
        End::ClientGone => "hang-up",
        End::Resumed => "resumed elsewhere",
        End::Idle => "idle",
        End::Shutdown => "gate shutdown",
        End::SlowClient => "slow client",
        _ => "other",
    };
    tracing::info!(target: "telos::audit", event = "session end", how, player = name, %peer, conn_id, "audit");
}
