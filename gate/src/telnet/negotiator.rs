//! Option negotiation for one connection (RFC 1143 "Q method"): which
//! options are on, on which side, and the replies the client is owed.
//!
//! We offer GMCP, MSSP, MCCP2, EOR and CHARSET at connect and ask for NAWS
//! and TTYPE (CONTRACT.md, "MUD client protocols"); ECHO only while a
//! password is typed; everything else is refused once per request. A
//! request that changes nothing gets no answer, so two negotiators never
//! loop. What the options carry (window, terminal, GMCP subscriptions) is
//! in [`Capabilities`]; what needs the socket's output (compression on or
//! off) is left as a [`Change`] for the reader to apply in order.

use std::sync::Arc;

use super::caps::Capabilities;
use super::gmcp::{self, OPT_GMCP};
use super::mccp::{OPT_MCCP2, START as MCCP_START};
use super::mssp::{MsspStatus, OPT_MSSP};
use super::parser::{DO, DONT, IAC, OPT_ECHO, OPT_NAWS, SB, SE, TelnetEvent, WILL, WONT};
use super::qmethod::{Answer, Send, Side};
use super::ttype::{self, OPT_TTYPE, TTYPE_IS};

/// End of record (RFC 885): marks the end of a prompt.
pub const OPT_EOR: u8 = 25;
pub const OPT_CHARSET: u8 = 42;
/// Timing mark (RFC 860): `DO` it and a telnet client answers at once.
pub const OPT_TIMING_MARK: u8 = 6;
/// `IAC EOR` and `IAC GA`, the two ways to mark a prompt's end.
pub const CMD_EOR: u8 = 239;
pub const CMD_GA: u8 = 249;

const CHARSET_REQUEST: u8 = 1;
const CHARSET_ACCEPTED: u8 = 2;
const CHARSET_REJECTED: u8 = 3;

/// Options we turn on on our side at connect.
const OFFERED: [u8; 5] = [OPT_GMCP, OPT_MSSP, OPT_MCCP2, OPT_EOR, OPT_CHARSET];
/// Options we ask the client to turn on on its side.
const ASKED: [u8; 2] = [OPT_NAWS, OPT_TTYPE];

/// What the output must do, in order with the replies before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// `START` was just written: compress everything after it.
    CompressOn,
    /// The client said `DONT MCCP2`: end the stream.
    CompressOff,
}

/// Option state for one connection and the replies it owes the client.
#[derive(Debug, Default)]
pub struct Negotiator {
    /// Our side of each option (us: we do it).
    us: Side,
    /// The client's side (him: it does it).
    him: Side,
    pub caps: Capabilities,
    ttype: ttype::Cycle,
    /// Answers `DO MSSP`; a connection without one (a test) sends nothing.
    pub mssp: Option<Arc<MsspStatus>>,
    /// Set by [`handle`](Self::handle); the reader applies it right after
    /// writing the replies so far.
    pub change: Option<Change>,
    /// True once the client sent any negotiation: it is a telnet client and
    /// can take ECHO toggles (a raw client would print them as garbage).
    pub speaks_telnet: bool,
    /// Answers (`WILL` or `WONT`) to `DO TIMING-MARK`, the gate's liveness
    /// probe ([`crate::grace`]).
    pub timing_marks: u64,
}

/// Our side's verbs: `WILL` to enable, `WONT` to disable.
fn ours(send: Send, opt: u8) -> [u8; 3] {
    cmd(if send == Send::Enable { WILL } else { WONT }, opt)
}

/// The client's side's verbs: `DO` to enable, `DONT` to disable.
fn theirs(send: Send, opt: u8) -> [u8; 3] {
    cmd(if send == Send::Enable { DO } else { DONT }, opt)
}

fn cmd(verb: u8, opt: u8) -> [u8; 3] {
    [IAC, verb, opt]
}

