//! The account trust tier and the capability flags derived from it.
//!
//! The tier is the only source of elevation: reserved flags found in stored
//! or handed-off state are never trusted, they are re-derived from the tier
//! on every load and arrival (a forged snapshot could otherwise inject
//! `cap_admin`) by `apply_tier_flags`, which lives with the character it
//! rewrites ([`super::character`]).

pub use crate::model::tier::{Tier, UnknownTier};

/// The reserved flags `tier` grants, and nothing else.
pub fn granted_flags(tier: Tier) -> &'static [&'static str] {
    match tier {
        Tier::Player => &[],
        Tier::Builder => &[CAP_BUILD],
        Tier::Admin => &[CAP_BUILD, CAP_ADMIN],
    }
}

pub const CAP_BUILD: &str = "cap_build";
pub const CAP_ADMIN: &str = "cap_admin";
/// Capability flags only a tier can grant.
pub const RESERVED_FLAGS: &[&str] = &[CAP_BUILD, CAP_ADMIN];
/// Session concealment for admins. Not tier-grantable: it is cleared on every
/// load and arrival for anyone who is not an admin (and the caller may clear
/// it for admins too; the handoff design note accepts a one-time presence flicker).
pub const WIZINVIS: &str = "wizinvis";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tier_parses_and_displays() {
        for t in [Tier::Player, Tier::Builder, Tier::Admin] {
            assert_eq!(t.to_string().parse::<Tier>(), Ok(t));
            assert_eq!(serde_json::to_string(&t).unwrap(), format!("\"{t}\""));
        }
        assert!("Admin".parse::<Tier>().is_err());
        assert!("root".parse::<Tier>().is_err());
    }
}
