//! Small text helpers shared by the game model. Every string a player can
//! type passes through here before it is stored or echoed, so none of these
//! may panic on any input (multi-byte UTF-8, control bytes, huge lines).

/// Removes every control character (C0, DEL, C1): they could rewrite a
/// terminal, forge line breaks in another player's output or smuggle ANSI
/// escapes into durable state. Also every format character (general
/// category Cf: the bidi controls U+202A–U+202E and U+2066–U+2069, which
/// reorder the rest of another player's line, the zero-width characters
/// U+200B–U+200F and U+2060, which make look-alike text, soft hyphens, tag
/// characters) and the line and paragraph separators U+2028/U+2029 (line
/// breaks to some terminals). Emoji sequences joined by U+200D come apart
/// into their pieces; nothing else visible changes.
pub fn strip_control(s: &str) -> String {
    s.chars().filter(|&c| !is_hidden(c)).collect()
}

/// A character a player may not send to other players: see
/// [`strip_control`].
fn is_hidden(c: char) -> bool {
    use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};
    c.is_control()
        || matches!(
            c.general_category(),
            GeneralCategory::Format
                | GeneralCategory::LineSeparator
                | GeneralCategory::ParagraphSeparator
        )
}

/// The longest prefix of `s` that is at most `max` bytes and ends on a char
/// boundary (byte bounds keep durable sizes predictable; the boundary keeps
/// slicing from panicking on multi-byte text).
pub fn truncate_bytes(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Upper-cases the first character: item and mob names are written in
/// running-text form ("a red fox") and start sentences in output.
pub fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// A paragraph of running text on one line, its spacing made single, with
/// its line end: the gate wraps it once, at the client's width (the world
/// never knows that width, and text wrapped twice reads ragged).
pub fn paragraph(s: &str) -> String {
    let mut out = s.split_whitespace().collect::<Vec<_>>().join(" ");
    out.push('\n');
    out
}

/// Splits a command line into its first word and the rest (leading
/// whitespace of the rest removed, inner spacing kept for `say`).
pub fn split_word(s: &str) -> (&str, &str) {
    let s = s.trim_start();
    match s.find(char::is_whitespace) {
        Some(i) => (&s[..i], s[i..].trim_start()),
        None => (s, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strip_control_removes_escapes_and_newlines_keeps_unicode() {
        assert_eq!(strip_control("a\x1b[31mb\r\nc\u{85}d é"), "a[31mbcd é");
    }

    #[test]
    fn strip_control_removes_bidi_and_zero_width_characters() {
        // Right-to-left override, isolates, embeddings, marks.
        for c in [
            '\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}', '\u{202E}', '\u{2066}', '\u{2067}',
            '\u{2068}', '\u{2069}', '\u{200E}', '\u{200F}', '\u{061C}',
        ] {
            assert_eq!(strip_control(&format!("a{c}b")), "ab", "{:X}", c as u32);
        }
        // Zero-width space, non-joiner, joiner, word joiner, BOM, soft
        // hyphen, a tag character, and the line/paragraph separators.
        for c in [
            '\u{200B}',
            '\u{200C}',
            '\u{200D}',
            '\u{2060}',
            '\u{FEFF}',
            '\u{00AD}',
            '\u{E0041}',
            '\u{2028}',
            '\u{2029}',
        ] {
            assert_eq!(strip_control(&format!("a{c}b")), "ab", "{:X}", c as u32);
        }
        // Right-to-left text itself, accents and emoji stay.
        assert_eq!(strip_control("שלום مرحبا é ✓ 🦊"), "שלום مرحبا é ✓ 🦊");
    }

    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(truncate_bytes("héllo", 2), "h");
        assert_eq!(truncate_bytes("héllo", 3), "hé");
        assert_eq!(truncate_bytes("abc", 10), "abc");
        assert_eq!(truncate_bytes("日本", 1), "");
    }

    #[test]
    fn capitalize_handles_empty_and_unicode() {
        assert_eq!(capitalize("a red fox"), "A red fox");
        assert_eq!(capitalize(""), "");
        assert_eq!(capitalize("ébène"), "Ébène");
    }

    #[test]
    fn a_paragraph_is_one_line_with_single_spaces() {
        assert_eq!(paragraph("aaa  bbb\n ccc"), "aaa bbb ccc\n");
        assert_eq!(paragraph(""), "\n");
    }

    #[test]
    fn split_word_keeps_rest() {
        assert_eq!(split_word("  say  hello  there "), ("say", "hello  there "));
        assert_eq!(split_word("look"), ("look", ""));
        assert_eq!(split_word(""), ("", ""));
    }
}
