//! Small text helpers shared by the game model. Every string a player can
//! type passes through here before it is stored or echoed, so none of these
//! may panic on any input (multi-byte UTF-8, control bytes, huge lines).

/// What a player may show other players: every string a player can type
/// passes through here. The text is composed (NFC: one way to write each
/// letter, so look-alikes built from combining pieces read as what they
/// are), and only visible characters are kept — an allow-list by general
/// category: letters, marks, numbers, punctuation, symbols, and spaces
/// (every kind of space becomes a plain one). Gone:
/// - control characters (C0, DEL, C1): they could rewrite a terminal,
///   forge line breaks in another player's output or smuggle ANSI escapes
///   into durable state;
/// - format characters (Cf: the bidi controls that reorder the rest of
///   another player's line, the zero-width ones that make look-alike text,
///   soft hyphens, tag characters), line and paragraph separators, private
///   use, surrogates and unassigned code points;
/// - the characters that draw nothing though they are letters, marks or
///   symbols ([`is_blank`]: the Hangul fillers, the braille blank, the
///   combining grapheme joiner, variation selectors), issue 30;
/// - combining marks drawn over or under a letter beyond [`MAX_MARKS`] on
///   one character (a "Zalgo" flood that draws over the lines above and
///   below).
///
/// Emoji sequences joined by U+200D come apart into their pieces; nothing
/// else visible changes.
pub fn strip_control(s: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    use unicode_properties::{GeneralCategoryGroup, UnicodeGeneralCategory};
    let mut out = String::with_capacity(s.len());
    let mut marks = 0usize;
    for c in s.nfc() {
        if is_hidden(c) || is_blank(c) {
            continue;
        }
        match c.general_category_group() {
            GeneralCategoryGroup::Mark if !is_spacing_mark(c) => {
                marks += 1;
                if marks > MAX_MARKS {
                    continue;
                }
            }
            GeneralCategoryGroup::Mark => {}
            GeneralCategoryGroup::Separator => {
                marks = 0;
                out.push(' ');
                continue;
            }
            _ => marks = 0,
        }
        out.push(c);
    }
    out
}

/// Combining marks that draw over or under their letter (Mn, Me) kept on
/// one character: enough for any script's accents (Vietnamese stacks two,
/// Biblical Hebrew's points and cantillation four), not for a flood.
/// Spacing marks (Mc: Myanmar, Tibetan, Indic vowel signs) take their own
/// room and are not counted.
pub const MAX_MARKS: usize = 4;

fn is_spacing_mark(c: char) -> bool {
    use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};
    c.general_category() == GeneralCategory::SpacingMark
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
                | GeneralCategory::PrivateUse
                | GeneralCategory::Surrogate
                | GeneralCategory::Unassigned
        )
}

/// A letter, mark or symbol that draws nothing: text that looks empty, or
/// a name that looks like another with an invisible piece in it.
fn is_blank(c: char) -> bool {
    matches!(
        c,
        '\u{034F}' // combining grapheme joiner
            | '\u{115F}' | '\u{1160}' | '\u{3164}' | '\u{FFA0}' // Hangul fillers
            | '\u{17B4}' | '\u{17B5}' // Khmer inherent vowels
            | '\u{180B}'..='\u{180F}' // Mongolian variation selectors
            | '\u{2800}' // braille pattern blank
            | '\u{FE00}'..='\u{FE0F}' // variation selectors
            | '\u{E0100}'..='\u{E01EF}' // variation selectors supplement
            | '\u{1D173}'..='\u{1D17A}' // musical format characters
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

    #[test]
    fn blanks_and_look_alikes_are_gone_and_marks_are_bounded() {
        // Hangul filler, braille blank, CGJ: nothing visible.
        assert_eq!(strip_control("\u{3164}\u{2800}\u{034F}"), "");
        assert_eq!(strip_control("Bo\u{034F}b"), "Bob");
        // Composed: e + combining acute is é.
        assert_eq!(strip_control("e\u{0301}"), "\u{e9}");
        // A flood of marks keeps three.
        let zalgo = format!("a{}", "\u{0300}\u{0301}\u{0302}".repeat(20));
        assert_eq!(strip_control(&zalgo).chars().count(), 1 + MAX_MARKS);
        // Every space is a plain one; private use is gone.
        assert_eq!(strip_control("a\u{3000}b\u{E000}"), "a b");
        // Ordinary text in any script is kept.
        for ok in [
            "Tiếng Việt",
            "日本語のテキスト",
            "Ελληνικά",
            "smile :) <3 €",
        ] {
            assert_eq!(strip_control(ok), ok);
        }
    }
}
