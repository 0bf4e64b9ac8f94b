//! The `PlayerSnapshot`: the authoritative state that rides a handoff, so
//! the destination resumes with zero store round trips, and its signature.
//!
//! The state is the durable-save serializer's bytes ([`to_state_json`]),
//! byte-identical to what a save would write. Aliases ride in their own
//! signature-bound field and are re-sanitized on arrival. Every optional
//! claim (`tier`, `account`) is written unconditionally and length-prefixed,
//! so `(tier="", account=X)` and `(tier=X, account="")` can never share a
//! digest.

use std::collections::BTreeMap;

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};

use super::wire::{Reader, WireError, Writer};
use crate::model::Player;
use telos_redis::store::ClaimId;

/// Domain separator of the snapshot encoding (and so of its signature).
/// Bump the version when the layout changes: a rolling deploy's skew then
/// refuses handoffs instead of mis-trusting them.
pub const SNAPSHOT_DOMAIN: &str = "telos.v1/player-snapshot/3";

#[derive(Debug, Clone, PartialEq)]
pub struct PlayerSnapshot {
    /// Character key (lowercase name).
    pub character: String,
    /// The `owner_epoch` minted for the destination.
    pub epoch: u64,
    /// The claim that minted it (the row's `owner_claim`): the destination
    /// session holds both.
    pub claim: ClaimId,
    pub from_shard: String,
    pub to_shard: String,
    pub target_room: String,
    /// `to_state_json(character)`: the durable-save bytes.
    pub state: Vec<u8>,
    /// Player-defined aliases, signature-bound on their own.
    pub aliases: BTreeMap<String, String>,
    /// CAS base of the durable row.
    pub state_version: u64,
    /// Freeze-point input high-water: seeds the destination's watermark.
    pub applied_seq: u64,
    /// The durable row this character saves to.
    pub persist_id: String,
    /// Gate connection the `seq`s belong to; only it may attach.
    pub conn_id: String,
    pub tier: String,
    pub account: String,
}

impl PlayerSnapshot {
    /// Build from the frozen character with the durable-save serializer.
    #[allow(clippy::too_many_arguments)]
    pub fn build(
        character: &dyn Player,
        epoch: u64,
        from_shard: &str,
        to_shard: &str,
        target_room: &str,
        state_version: u64,
        applied_seq: u64,
        persist_id: &str,
        conn_id: &str,
    ) -> Self {
        PlayerSnapshot {
            character: character.key(),
            epoch,
            claim: ClaimId::NONE,
            from_shard: from_shard.to_string(),
            to_shard: to_shard.to_string(),
            target_room: target_room.to_string(),
            state: dump_state_json(character),
            aliases: character.aliases(),
            state_version,
            applied_seq,
            persist_id: persist_id.to_string(),
            conn_id: conn_id.to_string(),
            tier: character.tier().to_string(),
            account: character.account().to_string(),
        }
    }

    /// The claim that minted the snapshot's epoch.
    pub fn claimed_by(mut self, claim: ClaimId) -> Self {
        self.claim = claim;
        self
    }

    /// The canonical bytes: what is sent and what is signed.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new(SNAPSHOT_DOMAIN);
        w.str(&self.character)
            .u64(self.epoch)
            .u64(self.claim.as_u64())
            .str(&self.from_shard)
            .str(&self.to_shard)
            .str(&self.target_room)
            .bytes(&self.state)
            .u64(self.aliases.len() as u64);
        for (name, expansion) in &self.aliases {
            w.str(name).str(expansion);
        }
        w.u64(self.state_version)
            .u64(self.applied_seq)
            .str(&self.persist_id)
            .str(&self.conn_id)
            .str(&self.tier)
            .str(&self.account);
        w.finish()
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(bytes, SNAPSHOT_DOMAIN)?;
        let character = r.string()?;
        let epoch = r.u64()?;
        let claim = ClaimId::from_u64(r.u64()?);
        let from_shard = r.string()?;
        let to_shard = r.string()?;
        let target_room = r.string()?;
        let state = r.bytes()?.to_vec();
        let count = r.u64()?;
        let mut aliases = BTreeMap::new();
        for _ in 0..count.min(1024) {
            let name = r.string()?;
            aliases.insert(name, r.string()?);
        }
        let snapshot = PlayerSnapshot {
            character,
            epoch,
            claim,
            from_shard,
            to_shard,
            target_room,
            state,
            aliases,
            state_version: r.u64()?,
            applied_seq: r.u64()?,
            persist_id: r.string()?,
            conn_id: r.string()?,
            tier: r.string()?,
            account: r.string()?,
        };
        r.end()?;
        Ok(snapshot)
    }
}

