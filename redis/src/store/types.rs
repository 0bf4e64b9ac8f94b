//! What the store answers: rows, claims, saves.

use serde::{Deserialize, Serialize};

use super::claim_id::ClaimId;

/// The tiers a character may hold; `player` is the default.
pub const TIERS: [&str; 3] = ["player", "builder", "admin"];

/// A character's durable row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CharacterRow {
    pub name: String,
    pub persist_id: String,
    pub state_json: Vec<u8>,
    pub state_version: u64,
    pub owner_epoch: u64,
    pub conn_id: String,
    pub applied_seq: u64,
    /// `applied_seq` when the save that wrote this row ended `conn_id`'s
    /// session with the player's `quit`; 0 otherwise (and in rows written
    /// before the field existed).
    pub quit_seq: u64,
    pub tier: String,
}

impl CharacterRow {
    /// Whether `conn_id`'s session ended with a quit this row holds: its
    /// last applied line was the quit, saved. A resume of that connection
    /// has nothing to play on; it is answered as the quit was.
    pub fn quit_by(&self, conn_id: &str) -> bool {
        ended_by_quit(&self.conn_id, self.applied_seq, self.quit_seq, conn_id)
    }
}

/// The rule of [`CharacterRow::quit_by`], over the three fields it reads
/// (also read alone by [`Store::quit_by`](super::Store::quit_by)).
pub(super) fn ended_by_quit(
    row_conn: &str,
    applied_seq: u64,
    quit_seq: u64,
    conn_id: &str,
) -> bool {
    row_conn == conn_id && quit_seq != 0 && quit_seq == applied_seq
}

/// Who a claim is made for: a gate connection, and which of its attempts
/// (every `Login` and `Resume` a gate sends carries a number that grows
/// with each it sends, so a later attempt of a connection has the larger).
/// The row keeps the latest claimant; a claim from an earlier attempt of
/// the same connection is refused ([`StoreError::OlderAttempt`]).
///
/// [`StoreError::OlderAttempt`]: super::StoreError::OlderAttempt
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Claimant<'a> {
    pub conn_id: &'a str,
    /// 0: not told (an older gate, a tool): ordered after nothing, and
    /// nothing is ordered against it.
    pub attempt: u64,
}

impl Claimant<'_> {
    /// No connection, no attempt: a claim nothing orders.
    pub const UNORDERED: Claimant<'static> = Claimant {
        conn_id: "",
        attempt: 0,
    };
}

/// The result of a claim: the newly minted owner epoch and the row as it
/// stood at that instant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimedCharacter {
    pub epoch: u64,
    /// The id this claim wrote beside the epoch.
    pub claim: ClaimId,
    pub row: CharacterRow,
}

/// The answer to a fenced save.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaveOutcome {
    /// Applied; the row is now at `version` (the DurableAck, see above).
    Saved { version: u64 },
    /// Not applied: the row is at another version or has a newer owner.
    Refused {
        current_epoch: u64,
        current_version: u64,
        /// Who minted `current_epoch`.
        current_claim: ClaimId,
    },
}
