//! What a player's client negotiated, applied to what the world sends: text
//! styled at the colour depth it shows ([`crate::colour`]) and wrapped to
//! the NAWS width, events rendered as GMCP for the packages the client
//! subscribed to (dropped for every other client), and the prompt's end
//! marked with EOR or GA. A raw line client gets the world's text exactly
//! as before.

use telos_proto::v1::event::Kind;
use telos_proto::v1::{ColourMode, Event, Span};

use crate::client::Conn;
use crate::colour::{self, Look};
use crate::output::SlowClient;
use crate::telnet::gmcp;

/// Narrowest width text is wrapped to: a client claiming less (or a
/// hostile `0`) gets the world's own wrapping, not one word a line.
pub const MIN_WRAP_WIDTH: usize = 20;

/// The world wraps near 78 columns (`telos_world::game` `WRAP_WIDTH`): a
/// client at least this wide needs nothing done.
pub const WORLD_WRAP_WIDTH: usize = 78;

impl Conn {
    /// How text reads on this client: what it negotiated, under the
    /// player's `colour` choice.
    pub fn look(&self) -> Look {
        let caps = &self.reader.negotiator.caps;
        Look::new(caps.colours(), caps.screen_reader(), self.colour)
    }

    /// World text and its styles for the player: rendered for the client,
    /// then re-wrapped to a narrower one.
    pub fn show_output(&mut self, text: &str, spans: &[Span]) -> Result<(), SlowClient> {
        let look = self.look();
        self.show_text(&colour::render(text, spans, look))
    }

    /// World text for the player, re-wrapped to a narrower client.
    pub fn show_text(&mut self, text: &str) -> Result<(), SlowClient> {
        if self.prompt.take_pending() {
            // Past the prompt the last command left on the line.
            self.out.text("\n")?;
        }
        let width = usize::from(self.reader.negotiator.caps.width);
        if (MIN_WRAP_WIDTH..WORLD_WRAP_WIDTH).contains(&width) {
            self.out.text(&wrap(text, width))
        } else {
            self.out.text(text)
        }
    }

    /// A world event, as GMCP if the client subscribed to its package.
    pub fn show_event(&mut self, event: &Event) -> Result<(), SlowClient> {
        match &event.kind {
            Some(Kind::Vitals(v)) => self
                .prompt
                .set_vitals(v.stats.iter().map(|s| (s.name.clone(), s.value))),
            Some(Kind::Colour(mode)) => {
                self.colour = ColourMode::try_from(*mode).unwrap_or(ColourMode::Auto);
            }
            _ => {}
        }
        let caps = &self.reader.negotiator.caps;
        if !caps.gmcp {
            return Ok(());
        }
        match gmcp::render(event) {
            Some((package, json)) => self.send_gmcp(&package, &json),
            None => Ok(()),
        }
    }

    /// One GMCP message, if the client wants its package.
    pub fn send_gmcp(&self, package: &str, json: &str) -> Result<(), SlowClient> {
        if self.reader.negotiator.caps.wants(package) {
            self.out.raw(gmcp::frame(package, json))
        } else {
            Ok(())
        }
    }

    /// A command's output is complete (the world acknowledged applying
    /// it): the status prompt, marked, for a client that asked for
    /// prompts: it accepted EOR, or it named itself through TTYPE (a MUD
    /// client, marked with GA). Nothing for any other client: a line
    /// reader would find the prompt in front of the next answer's line.
    pub fn show_prompt(&mut self) -> Result<(), SlowClient> {
        let n = &self.reader.negotiator;
        if !(n.caps.eor || (n.speaks_telnet && !n.caps.client_name.is_empty())) {
            return Ok(());
        }
        let screen_reader = n.caps.screen_reader();
        match self.prompt.show(screen_reader) {
            Some(prompt) => {
                self.out.text(&prompt)?;
                self.end_prompt()
            }
            None => Ok(()),
        }
    }

    /// Mark the end of a prompt (EOR or GA; nothing for a raw client).
    pub fn end_prompt(&self) -> Result<(), SlowClient> {
        self.out.raw(self.reader.negotiator.prompt_end().to_vec())
    }
}

/// Each line longer than `width` broken at spaces (a word longer than the
/// line is broken inside); shorter lines and line ends kept as they are.
pub fn wrap(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / width.max(1));
    for line in text.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(b) => (b.strip_suffix('\r').unwrap_or(b), "\n"),
            None => (line, ""),
        };
        if textwrap::core::display_width(body) <= width {
            out.push_str(body);
        } else {
            out.push_str(&textwrap::fill(body, width));
        }
        out.push_str(end);
    }
    out
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
        assert!(wrap(&"x".repeat(100), 20).lines().all(|l| l.len() <= 20));
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
