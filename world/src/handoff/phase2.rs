//! Signed phase-2 messages. `Commit` and `Abort` are Ed25519-signed under the
//! cluster handoff keypair (distinct from the snapshot key) over a digest that
//! binds the operation (per-operation domain separator), the token and the
//! destination shard id. The token alone is forgeable (its inputs are
//! public); the signature is what authorizes. Binding the destination stops a
//! signed `Abort` captured for one destination from being replayed against
//! another in a same-epoch race.

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};

use super::wire::Writer;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase2 {
    Commit,
    Abort,
}

impl Phase2 {
    fn domain(self) -> &'static str {
        match self {
            Phase2::Commit => "telos.v1/handoff-commit/1",
            Phase2::Abort => "telos.v1/handoff-abort/1",
        }
    }
}

pub fn phase2_digest(op: Phase2, token: &str, to_shard: &str) -> [u8; 32] {
    let mut w = Writer::new(op.domain());
    w.str(token).str(to_shard);
    Sha256::digest(w.finish()).into()
}

pub fn sign_phase2(key: &SigningKey, op: Phase2, token: &str, to_shard: &str) -> Vec<u8> {
    key.sign(&phase2_digest(op, token, to_shard))
        .to_bytes()
        .to_vec()
}

/// True only for a valid signature of exactly this operation, token and
/// destination.
pub fn verify_phase2(
    key: &VerifyingKey,
    op: Phase2,
    token: &str,
    to_shard: &str,
    sig: &[u8],
) -> bool {
    let Ok(sig) = Signature::from_slice(sig) else {
        return false;
    };
    key.verify_strict(&phase2_digest(op, token, to_shard), &sig)
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_to_operation_token_and_destination() {
        let key = SigningKey::from_bytes(&[5; 32]);
        let public = key.verifying_key();
        let sig = sign_phase2(&key, Phase2::Abort, "tok", "shard-a");
        assert!(verify_phase2(
            &public,
            Phase2::Abort,
            "tok",
            "shard-a",
            &sig
        ));
        // Replayed against another destination, as the other operation, or
        // for another token: refused.
        assert!(!verify_phase2(
            &public,
            Phase2::Abort,
            "tok",
            "shard-b",
            &sig
        ));
        assert!(!verify_phase2(
            &public,
            Phase2::Commit,
            "tok",
            "shard-a",
            &sig
        ));
        assert!(!verify_phase2(
            &public,
            Phase2::Abort,
            "tok2",
            "shard-a",
            &sig
        ));
        assert!(!verify_phase2(
            &public,
            Phase2::Abort,
            "tok",
            "shard-a",
            &[]
        ));
        let other = SigningKey::from_bytes(&[6; 32]);
        assert!(!verify_phase2(
            &other.verifying_key(),
            Phase2::Abort,
            "tok",
            "shard-a",
            &sig
        ));
    }
}
