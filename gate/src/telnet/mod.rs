//! Telnet (RFC 854) for the player socket: a byte-level parser that strips
//! every IAC sequence out of the data stream, and a small option negotiator
//! (RFC 1143 "Q method", reduced to the three options we care about).
//!
//! The gate accepts NAWS and TTYPE from the client, offers ECHO only while a
//! password is typed, and refuses everything else. A raw line client that
//! never sends IAC is fine: it just never sees a negotiation answered.
//!
//! # Layout
//! - [`parser`]: the byte stream split into data and [`TelnetEvent`]s, with
//!   the protocol's command and option bytes.
//! - [`negotiator`]: the option state and the replies it owes (above the
//!   parser: it reads its events).

pub mod negotiator;
pub mod parser;

pub use self::negotiator::Negotiator;
pub use self::parser::{
    DO, DONT, IAC, MAX_SUBNEG_BYTES, OPT_ECHO, OPT_NAWS, OPT_TTYPE, SB, SE, TelnetEvent,
    TelnetParser, WILL, WONT,
};
