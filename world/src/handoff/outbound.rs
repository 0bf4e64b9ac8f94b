//! The source's frozen snapshots awaiting the destination's `Commit`, by
//! handoff token, and the tokens whose `Commit` must now be refused (their
//! TTL fired and the source saved the snapshot). Storage and the `Commit`
//! check; freezing and expiry are [`super::source`]'s.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use ed25519_dalek::VerifyingKey;
use tokio::time::Instant;

use super::phase2::{Phase2, verify_phase2};
use super::snapshot::PlayerSnapshot;

/// How long an expired token is remembered, so a late `Commit` for it is
/// refused as expired rather than unknown.
const EXPIRED_MEMORY: Duration = Duration::from_secs(600);

/// A frozen snapshot awaiting the destination's `Commit`.
struct Frozen {
    snapshot: PlayerSnapshot,
    /// When `begin_handoff` started, right after the actor froze the
    /// player: the pause the player feels runs from here to the `Commit`,
    /// resolve, claim and `Prepare` included.
    frozen_at: Instant,
}

/// Frozen snapshots by token, and tokens whose `Commit` is refused.
#[derive(Default)]
pub struct Outbound {
    frozen: Mutex<HashMap<String, Frozen>>,
    expired: Mutex<HashMap<String, Instant>>,
}

/// Why a `Commit` was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CommitRefused {
    #[error("unknown handoff token")]
    Unknown,
    #[error("the handoff expired and the source saved the player")]
    Expired,
    #[error("bad signature or wrong destination")]
    BadSignature,
    #[error("this shard has no handoff key")]
    Keyless,
}

impl Outbound {
    pub(super) fn freeze(&self, token: &str, snapshot: PlayerSnapshot, frozen_at: Instant) {
        self.frozen.lock().expect("outbound lock").insert(
            token.to_string(),
            Frozen {
                snapshot,
                frozen_at,
            },
        );
    }

    /// The TTL fired with no `Commit`: take the snapshot (to save) and
    /// refuse every later `Commit` for `token`. `None` if it was committed.
    pub(super) fn expire(&self, token: &str) -> Option<PlayerSnapshot> {
        let frozen = self.frozen.lock().expect("outbound lock").remove(token)?;
        let mut expired = self.expired.lock().expect("outbound lock");
        expired.retain(|_, at| at.elapsed() < EXPIRED_MEMORY);
        expired.insert(token.to_string(), Instant::now());
        Some(frozen.snapshot)
    }

    /// The destination's signed `Commit`, checked against the destination
    /// recorded when the token was prepared. Returns when the player froze.
    pub fn commit(
        &self,
        handoff_key: Option<&VerifyingKey>,
        token: &str,
        to_shard: &str,
        sig: &[u8],
    ) -> Result<Instant, CommitRefused> {
        let Some(key) = handoff_key else {
            return Err(CommitRefused::Keyless);
        };
        let mut frozen = self.frozen.lock().expect("outbound lock");
        let Some(entry) = frozen.get(token) else {
            let expired = self.expired.lock().expect("outbound lock");
            return Err(if expired.contains_key(token) {
                CommitRefused::Expired
            } else {
                CommitRefused::Unknown
            });
        };
        let recorded = &entry.snapshot.to_shard;
        if to_shard != recorded || !verify_phase2(key, Phase2::Commit, token, recorded, sig) {
            return Err(CommitRefused::BadSignature);
        }
        Ok(frozen.remove(token).expect("present").frozen_at)
    }
}
