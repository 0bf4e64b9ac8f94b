//! Values the directory hands out.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The answer to a lease claim. (`gen` is a reserved word in edition 2024,
/// hence `r#gen`; serde still names the field `gen`.)
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// The caller holds the lease at `gen` (newly minted, or its own lease
    /// refreshed at the same generation).
    Acquired { r#gen: u64 },
    /// Another shard holds a live lease.
    Held { owner: String, r#gen: u64 },
}

/// Whether a shard takes new work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ShardState {
    /// Accepts fresh logins and handoffs.
    Live,
    /// Rejects fresh logins; still accepts inbound handoffs.
    Draining,
    /// Live, but the gates cannot reach it ([`super::reach`]): it holds no
    /// zone, and nothing is sent to it until a gate reaches it again.
    CutOff,
}

/// What a heartbeat learned of the gates' view of the shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// No gate has said it cannot reach the shard for long.
    Reached,
    /// A gate has ([`super::reach`]): the shard must hold no zone.
    CutOff,
}

impl ShardState {
    pub fn as_str(self) -> &'static str {
        match self {
            ShardState::Live => "live",
            ShardState::Draining => "draining",
            ShardState::CutOff => "cut_off",
        }
    }
}

impl fmt::Display for ShardState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ShardState {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "live" => Ok(ShardState::Live),
            "draining" => Ok(ShardState::Draining),
            "cut_off" => Ok(ShardState::CutOff),
            other => Err(format!("unknown shard state {other:?}")),
        }
    }
}

/// One shard's registry entry, as its last heartbeat wrote it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardInfo {
    pub id: String,
    /// gRPC address peers and gates dial.
    pub addr: String,
    pub state: ShardState,
    pub players: u64,
    /// Soft occupancy ceiling, players.
    pub capacity: u64,
    /// Handoff protocol + snapshot digest version this shard speaks. Drains
    /// and handoffs pick only peers with the same version, so a rolling
    /// upgrade's skew refuses a move rather than mis-trusting it. 0 = an
    /// entry written before versions were advertised (never compatible).
    #[serde(default)]
    pub handoff_version: u32,
    /// The process that published the entry (its fencing token, minted
    /// at its start): two processes of one shard id — a paused one and
    /// its replacement, even at one address — are told apart by it. Read
    /// from the registry; a heartbeat writes its own process's, whatever
    /// this says. 0: an entry written before incarnations existed.
    #[serde(default)]
    pub incarnation: u64,
}

/// A player as `who` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OnlinePlayer {
    pub name: String,
    pub tier: String,
    pub wizinvis: bool,
    pub shard: String,
    pub zone: String,
}

/// One known zone for `telosctl status`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZoneStatus {
    pub id: String,
    /// Holder of the live lease; `None` while the zone is unowned.
    pub owner: Option<String>,
    /// The live lease's generation, or the last one issued if none is live
    /// (0 if the zone was never claimed).
    pub r#gen: u64,
    /// Players in the zone, summed over live shards' reports.
    pub players: u64,
}
