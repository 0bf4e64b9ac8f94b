//! The six directions a player walks: the model names the one a player
//! left by, the runtime passes it on to the zone they arrive in.

use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    North,
    South,
    East,
    West,
    Up,
    Down,
}

impl Direction {
    pub const ALL: [Direction; 6] = [
        Direction::North,
        Direction::South,
        Direction::East,
        Direction::West,
        Direction::Up,
        Direction::Down,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            Direction::North => "north",
            Direction::South => "south",
            Direction::East => "east",
            Direction::West => "west",
            Direction::Up => "up",
            Direction::Down => "down",
        }
    }

    /// Full names and the one-letter abbreviations, case-insensitive.
    pub fn parse(s: &str) -> Option<Direction> {
        let lower = s.to_ascii_lowercase();
        Direction::ALL
            .into_iter()
            .find(|d| d.name() == lower || d.name()[..1] == lower)
    }

    pub fn opposite(&self) -> Direction {
        match self {
            Direction::North => Direction::South,
            Direction::South => Direction::North,
            Direction::East => Direction::West,
            Direction::West => Direction::East,
            Direction::Up => Direction::Down,
            Direction::Down => Direction::Up,
        }
    }

    /// Where someone who walked this way came from, as a phrase
    /// ("the south", "below").
    pub fn from_phrase(&self) -> &'static str {
        match self.opposite() {
            Direction::North => "the north",
            Direction::South => "the south",
            Direction::East => "the east",
            Direction::West => "the west",
            Direction::Up => "above",
            Direction::Down => "below",
        }
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
