//! Option negotiation for one connection (RFC 1143 "Q method", reduced to
//! the three options the gate cares about): accept NAWS and TTYPE, offer
//! ECHO only while a password is typed, refuse everything else.

use super::parser::{
    DO, DONT, IAC, OPT_ECHO, OPT_NAWS, OPT_TTYPE, SB, SE, TelnetEvent, WILL, WONT,
};

const TTYPE_IS: u8 = 0;
const TTYPE_SEND: u8 = 1;

/// One side of one option (RFC 1143).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Q {
    #[default]
    No,
    Yes,
    WantYes,
    WantNo,
}

/// Option state for one connection and the replies it owes the client.
#[derive(Debug, Default)]
pub struct Negotiator {
    /// Us: ECHO (we echo = the client hides what is typed).
    us_echo: Q,
    him_naws: Q,
    him_ttype: Q,
    /// True once the client sent any negotiation: it is a telnet client and
    /// can take ECHO toggles (a raw client would print them as garbage).
    pub speaks_telnet: bool,
    pub window: Option<(u16, u16)>,
    pub terminal_type: Option<String>,
}

fn cmd(verb: u8, opt: u8) -> [u8; 3] {
    [IAC, verb, opt]
}

impl Negotiator {
    /// Bytes to send when the connection opens: ask for window size and
    /// terminal type.
    pub fn greeting(&mut self) -> Vec<u8> {
        self.him_naws = Q::WantYes;
        self.him_ttype = Q::WantYes;
        [cmd(DO, OPT_NAWS), cmd(DO, OPT_TTYPE)].concat()
    }

    /// Hide (true) or show (false) what the client types. Returns bytes to
    /// send; nothing for a client that has not shown it speaks telnet.
    pub fn set_hide_input(&mut self, hide: bool) -> Vec<u8> {
        if !self.speaks_telnet {
            return Vec::new();
        }
        match (hide, self.us_echo) {
            (true, Q::No | Q::WantNo) => {
                self.us_echo = Q::WantYes;
                cmd(WILL, OPT_ECHO).to_vec()
            }
            (false, Q::Yes | Q::WantYes) => {
                self.us_echo = Q::WantNo;
                cmd(WONT, OPT_ECHO).to_vec()
            }
            _ => Vec::new(),
        }
    }

    /// Process one event; append any reply to `out`.
    pub fn handle(&mut self, ev: &TelnetEvent, out: &mut Vec<u8>) {
        match ev {
            TelnetEvent::Negotiate { verb, opt } => {
                self.speaks_telnet = true;
                self.negotiate(*verb, *opt, out);
            }
            TelnetEvent::Subnegotiation {
                opt: OPT_NAWS,
                data,
            } if data.len() == 4 => {
                let w = u16::from_be_bytes([data[0], data[1]]);
                let h = u16::from_be_bytes([data[2], data[3]]);
                self.window = Some((w, h));
            }
            TelnetEvent::Subnegotiation {
                opt: OPT_TTYPE,
                data,
            } if data.first() == Some(&TTYPE_IS) => {
                let name: String = String::from_utf8_lossy(&data[1..])
                    .chars()
                    .filter(|c| c.is_ascii_graphic())
                    .collect();
                self.terminal_type = Some(name);
            }
            TelnetEvent::Subnegotiation { .. } => {}
        }
    }