impl Negotiator {
    /// Bytes to send when the connection opens: our offers, then what we ask.
    pub fn greeting(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        for opt in OFFERED {
            if let Some(send) = self.us.ask_enable(opt) {
                out.extend_from_slice(&ours(send, opt));
            }
        }
        for opt in ASKED {
            if let Some(send) = self.him.ask_enable(opt) {
                out.extend_from_slice(&theirs(send, opt));
            }
        }
        out
    }

    /// Hide (true) or show (false) what the client types. Returns bytes to
    /// send; nothing for a client that has not shown it speaks telnet.
    pub fn set_hide_input(&mut self, hide: bool) -> Vec<u8> {
        if !self.speaks_telnet {
            return Vec::new();
        }
        // Called when a line came in: a pending change the client never
        // answered is settled first (see `Side::settle`), so this one is
        // sent rather than queued behind it for good.
        let mut out = Vec::new();
        if let Some(s) = self.us.settle(OPT_ECHO) {
            out.extend_from_slice(&ours(s, OPT_ECHO));
        }
        let send = if hide {
            self.us.ask_enable(OPT_ECHO)
        } else {
            self.us.ask_disable(OPT_ECHO)
        };
        if let Some(s) = send {
            out.extend_from_slice(&ours(s, OPT_ECHO));
        }
        out
    }

