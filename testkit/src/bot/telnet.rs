//! Telnet on the bot's side: it never negotiates, so it only strips every
//! IAC sequence the gate sends and cleans line ends.

/// Lossy UTF-8 without `\r` and NUL (telnet's `\r\n` and `\r\0`).
pub(super) fn clean_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .chars()
        .filter(|c| *c != '\r' && *c != '\0')
        .collect()
}

const IAC: u8 = 255;
const SB: u8 = 250;
const SE: u8 = 240;
const WILL: u8 = 251;
const DONT: u8 = 254;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum IacState {
    #[default]
    Data,
    Iac,
    /// After `IAC WILL|WONT|DO|DONT`: the option byte.
    Option,
    Sub,
    SubIac,
}

/// Removes telnet command sequences from a byte stream; state carries over
/// between reads. `IAC IAC` is a literal 255.
#[derive(Debug, Default)]
pub(super) struct IacStripper {
    state: IacState,
}

impl IacStripper {
    pub(super) fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) {
        use IacState::*;
        for &b in input {
            self.state = match (self.state, b) {
                (Data, IAC) => Iac,
                (Data, _) => {
                    out.push(b);
                    Data
                }
                (Iac, IAC) => {
                    out.push(IAC);
                    Data
                }
                (Iac, WILL..=DONT) => Option,
                (Iac, SB) => Sub,
                (Iac, _) | (Option, _) => Data,
                (Sub, IAC) => SubIac,
                (Sub, _) => Sub,
                (SubIac, SE) => Data,
                (SubIac, _) => Sub,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strip(chunks: &[&[u8]]) -> Vec<u8> {
        let mut s = IacStripper::default();
        let mut out = Vec::new();
        for c in chunks {
            s.feed(c, &mut out);
        }
        out
    }

    #[test]
    fn iac_sequences_are_removed_even_split_across_reads() {
        assert_eq!(
            strip(&[&[IAC, 253, 31, IAC, 253, 24], b"=== Telos"]),
            b"=== Telos"
        );
        assert_eq!(strip(&[b"a", &[IAC], &[251], &[1, b'b']]), b"ab");
        assert_eq!(strip(&[&[IAC, SB, 24, 1, IAC], &[SE], b"c"]), b"c");
        assert_eq!(strip(&[&[b'x', IAC, IAC, b'y']]), vec![b'x', IAC, b'y']);
        assert_eq!(strip(&[&[IAC, 241, b'z']]), b"z");
    }
}
