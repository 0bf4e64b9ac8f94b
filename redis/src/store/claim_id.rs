//! Claim ids: who minted a row's current `owner_epoch`.
//!
//! Every claim (a login, the source's claim for a handoff's destination,
//! the destination's own claim after an unanswered `Commit`) picks a random
//! id and writes it to the row's `owner_claim` with the epoch it mints. The
//! holder of that epoch keeps the id beside it, which lets it:
//! - recognise its own mint when a claim's reply was lost, so a claim can be
//!   retried (the scripts answer a claim whose id the row already holds
//!   with that epoch instead of minting, or refusing, again);
//! - tell its own epoch from the same number minted again by someone else
//!   after Redis lost writes (a rollback re-issues epoch numbers): a row
//!   "at our epoch" under another claim is not ours to adopt or heal.

use std::fmt;

/// A claim's id: 64 random bits, never zero (zero is "no claim": a row
/// created before claim ids, or never claimed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ClaimId(u64);

impl ClaimId {
    /// No claim: matches no row's `owner_claim` but an empty one.
    pub const NONE: ClaimId = ClaimId(0);

    /// A fresh, random id.
    pub fn random() -> ClaimId {
        ClaimId(rand::random::<u64>().max(1))
    }

    /// The id as stored in `owner_claim` (an absent field reads as none).
    pub fn parse(stored: &str) -> ClaimId {
        u64::from_str_radix(stored, 16)
            .map(ClaimId)
            .unwrap_or(ClaimId::NONE)
    }

    pub fn as_u64(self) -> u64 {
        self.0
    }

    pub fn from_u64(id: u64) -> ClaimId {
        ClaimId(id)
    }
}

/// How it is stored: lowercase hex, empty for none.
impl fmt::Display for ClaimId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => Ok(()),
            id => write!(f, "{id:x}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_its_stored_form_and_none_is_empty() {
        let id = ClaimId::random();
        assert_ne!(id, ClaimId::NONE);
        assert_eq!(ClaimId::parse(&id.to_string()), id);
        assert_eq!(ClaimId::NONE.to_string(), "");
        assert_eq!(ClaimId::parse(""), ClaimId::NONE);
        assert_eq!(ClaimId::parse("not hex"), ClaimId::NONE);
    }
}
