//! What parts of a game's text are — a room's name, its exits, speech —
//! said inside the text itself, so a line keeps its styles however it is
//! concatenated, queued or carried to another shard (a `tell`'s text rides
//! Redis as JSON). The runtime takes the marks out at the edge
//! ([`split`]): the wire carries the plain text and the spans beside it
//! (`Output.spans`), and the gate renders them per client (ANSI at the
//! depth it negotiated, or nothing). Never colours: a game names meaning.
//!
//! A mark is `SO` (U+000E), one style letter, the text, `SI` (U+000F).
//! Players cannot type either: every line a player sends is stripped of
//! control characters before a game sees it (`game::strip_control`), so a
//! player's words can never open or close a span. Pure.

use std::ops::Range;

const OPEN: char = '\u{0E}';
const CLOSE: char = '\u{0F}';

/// What a span of text is (`telos.v1.Style`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Style {
    RoomName,
    Exits,
    /// `say` and `emote`: words in the room.
    Speech,
    Tell,
    /// A channel that reaches every shard (`chat`).
    Channel,
    /// Separators and ASCII art: dropped for a screen reader.
    Decoration,
}

impl Style {
    fn letter(self) -> char {
        match self {
            Style::RoomName => 'r',
            Style::Exits => 'x',
            Style::Speech => 's',
            Style::Tell => 't',
            Style::Channel => 'c',
            Style::Decoration => 'd',
        }
    }

    fn from_letter(c: char) -> Option<Style> {
        Some(match c {
            'r' => Style::RoomName,
            'x' => Style::Exits,
            's' => Style::Speech,
            't' => Style::Tell,
            'c' => Style::Channel,
            'd' => Style::Decoration,
            _ => return None,
        })
    }
}

/// How a player chose to see colour (`telos.v1.ColourMode`), told to the
/// gate as [`super::Event::Colour`]: the gate keeps the option state and
/// renders.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ColourMode {
    /// What the client negotiated; none for a raw line client.
    #[default]
    Auto,
    Off,
    Ansi16,
    Xterm256,
    Truecolour,
}

/// `text` marked as `style`. A line end stays outside the span, so the
/// span covers what is shown and the line's end stays a line's end.
pub fn mark(style: Style, text: &str) -> String {
    let body = text.trim_end_matches(['\n', '\r']);
    let end = &text[body.len()..];
    if body.is_empty() {
        return text.to_string();
    }
    format!("{OPEN}{}{body}{CLOSE}{end}", style.letter())
}

/// The plain text and its styled byte ranges (in order, never
/// overlapping, never empty). Every mark is taken out, well formed or not:
/// an unknown letter, a stray close or an open without a close leave
/// their text unstyled, so nothing a game writes puts a control character
/// on the wire.
pub fn split(marked: &str) -> (String, Vec<(Range<usize>, Style)>) {
    if !marked.contains([OPEN, CLOSE]) {
        return (marked.to_string(), Vec::new());
    }
    let mut plain = String::with_capacity(marked.len());
    let mut spans = Vec::new();
    let mut open: Option<(usize, Option<Style>)> = None;
    let mut chars = marked.chars();
    while let Some(c) = chars.next() {
        match c {
            OPEN => {
                let style = chars.clone().next().and_then(Style::from_letter);
                if style.is_some() {
                    chars.next();
                }
                close(&mut open, plain.len(), &mut spans);
                open = Some((plain.len(), style));
            }
            CLOSE => close(&mut open, plain.len(), &mut spans),
            c => plain.push(c),
        }
    }
    (plain, spans)
}

fn close(
    open: &mut Option<(usize, Option<Style>)>,
    at: usize,
    spans: &mut Vec<(Range<usize>, Style)>,
) {
    if let Some((start, Some(style))) = open.take()
        && start < at
    {
        spans.push((start..at, style));
    }
}

/// `marked` without its marks.
pub fn plain(marked: &str) -> String {
    split(marked).0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_come_out_as_spans_over_the_plain_text() {
        let text = format!(
            "{}A path.\n{}",
            mark(Style::RoomName, "Town Square\n"),
            mark(Style::Exits, "Exits: north é\n")
        );
        let (plain, spans) = split(&text);
        assert_eq!(plain, "Town Square\nA path.\nExits: north é\n");
        assert_eq!(
            spans,
            vec![(0..11, Style::RoomName), (20..35, Style::Exits)]
        );
        assert_eq!(&plain[20..35], "Exits: north é");
        assert_eq!(split("no marks\n"), ("no marks\n".to_string(), vec![]));
        assert_eq!(mark(Style::Speech, "\n"), "\n");
    }

    #[test]
    fn malformed_marks_leave_no_control_character_and_no_bad_span() {
        for bad in [
            "\u{0E}",
            "\u{0F}",
            "\u{0E}q text\u{0F}",
            "\u{0E}r",
            "\u{0E}rab\u{0E}scd",
            "a\u{0F}\u{0F}b",
            "\u{0E}\u{0E}\u{0F}",
            "\u{0E}ré\u{0F}",
        ] {
            let (plain, spans) = split(bad);
            assert!(!plain.contains([OPEN, CLOSE]), "{bad:?}");
            for (range, _) in &spans {
                assert!(range.start < range.end && plain.get(range.clone()).is_some());
            }
        }
        // An open cut short by the next one ends the first span there.
        let (plain, spans) = split("\u{0E}rab\u{0E}scd");
        assert_eq!(plain, "abcd");
        assert_eq!(spans, vec![(0..2, Style::RoomName)]);
        assert_eq!(split("\u{0E}ré\u{0F}").1, vec![(0..2, Style::RoomName)]);
    }
}
