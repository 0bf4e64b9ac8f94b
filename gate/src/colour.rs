//! The world's styled spans (`Output.spans`: a room's name, its exits,
//! speech) rendered for one client: ANSI SGR at the deepest colour it said
//! it shows (truecolour, 256, 16), brought down from one truecolour
//! palette by `anstyle-lossy`; nothing for a client that never negotiated
//! (a raw line client gets the world's text byte for byte) or that uses a
//! screen reader, which also loses the world's decoration (separators,
//! ASCII art). The player overrides the depth with the world's `colour`
//! command ([`ColourMode`]). Pure.

use std::borrow::Cow;

use anstyle::{AnsiColor, Color, RgbColor, Style as Sgr};
use anstyle_lossy::palette::VGA;
use telos_proto::v1::{ColourMode, Span, Style};

/// Colours a client shows, deepest first (`Capabilities::colours`' counts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Depth {
    Truecolour,
    Xterm256,
    Ansi16,
    None,
}

impl Depth {
    /// From a colour count (0, 16, 256, 2^24).
    pub fn from_colours(colours: u32) -> Depth {
        match colours {
            c if c >= 1 << 24 => Depth::Truecolour,
            c if c >= 256 => Depth::Xterm256,
            c if c >= 16 => Depth::Ansi16,
            _ => Depth::None,
        }
    }
}

/// How text reads on this client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Look {
    pub depth: Depth,
    /// Drop decoration (MTTS screen-reader bit).
    pub screen_reader: bool,
}

impl Look {
    /// What the client negotiated (`colours`, `screen_reader`) under the
    /// player's choice: `Auto` takes the negotiated depth, none for a
    /// screen reader; a depth the player names is theirs to choose.
    pub fn new(colours: u32, screen_reader: bool, mode: ColourMode) -> Look {
        let depth = match mode {
            ColourMode::Auto if screen_reader => Depth::None,
            ColourMode::Auto => Depth::from_colours(colours),
            ColourMode::Off => Depth::None,
            ColourMode::Ansi16 => Depth::Ansi16,
            ColourMode::Xterm256 => Depth::Xterm256,
            ColourMode::Truecolour => Depth::Truecolour,
        };
        Look {
            depth,
            screen_reader,
        }
    }

    /// Whether spans change anything on this client.
    pub fn plain(&self) -> bool {
        self.depth == Depth::None && !self.screen_reader
    }
}

/// A style's colour in truecolour, and whether it is bold. The 256- and
/// 16-colour forms are derived, so the palette is written once.
fn palette(style: Style) -> Option<(RgbColor, bool)> {
    Some(match style {
        Style::RoomName => (RgbColor(0x5f, 0xd7, 0xff), true),
        Style::Exits => (RgbColor(0x00, 0xaf, 0x00), false),
        Style::Speech => (RgbColor(0xd7, 0xaf, 0x00), false),
        Style::Tell => (RgbColor(0xaf, 0x00, 0xaf), false),
        Style::Channel => (RgbColor(0x00, 0xaf, 0xaf), false),
        Style::Decoration => (RgbColor(0x80, 0x80, 0x80), false),
        Style::Unspecified => return None,
    })
}

/// The SGR that opens `style` at `depth` (none for no colour).
fn sgr(style: Style, depth: Depth) -> Option<Sgr> {
    let (rgb, bold) = palette(style)?;
    let colour = match depth {
        Depth::None => return None,
        Depth::Truecolour => Color::Rgb(rgb),
        Depth::Xterm256 => Color::Ansi256(anstyle_lossy::rgb_to_xterm(rgb)),
        Depth::Ansi16 => Color::Ansi(ansi16(rgb)),
    };
    let s = Sgr::new().fg_color(Some(colour));
    Some(if bold { s.bold() } else { s })
}

/// The nearest of the 16 colours (the VGA palette's values), never black:
/// text in black on a black terminal is text lost.
fn ansi16(rgb: RgbColor) -> AnsiColor {
    match anstyle_lossy::rgb_to_ansi(rgb, VGA) {
        AnsiColor::Black => AnsiColor::BrightBlack,
        c => c,
    }
}

/// `text` with its `spans` rendered for `look`. A client that shows no
/// colour and reads no decoration off gets `text` itself, untouched.
/// Spans out of order, overlapping, past the end or off a char boundary
/// (a buggy or hostile world) are skipped, never a panic.
pub fn render<'a>(text: &'a str, spans: &[Span], look: Look) -> Cow<'a, str> {
    if spans.is_empty() || look.plain() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + spans.len() * 24);
    let mut at = 0;
    for span in spans {
        let (start, end) = (span.start as usize, span.end as usize);
        let (Some(before), Some(body)) = (text.get(at..start), text.get(start..end)) else {
            continue;
        };
        if start >= end {
            continue;
        }
        out.push_str(before);
        at = end;
        let style = Style::try_from(span.style).unwrap_or(Style::Unspecified);
        if style == Style::Decoration && look.screen_reader {
            // The whole line is decoration: its line end goes with it.
            if (start == 0 || text[..start].ends_with('\n')) && text[end..].starts_with('\n') {
                at += 1;
            }
            continue;
        }
        match sgr(style, look.depth) {
            Some(s) => paint(&mut out, body, s),
            None => out.push_str(body),
        }
    }
    out.push_str(&text[at..]);
    Cow::Owned(out)
}

/// Each line of `body` opened and reset on its own, so no colour runs
/// past a line end (a client that resets at line ends, a prompt after).
fn paint(out: &mut String, body: &str, s: Sgr) {
    for line in body.split_inclusive('\n') {
        let shown = line.trim_end_matches(['\n', '\r']);
        if !shown.is_empty() {
            out.push_str(&format!("{s}{shown}{s:#}"));
        }
        out.push_str(&line[shown.len()..]);
    }
}

/// The 256-colour index a style renders as (tests and docs).
pub fn xterm_index(style: Style) -> Option<u8> {
    palette(style).map(|(rgb, _)| anstyle_lossy::rgb_to_xterm(rgb).0)
}

#[cfg(test)]
#[path = "colour_tests.rs"]
mod tests;