    /// Whether the client takes `IAC EOR` after a prompt (else `IAC GA`
    /// for a telnet client, nothing for a raw one).
    pub fn prompt_end(&self) -> &'static [u8] {
        if self.caps.eor {
            &[IAC, CMD_EOR]
        } else if self.speaks_telnet {
            &[IAC, CMD_GA]
        } else {
            &[]
        }
    }

    /// Bytes of what the client said that this connection keeps: its
    /// names, GMCP subscriptions, the TTYPE cycle's last answer. Bounded
    /// by [`caps`](super::caps)' limits, whatever the client sends.
    pub fn held_bytes(&self) -> usize {
        let c = &self.caps;
        c.client_name.len()
            + c.terminal_type.len()
            + c.gmcp_packages.iter().map(String::len).sum::<usize>()
            + self.ttype.held_bytes()
    }

    /// Process one event; append any reply to `out`. A compression change
    /// is left in [`change`](Self::change): the caller applies it before
    /// the next event.
    pub fn handle(&mut self, ev: &TelnetEvent, out: &mut Vec<u8>) {
        match ev {
            TelnetEvent::Negotiate { verb, opt } => {
                self.speaks_telnet = true;
                self.caps.telnet = true;
                if *opt == OPT_TIMING_MARK && matches!(*verb, WILL | WONT) {
                    self.timing_marks += 1;
                }
                match *verb {
                    DO => self.on_do(*opt, out),
                    DONT => self.on_dont(*opt, out),
                    WILL => self.on_will(*opt, out),
                    WONT => self.on_wont(*opt, out),
                    _ => {}
                }
            }
            TelnetEvent::Subnegotiation { opt, data } => self.on_subnegotiation(*opt, data, out),
        }
    }

    /// `DO opt`: the client wants us to do it (or answers our offer).
    fn on_do(&mut self, opt: u8, out: &mut Vec<u8>) {
        // ECHO is ours to offer (while a password is typed), never the
        // client's to demand.
        let answer = self.us.received_enable(opt, OFFERED.contains(&opt));
        self.after_ours(opt, answer, out);
    }

    /// `DONT opt`: the client wants us to stop (or refuses our offer).
    fn on_dont(&mut self, opt: u8, out: &mut Vec<u8>) {
        let answer = self.us.received_disable(opt);
        self.after_ours(opt, answer, out);
    }

    fn after_ours(&mut self, opt: u8, answer: Answer, out: &mut Vec<u8>) {
        if let Some(send) = answer.send {
            out.extend_from_slice(&ours(send, opt));
        }
        match answer.turned {
            Some(true) => self.local_on(opt, out),
            Some(false) => self.local_off(opt),
            None => {}
        }
    }

    /// `WILL opt`: the client offers to do it (or answers our request).
    fn on_will(&mut self, opt: u8, out: &mut Vec<u8>) {
        let answer = self.him.received_enable(opt, ASKED.contains(&opt));
        self.after_theirs(opt, answer, out);
    }

    /// `WONT opt`: the client will not (or no longer) do it.
    fn on_wont(&mut self, opt: u8, out: &mut Vec<u8>) {
        let answer = self.him.received_disable(opt);
        self.after_theirs(opt, answer, out);
    }

    fn after_theirs(&mut self, opt: u8, answer: Answer, out: &mut Vec<u8>) {
        if let Some(send) = answer.send {
            out.extend_from_slice(&theirs(send, opt));
        }
        if answer.turned == Some(true) {
            self.remote_on(opt, out);
        }
    }

    /// One of our options just turned on.
    fn local_on(&mut self, opt: u8, out: &mut Vec<u8>) {
        match opt {
            OPT_GMCP => self.caps.gmcp = true,
            OPT_EOR => self.caps.eor = true,
            OPT_MSSP => {
                if let Some(m) = &self.mssp {
                    out.extend(m.frame());
                }
            }
            OPT_MCCP2 => {
                out.extend_from_slice(&MCCP_START);
                self.change = Some(Change::CompressOn);
            }
            OPT_CHARSET => {
                out.extend_from_slice(&[IAC, SB, OPT_CHARSET, CHARSET_REQUEST]);
                out.extend_from_slice(b";UTF-8");
                out.extend_from_slice(&[IAC, SE]);
            }
            _ => {}
        }
    }

    fn local_off(&mut self, opt: u8) {
        match opt {
            OPT_GMCP => self.caps.gmcp = false,
            OPT_EOR => self.caps.eor = false,
            OPT_MCCP2 => self.change = Some(Change::CompressOff),
            _ => {}
        }
    }

    /// One of the client's options just turned on.
    fn remote_on(&mut self, opt: u8, out: &mut Vec<u8>) {
        if opt == OPT_TTYPE {
            out.extend_from_slice(&ttype::SEND);
        }
    }

    fn on_subnegotiation(&mut self, opt: u8, data: &[u8], out: &mut Vec<u8>) {
        match opt {
            OPT_NAWS if data.len() == 4 => {
                self.caps.width = u16::from_be_bytes([data[0], data[1]]);
                self.caps.height = u16::from_be_bytes([data[2], data[3]]);
            }
            OPT_TTYPE
                if data.first() == Some(&TTYPE_IS)
                    && self.ttype.on_answer(&data[1..], &mut self.caps) =>
            {
                out.extend_from_slice(&ttype::SEND);
            }
            // Only while GMCP is on: a client that never enabled it has
            // nothing to say in it.
            OPT_GMCP if self.us.is_on(OPT_GMCP) => {
                gmcp::on_client_message(&mut self.caps, data, out);
            }
            OPT_CHARSET => self.on_charset(data, out),
            _ => {}
        }
    }

    /// CHARSET (RFC 2066): UTF-8 is the only one we speak.
    fn on_charset(&mut self, data: &[u8], out: &mut Vec<u8>) {
        match data.split_first() {
            Some((&CHARSET_ACCEPTED, name)) => {
                self.caps.utf8 = name.eq_ignore_ascii_case(b"UTF-8");
            }
            Some((&CHARSET_REJECTED, _)) => self.caps.utf8 = false,
            Some((&CHARSET_REQUEST, rest)) => {
                // `<sep><name><sep><name>...`, maybe after "[TTABLE]<v>".
                let offered = rest.split_first().is_some_and(|(&sep, names)| {
                    names
                        .split(|&b| b == sep)
                        .any(|n| n.eq_ignore_ascii_case(b"UTF-8"))
                });
                if offered {
                    self.caps.utf8 = true;
                    out.extend_from_slice(&[IAC, SB, OPT_CHARSET, CHARSET_ACCEPTED]);
                    out.extend_from_slice(b"UTF-8");
                } else {
                    out.extend_from_slice(&[IAC, SB, OPT_CHARSET, CHARSET_REJECTED]);
                }
                out.extend_from_slice(&[IAC, SE]);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
#[path = "negotiator_tests.rs"]
mod tests;
