//! Telnet (RFC 854) and the MUD client protocols on it, for the player
//! socket: a byte-level parser that strips every IAC sequence out of the
//! data stream, an option negotiator (RFC 1143 "Q method"), and the
//! options' own formats.
//!
//! The parser is our own, not libmudtelnet's: that crate keeps an
//! unterminated subnegotiation in its buffer without a bound (a client
//! sending `IAC SB` and then megabytes would grow gate memory), its option
//! model is a client's compatibility table rather than RFC 1143 state, and
//! ours is small, bounded ([`MAX_SUBNEG_BYTES`]) and fuzzed (through the
//! reader that runs it: `reader_fuzz_tests.rs`).
//!
//! A raw line client that never sends IAC is fine: it never sees a
//! negotiation answered, never gets GMCP, compression or prompt marks.
//!
//! # Layout
//! - [`parser`]: the byte stream split into data and [`TelnetEvent`]s, with
//!   the protocol's command and option bytes.
//! - [`caps`]: what the client negotiated ([`Capabilities`]), what the
//!   world is told of it.
//! - [`gmcp`]: GMCP framing, the client's `Core.*` messages, and
//!   [`gmcp::render`]: a world event as `Package.Name json`.
//! - [`mssp`]: the MSSP answer for crawlers.
//! - [`mccp`]: the MCCP2 zlib stream of one socket's output.
//! - [`ttype`]: TTYPE cycling and MTTS.
//! - [`qmethod`]: RFC 1143's per-option states with the queue bit.
//! - [`negotiator`]: the option state and the replies it owes (above the
//!   others: it reads the parser's events and fills the capabilities).

pub mod caps;
pub mod gmcp;
pub mod mccp;
pub mod mssp;
pub mod negotiator;
pub mod parser;
pub mod qmethod;
pub mod ttype;

pub use self::caps::Capabilities;
pub use self::negotiator::{Change, Negotiator};
pub use self::parser::{
    DO, DONT, IAC, MAX_SUBNEG_BYTES, OPT_ECHO, OPT_NAWS, OPT_TTYPE, SB, SE, TelnetEvent,
    TelnetParser, WILL, WONT,
};