/// `dumpStateJSON`: the snapshot's state is the durable save's serializer,
/// byte for byte, so storage is bypassed without a second format.
pub fn dump_state_json(character: &dyn Player) -> Vec<u8> {
    character.dump_state_json()
}

/// SHA-256 of the canonical bytes: binds character, epoch, target and state.
pub fn snapshot_digest(encoded: &[u8]) -> [u8; 32] {
    Sha256::digest(encoded).into()
}

pub fn sign_snapshot(key: &SigningKey, encoded: &[u8]) -> Vec<u8> {
    key.sign(&snapshot_digest(encoded)).to_bytes().to_vec()
}

/// Verify before decoding anything that matters (`verify_strict`).
pub fn verify_snapshot(key: &VerifyingKey, encoded: &[u8], sig: &[u8]) -> bool {
    let Ok(sig) = Signature::from_slice(sig) else {
        return false;
    };
    key.verify_strict(&snapshot_digest(encoded), &sig).is_ok()
}

/// `handoff_token = sha256(character/epoch)`: deterministic, so a retried
/// `Prepare` converges on one pending record. Its inputs are public, which
/// is why phase 2 is signed.
pub fn handoff_token(character: &str, epoch: u64) -> String {
    hex::encode(Sha256::digest(format!("{character}/{epoch}").as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::game::{Character, Tier, from_state_json, to_state_json};

    fn sample() -> (Character, PlayerSnapshot) {
        let mut ch = Character::new("Alice", "city:square");
        ch.tier = Tier::Builder;
        ch.aliases.insert("gg".into(), "get gem".into());
        ch.add_journal("hello");
        let snap = PlayerSnapshot::build(&ch, 7, "a", "b", "forest:eaves", 3, 42, "pid", "conn")
            .claimed_by(ClaimId::from_u64(0xfeed));
        (ch, snap)
    }

    #[test]
    fn snapshot_state_is_byte_identical_to_the_durable_save() {
        let (ch, snap) = sample();
        assert_eq!(snap.state, to_state_json(&ch));
        assert_eq!(from_state_json(&snap.state).unwrap(), ch);
        let back = PlayerSnapshot::decode(&snap.encode()).unwrap();
        assert_eq!(back, snap);
        assert_eq!(back.encode(), snap.encode());
    }

    #[test]
    fn tier_and_account_never_collide() {
        // The handoff design note's regression case: digest(tier="", account=X) must differ from
        // digest(tier=X, account="").
        let (_, mut a) = sample();
        let mut b = a.clone();
        a.tier = String::new();
        a.account = "admin".into();
        b.tier = "admin".into();
        b.account = String::new();
        assert_ne!(snapshot_digest(&a.encode()), snapshot_digest(&b.encode()));
        // And a signature over one does not verify the other.
        let key = SigningKey::from_bytes(&[9; 32]);
        let sig = sign_snapshot(&key, &a.encode());
        assert!(verify_snapshot(&key.verifying_key(), &a.encode(), &sig));
        assert!(!verify_snapshot(&key.verifying_key(), &b.encode(), &sig));
    }

    #[test]
    fn any_changed_field_breaks_the_signature() {
        let (_, snap) = sample();
        let key = SigningKey::from_bytes(&[1; 32]);
        let sig = sign_snapshot(&key, &snap.encode());
        type Edit = Box<dyn Fn(&mut PlayerSnapshot)>;
        let edits: Vec<Edit> = vec![
            Box::new(|s| s.epoch += 1),
            Box::new(|s| s.claim = ClaimId::from_u64(s.claim.as_u64() + 1)),
            Box::new(|s| s.to_shard = "c".into()),
            Box::new(|s| s.target_room = "city:square".into()),
            Box::new(|s| s.state.push(b' ')),
            Box::new(|s| {
                s.aliases.insert("x".into(), "y".into());
            }),
            Box::new(|s| s.applied_seq += 1),
            Box::new(|s| s.tier = "admin".into()),
            Box::new(|s| s.conn_id = "other".into()),
        ];
        for edit in edits {
            let mut forged = snap.clone();
            edit(&mut forged);
            assert!(!verify_snapshot(
                &key.verifying_key(),
                &forged.encode(),
                &sig
            ));
        }
        let other = SigningKey::from_bytes(&[2; 32]);
        assert!(!verify_snapshot(
            &other.verifying_key(),
            &snap.encode(),
            &sig
        ));
        assert!(!verify_snapshot(
            &key.verifying_key(),
            &snap.encode(),
            b"short"
        ));
    }

    #[test]
    fn token_is_deterministic_per_character_and_epoch() {
        assert_eq!(handoff_token("alice", 3), handoff_token("alice", 3));
        assert_ne!(handoff_token("alice", 3), handoff_token("alice", 4));
        assert_eq!(handoff_token("alice", 3).len(), 64);
    }
}
