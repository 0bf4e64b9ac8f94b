//! One durable save of one player: the CAS on `state_version` and
//! `owner_epoch`, and the `DurableAck` that lets the gate forget lines.

use std::time::Duration;

use telos_proto::v1::{DurableAck, server_frame::Frame};
use tracing::{debug, info, warn};

use super::session::SessionMeta;
use crate::model::Player;
use telos_redis::store::{ClaimId, SaveOutcome, Store};

/// One save round trip may take this long before we give up on it for this
/// cadence (the player stays dirty and is retried): a sick Redis must not
/// wedge the zone.
pub const SAVE_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Debug)]
pub enum Saved {
    /// Saved (or nothing to save); `DurableAck` sent.
    Done,
    /// Refused by the fence: another owner's epoch won.
    NotOwner {
        carried: u64,
        winner: u64,
        version: u64,
    },
    /// The row is at this session's epoch number under another claim: a
    /// rollback let someone else mint it again. Not this session's to
    /// overwrite, nor provably stale: close not-final, so the gate resumes
    /// and replays from the durable row.
    Reissued,
    /// Redis failed or timed out; still dirty.
    Failed,
    /// Held by an unresolved commit fence: not sent, still dirty.
    Held,
}

/// What a refused save says about the row, from the session's epoch,
/// claim and version against the row's.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// A newer owner claimed the character: this session is stale.
    NewerOwner,
    /// A newer epoch minted under this session's last departure's claim,
    /// whose reply was lost: this session's own. Adopt it.
    OwnMint,
    /// At our epoch and claim with a newer version: one of our own saves
    /// whose reply was lost (a timeout) landed. Adopt its version.
    LostReply,
    /// The row went back (Redis lost acknowledged writes): an older epoch,
    /// or our epoch and claim at an older version. Heal it from memory.
    WentBack,
    /// Our epoch number, another claim: see [`Saved::Reissued`].
    Reissued,
}

pub(crate) fn classify(
    ours: (u64, ClaimId, u64),
    departure: Option<ClaimId>,
    row_epoch: u64,
    row_claim: ClaimId,
    row_version: u64,
) -> Refusal {
    let (epoch, claim, version) = ours;
    if row_epoch > epoch && departure == Some(row_claim) {
        Refusal::OwnMint
    } else if row_epoch > epoch {
        Refusal::NewerOwner
    } else if row_epoch < epoch {
        Refusal::WentBack
    } else if row_claim != claim {
        Refusal::Reissued
    } else if row_version < version {
        Refusal::WentBack
    } else {
        Refusal::LostReply
    }
}

