//! What a player's client negotiated, applied to what the world sends: text
//! styled at the colour depth it shows ([`crate::colour`]) and wrapped
//! once, here, to the NAWS width (80 columns for a client that sent none:
//! the world sends paragraphs unwrapped), events rendered as GMCP for the
//! packages the client subscribed to (dropped for every other client), and
//! the prompt's end marked with EOR or GA.

use telos_proto::v1::event::Kind;
use telos_proto::v1::{ColourMode, Event};

use crate::client::Conn;
use crate::colour::{self, Look};
use crate::output::SlowClient;
use crate::telnet::gmcp;
use crate::wrap::{CHATTER_INDENT, wrap, wrap_indented, wrap_width};

impl Conn {
    /// How text reads on this client: what it negotiated, under the
    /// player's `colour` choice.
    pub fn look(&self) -> Look {
        let caps = &self.reader.negotiator.caps;
        Look::new(caps.colours(), caps.screen_reader(), self.colour)
    }

    /// World text and its styles for the player: rendered for the client,
    /// then wrapped to its width. What others caused or wrote (`chatter`:
    /// their speech, their emotes; `others_words`: a tell) wraps with a
    /// hanging indent, so a line another
    /// player wrote can never start a line of its own on this screen — a
    /// padded emote cannot put a forged `Bob tells you, '...'` at the left
    /// margin (issue 30).
    pub fn show_output(&mut self, o: &telos_proto::v1::Output) -> Result<(), SlowClient> {
        let text = colour::render(&o.text, &o.spans, self.look());
        if !o.chatter && !o.others_words {
            return self.show_text(&text);
        }
        if self.prompt.take_pending() {
            self.out.text("\n")?;
        }
        self.out
            .text(&wrap_indented(&text, self.width(), CHATTER_INDENT))
    }

    /// Text for the player, wrapped to its width.
    pub fn show_text(&mut self, text: &str) -> Result<(), SlowClient> {
        if self.prompt.take_pending() {
            // Past the prompt the last command left on the line.
            self.out.text("\n")?;
        }
        self.out.text(&wrap(text, self.width()))
    }

    /// The columns text is wrapped to ([`wrap_width`]).
    pub fn width(&self) -> usize {
        wrap_width(self.reader.negotiator.caps.width)
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
