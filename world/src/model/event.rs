//! Structured output a game gives beside its text: what a MUD client's
//! mapper, gauges, inventory window and chat tabs read (the gate renders
//! them as GMCP for clients that asked, and drops them for every other).
//! Never parsed from text: a game says what happened, the text says it to
//! people.

/// One structured event for one player. The text it goes with travels as
/// the same [`super::Delivery`]'s text.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Event {
    /// The room the player stands in now (GMCP `Room.Info`).
    Room(RoomInfo),
    /// Current and maximum values, in the game's order (`Char.Vitals`):
    /// `("hp", 20)`, `("maxhp", 20)`, ...
    Vitals(Vec<(String, i64)>),
    /// The character sheet's headline (`Char.Status`): level, xp, tier,
    /// affects, whatever the game keeps.
    Status(Vec<(String, String)>),
    /// Every item in one place (`Char.Items.List`).
    Items {
        location: Location,
        items: Vec<Item>,
    },
    /// One item came into a place (`Char.Items.Add`).
    ItemAdded { location: Location, item: Item },
    /// One item left a place (`Char.Items.Remove`).
    ItemRemoved { location: Location, item: Item },
    /// One line of a channel (`Comm.Channel.Text`): `say`, or any channel
    /// the game adds; `text` is the line as the text stream shows it.
    Channel {
        channel: String,
        talker: String,
        text: String,
    },
    /// A game's own package: its name (`Beacon.Lit`) and its JSON body.
    Custom { package: String, json: String },
    /// The player's colour choice, sent with every arrival and each
    /// change: the gate renders text's styles by it (never GMCP).
    Colour(super::style::ColourMode),
}

/// Where an item list is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Location {
    /// Carried by the player (`"inv"`).
    Inventory,
    /// On the floor of the player's room (`"room"`).
    Room,
}

impl Location {
    pub fn as_str(self) -> &'static str {
        match self {
            Location::Inventory => "inv",
            Location::Room => "room",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Item {
    pub id: String,
    pub name: String,
    /// IRE attribute letters (`w` wearable, `e` edible, ...); may be empty.
    pub attrib: String,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RoomInfo {
    /// The room id (`<zone>:<room>`); its client number is
    /// [`super::ids::room_num`] of it.
    pub id: String,
    pub name: String,
    /// The area players know the room by (the zone's name).
    pub area: String,
    /// Each exit's direction and destination room id.
    pub exits: Vec<(String, String)>,
}
