//! The telnet byte stream split into data bytes and [`TelnetEvent`]s: every
//! IAC sequence is taken out of the data, whatever the client sends.

// Command bytes (RFC 854).
pub const IAC: u8 = 255;
pub const DONT: u8 = 254;
pub const DO: u8 = 253;
pub const WONT: u8 = 252;
pub const WILL: u8 = 251;
pub const SB: u8 = 250;
pub const SE: u8 = 240;

// Option codes: ECHO (RFC 857), TTYPE (RFC 1091), NAWS (RFC 1073).
pub const OPT_ECHO: u8 = 1;
pub const OPT_TTYPE: u8 = 24;
pub const OPT_NAWS: u8 = 31;

/// Longest subnegotiation payload kept. NAWS needs 4 bytes, a terminal
/// type is a short name, a client's GMCP message (`Core.Supports.Set` with
/// a few dozen packages, `Core.Hello`) well under 1 KiB; anything longer is
/// hostile or broken and is dropped (the parser then skips to `IAC SE`) so
/// a client cannot grow gate memory with an unterminated `IAC SB`.
pub const MAX_SUBNEG_BYTES: usize = 4096;

/// What the parser found besides plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TelnetEvent {
    /// `IAC WILL/WONT/DO/DONT opt`.
    Negotiate { verb: u8, opt: u8 },
    /// A complete `IAC SB opt ... IAC SE` within the size bound.
    Subnegotiation { opt: u8, data: Vec<u8> },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Data,
    Iac,
    Verb(u8),
    SbOpt,
    Sb,
    SbIac,
    /// Subnegotiation too long: skip until `IAC SE`.
    SbSkip,
    SbSkipIac,
}

/// Splits a telnet byte stream into data bytes and [`TelnetEvent`]s. Any
/// input is valid; state persists across calls so sequences split over
/// reads work.
#[derive(Debug)]
pub struct TelnetParser {
    state: State,
    sb_opt: u8,
    sb: Vec<u8>,
}

impl Default for TelnetParser {
    fn default() -> Self {
        Self {
            state: State::Data,
            sb_opt: 0,
            sb: Vec::new(),
        }
    }
}

impl TelnetParser {
    pub fn feed(&mut self, input: &[u8], data: &mut Vec<u8>, events: &mut Vec<TelnetEvent>) {
        for &b in input {
            self.state = match (self.state, b) {
                (State::Data, IAC) => State::Iac,
                (State::Data, _) => {
                    data.push(b);
                    State::Data
                }
                (State::Iac, IAC) => {
                    data.push(IAC);
                    State::Data
                }
                (State::Iac, WILL | WONT | DO | DONT) => State::Verb(b),
                (State::Iac, SB) => State::SbOpt,
                // NOP, GA, AYT, BRK, a stray SE, ...: two-byte commands with
                // nothing for a line-based game to do.
                (State::Iac, _) => State::Data,
                (State::Verb(verb), opt) => {
                    events.push(TelnetEvent::Negotiate { verb, opt });
                    State::Data
                }
                (State::SbOpt, opt) => {
                    self.sb_opt = opt;
                    self.sb.clear();
                    State::Sb
                }
                (State::Sb, IAC) => State::SbIac,
                (State::Sb, _) => self.sb_push(b),
                (State::SbIac, IAC) => self.sb_push(IAC),
                (State::SbIac, SE) => {
                    events.push(TelnetEvent::Subnegotiation {
                        opt: self.sb_opt,
                        data: std::mem::take(&mut self.sb),
                    });
                    State::Data
                }
                // `IAC x` inside SB with x not SE/IAC: the client broke the
                // subnegotiation off. Drop it and read x as a command.
                (State::SbIac, _) => {
                    self.sb.clear();
                    match b {
                        WILL | WONT | DO | DONT => State::Verb(b),
                        SB => State::SbOpt,
                        _ => State::Data,
                    }
                }
                (State::SbSkip, IAC) => State::SbSkipIac,
                (State::SbSkip, _) => State::SbSkip,
                (State::SbSkipIac, SE) => State::Data,
                (State::SbSkipIac, _) => State::SbSkip,
            };
        }
    }

    /// Bytes of an unfinished subnegotiation held now (its buffer's
    /// capacity): at most [`MAX_SUBNEG_BYTES`], whatever the client sends.
    pub fn buffered_bytes(&self) -> usize {
        self.sb.capacity()
    }

