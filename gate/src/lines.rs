//! Line framing for the (telnet-stripped) input byte stream.
//!
//! A line ends at `\n`, `\r\n`, or a bare `\r` (telnet's `\r\0`): the byte
//! after a `\r` is swallowed if it is `\n` or NUL. NULs and other control
//! characters are stripped; invalid UTF-8 is replaced, never fatal. A line
//! longer than the limit is reported once and discarded up to the next line
//! end, so memory per connection is bounded by the limit.

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineEvent {
    Line(String),
    /// A line went over the limit; it (up to its line end) is discarded.
    TooLong,
}

#[derive(Debug)]
pub struct LineFramer {
    buf: Vec<u8>,
    max: usize,
    discarding: bool,
    after_cr: bool,
}

impl LineFramer {
    pub fn new(max_line_bytes: usize) -> Self {
        Self {
            buf: Vec::new(),
            max: max_line_bytes,
            discarding: false,
            after_cr: false,
        }
    }

    pub fn feed(&mut self, data: &[u8], out: &mut Vec<LineEvent>) {
        for &b in data {
            if std::mem::take(&mut self.after_cr) && (b == b'\n' || b == 0) {
                continue;
            }
            match b {
                b'\n' | b'\r' => {
                    self.after_cr = b == b'\r';
                    if std::mem::take(&mut self.discarding) {
                        continue;
                    }
                    out.push(LineEvent::Line(clean(&self.buf)));
                    self.buf.clear();
                }
                _ if self.discarding => {}
                _ => {
                    if self.buf.len() >= self.max {
                        self.buf = Vec::new();
                        self.discarding = true;
                        out.push(LineEvent::TooLong);
                    } else {
                        self.buf.push(b);
                    }
                }
            }
        }
    }

    /// Bytes of an unfinished line held right now.
    pub fn pending_bytes(&self) -> usize {
        self.buf.len()
    }
}

/// Lossy UTF-8, then drop control characters (NUL, ESC, backspace...): the
/// world sees printable text and tabs only.
fn clean(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .chars()
        .filter(|c| *c == '\t' || !c.is_control())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(chunks: &[&[u8]], max: usize) -> Vec<LineEvent> {
        let mut f = LineFramer::new(max);
        let mut out = Vec::new();
        for c in chunks {
            f.feed(c, &mut out);
        }
        out
    }

    fn line(s: &str) -> LineEvent {
        LineEvent::Line(s.to_string())
    }

    #[test]
    fn all_line_endings() {
        assert_eq!(
            frame(&[b"a\nb\r\nc\r\0d\re\n"], 4096),
            vec![line("a"), line("b"), line("c"), line("d"), line("e")]
        );
    }

    #[test]
    fn crlf_split_across_reads_is_one_line_end() {
        assert_eq!(
            frame(&[b"look\r", b"\nsay hi\r", b"\n"], 4096),
            vec![line("look"), line("say hi")]
        );
    }

    #[test]
    fn empty_lines_are_lines() {
        assert_eq!(frame(&[b"\n\r\n"], 4096), vec![line(""), line("")]);
    }

    #[test]
    fn nul_and_controls_are_stripped() {
        assert_eq!(
            frame(&[b"lo\0o\x1b[1mk\t!\n"], 4096),
            vec![line("loo[1mk\t!")]
        );
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        assert_eq!(
            frame(&[b"say \xff\xfeok\n"], 4096),
            vec![line("say \u{fffd}\u{fffd}ok")]
        );
    }

    #[test]
    fn exactly_the_limit_is_accepted() {
        let mut input = vec![b'a'; 4096];
        input.push(b'\n');
        assert_eq!(frame(&[&input], 4096), vec![line(&"a".repeat(4096))]);
    }

    #[test]
    fn over_the_limit_is_refused_once_and_the_rest_discarded() {
        let mut input = vec![b'a'; 4097];
        input.extend_from_slice(b"more\nnext\n");
        assert_eq!(
            frame(&[&input], 4096),
            vec![LineEvent::TooLong, line("next")]
        );
    }

    #[test]
    fn a_mebibyte_without_newline_stays_bounded() {
        let mut f = LineFramer::new(4096);
        let mut out = Vec::new();
        for _ in 0..256 {
            f.feed(&[b'x'; 4096], &mut out);
            assert!(f.pending_bytes() <= 4096);
        }
        assert_eq!(out, vec![LineEvent::TooLong]);
        f.feed(b"\nok\n", &mut out);
        assert_eq!(out, vec![LineEvent::TooLong, line("ok")]);
    }
}
