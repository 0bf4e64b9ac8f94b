//! TTYPE cycling and MTTS (https://tintin.mudhalla.net/protocols/mtts/):
//! each `IAC SB TTYPE SEND` makes the client name the next of its types.
//! The first answer is the client's name, the second its terminal type,
//! the third `MTTS <bits>`. A client that repeats itself has no more to
//! say; one that stops answering is simply never asked again (each request
//! follows an answer), so nothing waits on it.

use super::caps::{Capabilities, clean_name};
use super::parser::{IAC, SB, SE};

pub use super::parser::OPT_TTYPE;
pub const TTYPE_IS: u8 = 0;
pub const TTYPE_SEND: u8 = 1;

/// Requests at most: name, terminal type, MTTS.
pub const MAX_ROUNDS: u8 = 3;

pub const SEND: [u8; 6] = [IAC, SB, OPT_TTYPE, TTYPE_SEND, IAC, SE];

/// Where the cycle is.
#[derive(Debug, Default, Clone)]
pub struct Cycle {
    answers: u8,
    last: String,
}

impl Cycle {
    /// Bytes kept from the client's answers.
    pub fn held_bytes(&self) -> usize {
        self.last.len()
    }

    /// One `IS <name>` answer; `true` when the client should be asked again.
    pub fn on_answer(&mut self, raw: &[u8], caps: &mut Capabilities) -> bool {
        let name = clean_name(raw);
        if self.answers >= MAX_ROUNDS {
            return false;
        }
        self.answers += 1;
        let repeated = self.answers > 1 && name.eq_ignore_ascii_case(&self.last);
        match self.answers {
            1 => {
                caps.client_name = name.clone();
                caps.terminal_type = name.clone();
            }
            _ if repeated => {
                // No more types: whatever it said last stands.
                self.answers = MAX_ROUNDS;
                return false;
            }
            2 => caps.terminal_type = name.clone(),
            _ => {
                if let Some(bits) = name
                    .strip_prefix("MTTS ")
                    .and_then(|n| n.trim().parse::<u32>().ok())
                {
                    caps.mtts = bits;
                }
            }
        }
        self.last = name;
        self.answers < MAX_ROUNDS
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telnet::caps::{MTTS_256, MTTS_ANSI, MTTS_UTF8};

    #[test]
    fn three_answers_name_terminal_and_bits() {
        let (mut c, mut caps) = (Cycle::default(), Capabilities::default());
        assert!(c.on_answer(b"MUDLET", &mut caps));
        assert!(c.on_answer(b"ANSI-TRUECOLOR", &mut caps));
        assert!(!c.on_answer(b"MTTS 13", &mut caps));
        assert_eq!(caps.client_name, "MUDLET");
        assert_eq!(caps.terminal_type, "ANSI-TRUECOLOR");
        assert_eq!(caps.mtts, MTTS_ANSI | MTTS_UTF8 | MTTS_256);
        assert!(!c.on_answer(b"MTTS 1", &mut caps), "never past three");
        assert_eq!(caps.mtts, 13);
    }

    #[test]
    fn a_client_that_repeats_itself_is_done() {
        let (mut c, mut caps) = (Cycle::default(), Capabilities::default());
        assert!(c.on_answer(b"xterm", &mut caps));
        assert!(!c.on_answer(b"XTERM", &mut caps));
        assert_eq!((caps.terminal_type.as_str(), caps.mtts), ("xterm", 0));
        assert!(!c.on_answer(b"MTTS 1", &mut caps));
        assert_eq!(caps.mtts, 0);
    }
}