    fn sb_push(&mut self, b: u8) -> State {
        if self.sb.len() >= MAX_SUBNEG_BYTES {
            self.sb = Vec::new();
            State::SbSkip
        } else {
            self.sb.push(b);
            State::Sb
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telnet::negotiator::Negotiator;

    fn parse(chunks: &[&[u8]]) -> (Vec<u8>, Vec<TelnetEvent>) {
        let mut p = TelnetParser::default();
        let (mut d, mut e) = (Vec::new(), Vec::new());
        for c in chunks {
            p.feed(c, &mut d, &mut e);
        }
        (d, e)
    }

    #[test]
    fn plain_data_passes_through() {
        assert_eq!(parse(&[b"look\r\n"]).0, b"look\r\n");
    }

    #[test]
    fn iac_iac_is_a_literal_255() {
        assert_eq!(parse(&[&[b'a', IAC, IAC, b'b']]).0, vec![b'a', 255, b'b']);
    }

    #[test]
    fn negotiation_split_across_reads_is_not_leaked() {
        let (d, e) = parse(&[b"ab", &[IAC], &[WILL], &[OPT_NAWS, b'c']]);
        assert_eq!(d, b"abc");
        assert_eq!(
            e,
            vec![TelnetEvent::Negotiate {
                verb: WILL,
                opt: OPT_NAWS
            }]
        );
    }

    #[test]
    fn naws_subnegotiation_with_escaped_iac() {
        let (d, e) = parse(&[&[IAC, SB, OPT_NAWS, 0, 80, IAC, IAC, 24, IAC, SE, b'x']]);
        assert_eq!(d, b"x");
        assert_eq!(
            e,
            vec![TelnetEvent::Subnegotiation {
                opt: OPT_NAWS,
                data: vec![0, 80, 255, 24]
            }]
        );
    }

    #[test]
    fn unterminated_subnegotiation_is_bounded() {
        let mut p = TelnetParser::default();
        let (mut d, mut e) = (Vec::new(), Vec::new());
        p.feed(&[IAC, SB, OPT_TTYPE], &mut d, &mut e);
        p.feed(&vec![b'z'; 1 << 20], &mut d, &mut e);
        assert!(p.sb.capacity() <= MAX_SUBNEG_BYTES * 2);
        assert!(d.is_empty() && e.is_empty());
        p.feed(&[IAC, SE, b'o', b'k'], &mut d, &mut e);
        assert_eq!(d, b"ok");
        assert!(
            e.is_empty(),
            "an oversized subnegotiation is dropped, not delivered"
        );
    }

    #[test]
    fn broken_subnegotiation_resyncs_on_next_command() {
        let (d, e) = parse(&[&[IAC, SB, OPT_NAWS, 1, 2, IAC, DO, OPT_ECHO, b'h', b'i']]);
        assert_eq!(d, b"hi");
        assert_eq!(
            e,
            vec![TelnetEvent::Negotiate {
                verb: DO,
                opt: OPT_ECHO
            }]
        );
    }

    #[test]
    fn truncated_sequences_at_end_of_input_do_not_panic_or_leak() {
        for tail in [
            &[IAC][..],
            &[IAC, WILL],
            &[IAC, SB],
            &[IAC, SB, 1, 2],
            &[IAC, SB, 1, IAC],
        ] {
            let (d, _) = parse(&[b"ok", tail]);
            assert_eq!(d, b"ok");
        }
    }

    #[test]
    fn random_garbage_never_panics_and_never_leaks_iac() {
        // Deterministic xorshift so failures reproduce.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for round in 0..2000 {
            let len = (round % 300) + 1;
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    // Bias towards telnet command bytes to hit every state.
                    if x.is_multiple_of(3) {
                        240 + (x >> 8) as u8 % 16
                    } else {
                        (x >> 16) as u8
                    }
                })
                .collect();
            let mut p = TelnetParser::default();
            let mut n = Negotiator::default();
            let (mut d, mut e, mut out) = (Vec::new(), Vec::new(), Vec::new());
            for chunk in bytes.chunks(1 + round % 7) {
                p.feed(chunk, &mut d, &mut e);
            }
            for ev in &e {
                n.handle(ev, &mut out);
            }
            let raw_iacs = bytes.iter().filter(|&&b| b == IAC).count();
            assert!(d.iter().filter(|&&b| b == IAC).count() <= raw_iacs / 2);
            assert!(p.sb.len() <= MAX_SUBNEG_BYTES);
        }
    }

    #[test]
    fn exhaustive_three_byte_sequences_after_iac() {
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                let (d, _) = parse(&[&[IAC, a, b, b'.']]);
                assert!(d.len() <= 3);
            }
        }
    }
}
