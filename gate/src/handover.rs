//! What a telnet client presenting a resume token hands to the session it
//! resumes ([`crate::grace`]): its socket's halves, with the telnet
//! negotiation already done on them (the reader's negotiator holds the new
//! client's capabilities, the output its compression), and its address.

use std::net::SocketAddr;

use crate::output::Output;
use crate::reader::Reader;

pub struct Handover {
    pub reader: Reader,
    pub out: Output,
    pub peer: SocketAddr,
}
