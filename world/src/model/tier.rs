//! The account trust tier: set by an operator in the durable row, carried
//! signed in a handoff snapshot, and the only source of elevation. What a
//! tier grants inside a game is the game's (`Player::set_tier`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    #[default]
    Player,
    Builder,
    Admin,
}

impl Tier {
    pub fn name(&self) -> &'static str {
        match self {
            Tier::Player => "player",
            Tier::Builder => "builder",
            Tier::Admin => "admin",
        }
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown tier {0:?} (expected player, builder or admin)")]
pub struct UnknownTier(pub String);

impl FromStr for Tier {
    type Err = UnknownTier;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "player" => Ok(Tier::Player),
            "builder" => Ok(Tier::Builder),
            "admin" => Ok(Tier::Admin),
            _ => Err(UnknownTier(s.to_string())),
        }
    }
}
