//! What a telnet client presenting a resume token hands to the session it
//! resumes ([`crate::grace`]): its socket's halves, with the telnet
//! negotiation already done on them (the reader's negotiator holds the new
//! client's capabilities, the output its compression), its address, and
//! where the session answers: the socket stays there, or (the session's
//! connection answered a liveness probe: it is in play) comes back.

use std::net::SocketAddr;

use tokio::sync::oneshot;

use crate::output::Output;
use crate::ratelimit::AddressPlaces;
use crate::reader::Reader;

pub struct Handover {
    pub reader: Reader,
    pub out: Output,
    pub peer: SocketAddr,
    /// The new connection's places in the address counts: the resumed
    /// session is counted there from now.
    pub places: Option<AddressPlaces>,
    pub answer: oneshot::Sender<Answer>,
}

/// The session's answer to a [`Handover`]. (A session that ends before it
/// answers has told the client so and closed its socket.)
pub enum Answer {
    Resumed,
    /// Refused: the session's own connection is live. The socket (and its
    /// places) back.
    Refused(Box<(Reader, Output, Option<AddressPlaces>)>),
}
