//! What a page presenting a session's resume token brings ([`Attach`]),
//! what it is told when refused, how anything is sent to a page ([`send`],
//! bounded), and what a page may send ([`PageBudget`]).

use std::time::Duration;

use axum::extract::ws::{Message, Utf8Bytes, WebSocket};
use tokio::sync::oneshot;

use super::frames::Msg;
use crate::config_edge::{
    DEFAULT_INPUT_BYTES_PER_SEC, DEFAULT_PRE_LOGIN_BYTES_PER_SEC, PRE_LOGIN_BYTE_BURST,
};
use crate::ratelimit::AddressPlaces;
use crate::reader::ByteBudget;
use tokio::time::Instant;

/// How long a page whose WebSocket looks live has to answer a ping when
/// its session's token is presented elsewhere, before the resume takes it
/// over: a browser answers within a round trip.
pub const PROBE_BOUND: Duration = Duration::from_secs(5);
pub(super) const PROBE_PING: &[u8] = b"telos-probe";
/// Input a page may send while its probe waits (held, not yet passed to
/// the session, and going with it): past this the probe gives up on the
/// page, as the telnet side does (a page that dropped with a burst in the
/// gate's receive buffer is read only now, and must not look live).
pub(super) const PROBE_PENDING_BYTES: usize = 64 * 1024;

/// What a page presenting the token of a session in play is told (its
/// socket then goes on to a fresh login).
pub const LIVE_REFUSED: &str = "*** That session is in play on a live connection: a resume token resumes a session only after its connection dropped. Its player has been told.\r\n";
/// ...and what that player is told.
pub const TOLD_REFUSED: &str = "\r\n*** Someone presented this session's resume token from another connection; refused: this page is in play.\r\n";

/// A page resuming this session: its WebSocket, how many numbered
/// messages it has, and where its socket goes back if the session's own
/// page answers a liveness probe (dropped unused: resumed).
pub struct Attach {
    pub ws: WebSocket,
    pub seen: u64,
    /// The new page's places in the address counts: the resumed session is
    /// counted there from now (its first page's go back).
    pub places: Option<AddressPlaces>,
    /// The page's socket back, when it is not resumed, with the line that
    /// says why (none: the session ended meanwhile).
    pub refused: oneshot::Sender<Refused>,
}

/// A page's socket back, with the line that says why (none: the session
/// ended meanwhile), and its places in the address counts.
pub type Refused = (WebSocket, Option<&'static str>, Option<AddressPlaces>);

/// Send one message; a page that takes none for the stall timeout counts
/// as dropped (its session waits for a resume).
pub(super) async fn send(ws: &mut WebSocket, msg: Msg) -> Result<(), ()> {
    let m = match msg {
        Msg::Text(t) => Message::Text(Utf8Bytes::from(t)),
        Msg::Binary(b) => Message::Binary(b.into()),
    };
    match tokio::time::timeout(SEND_TIMEOUT, ws.send(m)).await {
        Ok(Ok(())) => Ok(()),
        _ => Err(()),
    }
}

/// See [`send`].
pub const SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// What a page may send: every message counted, the bridge's own too
/// (pings, `Telos.Seen`, `Telos.Size`) — a stranger's budget until login,
/// a player's after, as a telnet connection's (issue 30).
#[derive(Debug)]
pub struct PageBudget {
    budget: ByteBudget,
    /// The player's rate, until the page's session is seated.
    player: Option<u32>,
}

impl Default for PageBudget {
    fn default() -> Self {
        Self::new(DEFAULT_PRE_LOGIN_BYTES_PER_SEC, DEFAULT_INPUT_BYTES_PER_SEC)
    }
}

impl PageBudget {
    pub fn new(stranger: u32, player: u32) -> Self {
        PageBudget {
            budget: ByteBudget::new(stranger, PRE_LOGIN_BYTE_BURST),
            player: Some(player),
        }
    }

    /// The session logged in: a player's budget from now on.
    pub fn seated(&mut self) {
        if let Some(rate) = self.player.take() {
            self.budget = ByteBudget::player(rate);
        }
    }

    /// When the next message may be read; `None`: now.
    pub fn ready_at(&mut self) -> Option<Instant> {
        self.budget.ready_at(MESSAGE_COST)
    }

    /// A message was read: its cost, in debt if it is more than the
    /// budget held (a 16 KiB message read on 64 bytes of budget is waited
    /// out before the next one).
    pub fn spend(&mut self, m: &Message) {
        self.budget.spend(message_cost(m));
    }
}

/// What one message of the page costs of its budget: its payload and a
/// frame's overhead, so that empty pings are not free.
const MESSAGE_COST: usize = 64;

fn message_cost(m: &Message) -> usize {
    MESSAGE_COST
        + match m {
            Message::Text(t) => t.len(),
            Message::Binary(b) | Message::Ping(b) | Message::Pong(b) => b.len(),
            Message::Close(_) => 0,
        }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message larger than what the budget holds is read, and waited
    /// out after: a page sending 16 KiB messages on a stranger's 1 KiB/s
    /// gets one every 16 s, not one per 64 bytes of refill.
    #[tokio::test(start_paused = true)]
    async fn a_large_message_is_waited_out() {
        let mut b = PageBudget::new(1024, 1_000_000);
        assert!(b.ready_at().is_none());
        let big = Message::Text("x".repeat(PRE_LOGIN_BYTE_BURST as usize + 16 * 1024).into());
        b.spend(&big);
        let wait = b.ready_at().expect("in debt") - Instant::now();
        assert!(wait >= std::time::Duration::from_secs(15), "{wait:?}");
    }
}
