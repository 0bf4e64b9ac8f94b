//! How a player comes into a zone, which decides what anyone is shown.

use super::direction::Direction;

/// How a player comes into a zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// Logged in, resumed, or walked in without a way (an older shard sent
    /// none): the room hears `Bob arrives.`, the player sees the room.
    Appears,
    /// Walked in from another shard this way: `Bob arrives from the west.`
    Walked(Direction),
    /// Moved without asking, in place (a drain, a transfer or a rebalance
    /// moved the zone they stand in): nobody notices — no line to the
    /// room, no room re-sent to the player, no prompt. The structured
    /// events (GMCP) still go to the player: a mapper sees the same room.
    InPlace,
}

impl Arrival {
    /// The way the player came, for the game's arrival line.
    pub fn from(self) -> Option<Direction> {
        match self {
            Arrival::Walked(dir) => Some(dir),
            Arrival::Appears | Arrival::InPlace => None,
        }
    }

    /// Whether the move is one nobody notices.
    pub fn is_quiet(self) -> bool {
        self == Arrival::InPlace
    }

    /// As a handoff's `Prepare` carries it: the way walked (empty: none)
    /// and whether the move is in place.
    pub fn from_wire(arrived_from: &str, in_place: bool) -> Arrival {
        if in_place {
            return Arrival::InPlace;
        }
        Direction::parse(arrived_from).map_or(Arrival::Appears, Arrival::Walked)
    }

    /// The `(arrived_from, in_place)` a `Prepare` carries.
    pub fn to_wire(self) -> (String, bool) {
        match self {
            Arrival::Walked(dir) => (dir.name().to_string(), false),
            Arrival::Appears => (String::new(), false),
            Arrival::InPlace => (String::new(), true),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_arrival_survives_the_wire_and_an_older_sender_reads_as_appearing() {
        for a in [
            Arrival::Appears,
            Arrival::InPlace,
            Arrival::Walked(Direction::parse("west").expect("a direction")),
        ] {
            let (dir, in_place) = a.to_wire();
            assert_eq!(Arrival::from_wire(&dir, in_place), a);
        }
        assert_eq!(Arrival::from_wire("", false), Arrival::Appears);
        assert!(Arrival::InPlace.is_quiet() && !Arrival::Appears.is_quiet());
    }
}
