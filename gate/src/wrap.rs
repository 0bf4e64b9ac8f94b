//! Text shaped once, at the client's width: the world sends paragraphs
//! unwrapped, and every line the player sees — the world's and the gate's
//! own — is wrapped here to the NAWS width (80 columns for a client that
//! told none). A word longer than a line is never split.

/// Narrowest width text is wrapped to: a client claiming less (or a
/// hostile `0`) is wrapped at [`DEFAULT_WIDTH`], not one word a line.
pub const MIN_WRAP_WIDTH: usize = 20;

/// The width of a client that told none (no NAWS: a raw line client, a
/// telnet client that refused it).
pub const DEFAULT_WIDTH: usize = 80;

/// The columns to wrap at for a client whose NAWS width is `naws` (0:
/// none told).
pub fn wrap_width(naws: u16) -> usize {
    match usize::from(naws) {
        w if w >= MIN_WRAP_WIDTH => w,
        _ => DEFAULT_WIDTH,
    }
}

/// Where the continuation lines of another player's words start: never at
/// the left margin, where a line of its own would.
pub const CHATTER_INDENT: &str = "  ";

/// Each line longer than `width` broken at spaces; a word longer than the
/// line (a resume token, a URL) gets a line of its own and is never split;
/// shorter lines and line ends kept as they are.
pub fn wrap(text: &str, width: usize) -> std::borrow::Cow<'_, str> {
    wrap_indented(text, width, "")
}

/// [`wrap`], each continuation line starting with `indent`.
pub fn wrap_indented<'t>(text: &'t str, width: usize, indent: &str) -> std::borrow::Cow<'t, str> {
    // No line can be wider than the text has bytes (a character is never
    // wider than its UTF-8 bytes): most output is shorter than a line.
    if text.len() <= width {
        return text.into();
    }
    // Never inside a word: not a long one (break_words), not at a hyphen
    // (a URL, `state-of-the-art`: the default splitter breaks there).
    let options = textwrap::Options::new(width)
        .break_words(false)
        .word_splitter(textwrap::WordSplitter::NoHyphenation)
        .subsequent_indent(indent);
    let mut out = String::with_capacity(text.len() + text.len() / width.max(1));
    for line in text.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(b) => (b.strip_suffix('\r').unwrap_or(b), "\n"),
            None => (line, ""),
        };
        if body.len() <= width || textwrap::core::display_width(body) <= width {
            out.push_str(body);
        } else {
            out.push_str(&textwrap::fill(body, &options));
        }
        out.push_str(end);
    }
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_wrap_short_ones_and_line_ends_stay() {
        let text = "Edge of the Forest\nTall pines close in to the north, their needles thick on the ground.\nExits: north west\n";
        let wrapped = wrap(text, 40);
        assert!(
            wrapped.lines().all(|l| l.chars().count() <= 40),
            "{wrapped}"
        );
        assert!(
            wrapped.starts_with("Edge of the Forest\nTall pines close in to the north, their\n")
        );
        assert!(wrapped.ends_with("Exits: north west\n"));
        assert_eq!(wrap("no end", 40), "no end");
        assert_eq!(wrap("a\n\nb\n", 20), "a\n\nb\n");
        let token = "x".repeat(100);
        assert_eq!(
            wrap(&format!("type resume {token} now\n"), 20),
            format!("type resume\n{token}\nnow\n"),
            "a long word on its own line, never split"
        );
        assert_eq!(
            wrap(
                "see https://my-long-site.example.org/some-path and state-of-the-art\n",
                20
            ),
            "see\nhttps://my-long-site.example.org/some-path\nand state-of-the-art\n",
            "never split at a hyphen"
        );
    }

    #[test]
    fn colour_escapes_take_no_width() {
        let room = "\x1b[1m\x1b[38;2;95;215;255mTown Square\x1b[0m\n";
        assert_eq!(wrap(room, 20), room);
        let speech = format!(
            "\x1b[33mAlice says, '{}'\x1b[0m\n",
            "word ".repeat(12).trim()
        );
        let wrapped = wrap(&speech, 30);
        assert!(
            wrapped
                .lines()
                .all(|l| textwrap::core::display_width(l) <= 30),
            "{wrapped:?}"
        );
        assert!(
            wrapped.starts_with("\x1b[33mAlice says, 'word word word"),
            "{wrapped:?}"
        );
        assert!(wrapped.ends_with("word'\x1b[0m\n"), "{wrapped:?}");
    }
}
