//! What a game's zone answers to a command: text for players, what the
//! runtime must do next, whether durable state changed.

use super::chat::ChatAllowance;
use super::direction::Direction;
use super::event::Event;

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Delivery {
    /// Player key.
    pub to: String,
    /// One or more lines, each ending in "\n"; may be empty when the
    /// delivery carries only events.
    pub text: String,
    /// Structured events beside the text, sent after it.
    pub events: Vec<Event>,
}

impl Delivery {
    pub fn new(to: &str, text: impl Into<String>) -> Self {
        Delivery {
            to: to.to_string(),
            text: text.into(),
            events: Vec::new(),
        }
    }

    /// Events alone, no text.
    pub fn events(to: &str, events: Vec<Event>) -> Self {
        Delivery {
            to: to.to_string(),
            text: String::new(),
            events,
        }
    }

    /// This delivery with `event` added.
    pub fn with(mut self, event: Event) -> Self {
        self.events.push(event);
        self
    }
}

pub struct Ctx<'a> {
    pub shard_id: &'a str,
    /// The hosted id, e.g. "forest" or "crypt#3".
    pub zone_id: &'a str,
    /// What the player may say to others now ([`ChatAllowance::check`]);
    /// what the command did say goes in [`Outcome::chat_spent`].
    pub chat: ChatAllowance,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Action {
    #[default]
    None,
    /// The player walked into a room of another zone. The model has NOT
    /// moved them: they are still in this zone. The actor moves them to
    /// another local zone or hands them off (`begin_handoff`, which words a
    /// refusal).
    LeaveZone { to_room: String, dir: Direction },
    /// The player typed quit ("Goodbye." is already in the deliveries); the
    /// actor saves, calls [`super::ZoneModel::leave`] and closes.
    Quit,
    /// The actor gathers the online list and replies with
    /// [`super::Game::render_who`].
    Who { viewer_is_admin: bool },
    /// Words for one player wherever they play (`tell`): the runtime finds
    /// them on any shard, mid-move included, and answers the speaker either
    /// way ([`Tell`]).
    Tell(Box<Tell>),
    /// A channel line for everyone online on every shard but the speaker
    /// (`chat`): what the speaker sees of it is already in the deliveries.
    Broadcast(Box<Broadcast>),
}

/// A `tell` as the game words it; the runtime carries it (CONTRACT.md
/// leaves the wording to the game, so every line is the game's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tell {
    /// What the listener gets; `heard.to` is their key.
    pub heard: Delivery,
    /// The speaker's answer once the listener has it; `said.to` is the
    /// speaker's key.
    pub said: Delivery,
    /// ... when nobody of that name is online (or, to a speaker who is no
    /// admin, when they are concealed).
    pub absent: String,
    /// ... when they are online but could not be reached in time (on the
    /// move the whole while, or their shard did not answer).
    pub unreachable: String,
    /// The speaker may see concealed players.
    pub speaker_is_admin: bool,
}

/// A line for every player on every shard but `from`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Broadcast {
    /// The speaker's key (they are not sent it again).
    pub from: String,
    pub text: String,
    pub events: Vec<Event>,
    /// What the speaker is told when the line could not go out.
    #[serde(skip)]
    pub unsent: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub deliveries: Vec<Delivery>,
    pub action: Action,
    /// Durable character state changed (room, inventory, journal, aliases,
    /// flags, vitals from eating). Tick changes (regeneration, affects
    /// running out) never set it: the actor's periodic save covers them.
    pub dirty: bool,
    /// Bytes of the player's own words the command sent to others (chat),
    /// charged to the player's chat limit.
    pub chat_spent: usize,
}