/// Save `character` under `meta`'s epoch and version.
pub async fn save_player(
    store: &Store,
    zone: &str,
    character: &dyn Player,
    meta: &mut SessionMeta,
) -> Saved {
    if !meta.needs_save() {
        return Saved::Done;
    }
    let key = character.key();
    if !meta.writable() {
        debug!(zone, player = %key, "save held: the handoff's Commit is still in flight");
        return Saved::Held;
    }
    let json = character.dump_state_json();
    let seq = meta.applied_seq;
    // A quit's save says so in the row: if its reply is lost after it
    // landed, the resume that follows has nothing to replay and must end
    // the session as the quit did (partition soak seed 937332575).
    let quit = meta.quit;
    // Every try of this save writes the same state, seq and mark; only the
    // epoch and version it is fenced on change between tries.
    let (row, state, conn_id) = (&key, &json, &meta.conn_id);
    let save_at = move |epoch: u64, version: u64| {
        tokio::time::timeout(
            SAVE_TIMEOUT,
            store.save_marked(row, epoch, version, state, conn_id, seq, quit),
        )
    };
    let mut epoch = meta.epoch;
    let mut result = save_at(epoch, meta.state_version).await;
    if let Ok(Ok(SaveOutcome::Refused {
        current_epoch,
        current_version,
        current_claim,
    })) = result
    {
        let ours = (epoch, meta.claim, meta.state_version);
        let refusal = classify(
            ours,
            meta.departure_claim,
            current_epoch,
            current_claim,
            current_version,
        );
        match refusal {
            Refusal::OwnMint => {
                info!(zone, player = %key, current_epoch, "adopting the epoch our own departure minted (its reply was lost)");
                meta.epoch = current_epoch;
                meta.claim = current_claim;
                // What this save carries from now on: a refusal of the
                // retry is judged against the adopted epoch, not the one
                // it replaced (judged against that, our own mint read as a
                // newer claim elsewhere, the session was closed final and
                // the gate dropped lines the world had answered: partition
                // soak seed 175774228).
                epoch = current_epoch;
                result = save_at(current_epoch, meta.state_version).await;
            }
            Refusal::LostReply => {
                // Only this session writes under this epoch and claim, so
                // the row holds one of our own saves whose reply was lost.
                // Adopt its version and write again, or the player would
                // stay unsaveable for ever.
                warn!(zone, player = %key, current_version, "adopting a row version our own lost save wrote");
                meta.state_version = current_version;
                result = save_at(epoch, meta.state_version).await;
            }
            Refusal::WentBack => {
                // Redis lost writes it had acknowledged. We hold the newest
                // epoch and every applied line in memory: heal the row from
                // it, or everything after the loss would be refused for
                // ever.
                warn!(zone, player = %key, current_epoch, current_version, epoch, version = meta.state_version,
                    "durable row went back (Redis lost acknowledged writes): healing it from this session");
                metrics::counter!("telos_rows_healed_total").increment(1);
                result = tokio::time::timeout(
                    SAVE_TIMEOUT,
                    store.heal(
                        &key,
                        epoch,
                        meta.claim,
                        meta.state_version,
                        &json,
                        &meta.conn_id,
                        seq,
                        quit,
                    ),
                )
                .await;
            }
            Refusal::Reissued => {
                warn!(zone, player = %key, epoch, "our epoch was minted again by another claim (Redis lost writes): closing not-final");
                return Saved::Reissued;
            }
            Refusal::NewerOwner => {}
        }
    }
    match result {
        Ok(Ok(SaveOutcome::Saved { version })) => {
            meta.state_version = version;
            meta.saved_seq = seq;
            meta.dirty = false;
            meta.stream.send(Frame::DurableAck(DurableAck { seq }));
            Saved::Done
        }
        Ok(Ok(SaveOutcome::Refused {
            current_epoch,
            current_claim,
            ..
        })) if current_epoch == epoch && current_claim != meta.claim => Saved::Reissued,
        Ok(Ok(SaveOutcome::Refused {
            current_epoch,
            current_version,
            ..
        })) => Saved::NotOwner {
            carried: epoch,
            winner: current_epoch,
            version: current_version,
        },
        Ok(Err(e)) => {
            metrics::counter!("telos_redis_errors_total", "op" => "save").increment(1);
            warn!(zone, player = %key, error = %e, "save failed; will retry");
            Saved::Failed
        }
        Err(_) => {
            metrics::counter!("telos_redis_errors_total", "op" => "save").increment(1);
            warn!(zone, player = %key, "save timed out; will retry");
            Saved::Failed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zone::stream::GateStream;

    const MINE: ClaimId = ClaimId::NONE;

    fn other() -> ClaimId {
        ClaimId::from_u64(7)
    }

    #[test]
    fn a_refusal_is_read_against_the_sessions_epoch_claim_and_version() {
        let ours = (5, MINE, 10);
        let c = |e, claim, v| classify(ours, None, e, claim, v);
        assert_eq!(c(6, other(), 1), Refusal::NewerOwner);
        assert_eq!(c(6, MINE, 99), Refusal::NewerOwner);
        assert_eq!(c(4, other(), 99), Refusal::WentBack, "our claim lost too");
        assert_eq!(c(5, MINE, 9), Refusal::WentBack, "our saves lost");
        assert_eq!(c(5, MINE, 11), Refusal::LostReply);
        assert_eq!(c(5, other(), 9), Refusal::Reissued);
        assert_eq!(c(5, other(), 11), Refusal::Reissued);
    }

    #[test]
    fn a_newer_epoch_under_our_own_departures_claim_is_ours() {
        let ours = (5, MINE, 10);
        let departed = Some(ClaimId::from_u64(42));
        assert_eq!(
            classify(ours, departed, 6, ClaimId::from_u64(42), 10),
            Refusal::OwnMint
        );
        assert_eq!(
            classify(ours, departed, 6, other(), 10),
            Refusal::NewerOwner,
            "anyone else's newer claim still evicts"
        );
    }

    /// Partition soak seed 175774228: a save whose reply was lost moved
    /// the row's version, then a departure's claim (reply lost too) minted
    /// the next epoch. The save adopts that epoch and retries; the retry is
    /// refused on the version. Judged against the epoch it replaced, that
    /// read as a newer claim elsewhere and closed the session final (the
    /// gate dropped lines the world had answered). Judged against the
    /// adopted one it is our own epoch: the session stays, and the next
    /// save adopts the version and lands.
    #[tokio::test]
    async fn a_retry_after_adopting_our_own_mint_is_judged_at_that_epoch() -> anyhow::Result<()> {
        use crate::game::character::Character;
        use telos_redis::store::SaveOutcome;

        let redis = telos_testkit::RedisServer::start()?;
        let store = Store::connect(&redis.url).await?;
        let ada = Character::new("Ada", "city:square");
        store
            .create_character_hashed(
                "Ada",
                "$argon2id$v=19$m=8,t=1,p=1$c2FsdHNhbHQ$aGFzaA",
                &ada.dump_state_json(),
            )
            .await?;
        let mine = store.claim_character("ada").await?;
        let (tx, _frames) = tokio::sync::mpsc::channel(8);
        let mut meta = SessionMeta {
            conn_id: "conn-1".into(),
            epoch: mine.epoch,
            claim: mine.claim,
            departure_claim: None,
            state_version: mine.row.state_version,
            applied_seq: 3,
            saved_seq: 0,
            dirty: true,
            quit: false,
            stream: GateStream::new(tx),
            persist_id: "pid".into(),
            chat: Default::default(),
            commit: None,
        };
        // A save of ours landed but its reply was lost: the row moved on.
        let lost = store
            .save(
                "ada",
                mine.epoch,
                mine.row.state_version,
                &ada.dump_state_json(),
                "conn-1",
                2,
            )
            .await?;
        assert!(matches!(lost, SaveOutcome::Saved { .. }), "{lost:?}");
        // Our departure's claim landed, its reply lost too.
        let departure = store.claim_character("ada").await?;
        meta.departure_claim = Some(departure.claim);

        let saved = save_player(&store, "city", &ada, &mut meta).await;
        assert!(
            !matches!(saved, Saved::NotOwner { carried, winner, .. } if winner > carried),
            "our own mint read as a newer claim elsewhere: {saved:?}"
        );
        assert_eq!(meta.epoch, departure.epoch, "the minted epoch is adopted");
        // The next save adopts the version our lost save wrote, and lands.
        assert!(matches!(
            save_player(&store, "city", &ada, &mut meta).await,
            Saved::Done
        ));
        Ok(())
    }
}