    fn negotiate(&mut self, verb: u8, opt: u8, out: &mut Vec<u8>) {
        match verb {
            WILL | WONT => {
                let accept = matches!(opt, OPT_NAWS | OPT_TTYPE);
                let q = match opt {
                    OPT_NAWS => &mut self.him_naws,
                    OPT_TTYPE => &mut self.him_ttype,
                    _ => {
                        // Refuse politely; a WONT for something off needs no answer.
                        if verb == WILL {
                            out.extend_from_slice(&cmd(DONT, opt));
                        }
                        return;
                    }
                };
                let was = *q;
                *q = match (verb, was) {
                    (WILL, Q::No) if accept => {
                        out.extend_from_slice(&cmd(DO, opt));
                        Q::Yes
                    }
                    (WILL, Q::WantYes | Q::Yes) => Q::Yes,
                    (WILL, _) => Q::No,
                    (_, Q::Yes) => {
                        out.extend_from_slice(&cmd(DONT, opt));
                        Q::No
                    }
                    _ => Q::No,
                };
                if opt == OPT_TTYPE && was != Q::Yes && *q == Q::Yes {
                    out.extend_from_slice(&[IAC, SB, OPT_TTYPE, TTYPE_SEND, IAC, SE]);
                }
            }
            DO | DONT => {
                if opt != OPT_ECHO {
                    if verb == DO {
                        out.extend_from_slice(&cmd(WONT, opt));
                    }
                    return;
                }
                self.us_echo = match (verb, self.us_echo) {
                    (DO, Q::WantYes | Q::Yes) => Q::Yes,
                    (DO, Q::No) => {
                        // The client asks us to echo but no password is being typed.
                        out.extend_from_slice(&cmd(WONT, OPT_ECHO));
                        Q::No
                    }
                    (DO, Q::WantNo) | (_, Q::WantNo | Q::WantYes | Q::No) => Q::No,
                    (_, Q::Yes) => {
                        out.extend_from_slice(&cmd(WONT, OPT_ECHO));
                        Q::No
                    }
                };
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiator_accepts_naws_and_ttype_and_refuses_others() {
        let mut n = Negotiator::default();
        assert_eq!(n.greeting(), vec![IAC, DO, OPT_NAWS, IAC, DO, OPT_TTYPE]);
        let mut out = Vec::new();
        n.handle(
            &TelnetEvent::Negotiate {
                verb: WILL,
                opt: OPT_NAWS,
            },
            &mut out,
        );
        assert!(out.is_empty(), "an answer to our own DO needs no reply");
        n.handle(
            &TelnetEvent::Negotiate {
                verb: WILL,
                opt: OPT_TTYPE,
            },
            &mut out,
        );
        assert_eq!(out, vec![IAC, SB, OPT_TTYPE, TTYPE_SEND, IAC, SE]);
        out.clear();
        n.handle(
            &TelnetEvent::Negotiate {
                verb: WILL,
                opt: 42,
            },
            &mut out,
        );
        assert_eq!(out, vec![IAC, DONT, 42]);
        out.clear();
        n.handle(&TelnetEvent::Negotiate { verb: DO, opt: 3 }, &mut out);
        assert_eq!(out, vec![IAC, WONT, 3]);
        out.clear();
        n.handle(
            &TelnetEvent::Subnegotiation {
                opt: OPT_NAWS,
                data: vec![0, 100, 0, 40],
            },
            &mut out,
        );
        assert_eq!(n.window, Some((100, 40)));
        n.handle(
            &TelnetEvent::Subnegotiation {
                opt: OPT_TTYPE,
                data: b"\0XTERM".to_vec(),
            },
            &mut out,
        );
        assert_eq!(n.terminal_type.as_deref(), Some("XTERM"));
        assert!(out.is_empty());
    }

    #[test]
    fn echo_toggles_only_for_telnet_clients_and_does_not_loop() {
        let mut raw = Negotiator::default();
        assert!(raw.set_hide_input(true).is_empty());

        let mut n = Negotiator::default();
        let mut out = Vec::new();
        n.handle(
            &TelnetEvent::Negotiate {
                verb: WILL,
                opt: OPT_NAWS,
            },
            &mut out,
        );
        assert_eq!(n.set_hide_input(true), vec![IAC, WILL, OPT_ECHO]);
        assert!(n.set_hide_input(true).is_empty());
        out.clear();
        n.handle(
            &TelnetEvent::Negotiate {
                verb: DO,
                opt: OPT_ECHO,
            },
            &mut out,
        );
        assert!(out.is_empty());
        assert_eq!(n.set_hide_input(false), vec![IAC, WONT, OPT_ECHO]);
        n.handle(
            &TelnetEvent::Negotiate {
                verb: DONT,
                opt: OPT_ECHO,
            },
            &mut out,
        );
        assert!(out.is_empty());
        // Unprompted DO ECHO is refused.
        n.handle(
            &TelnetEvent::Negotiate {
                verb: DO,
                opt: OPT_ECHO,
            },
            &mut out,
        );
        assert_eq!(out, vec![IAC, WONT, OPT_ECHO]);
    }
}
