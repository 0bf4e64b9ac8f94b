//! One durable save of one player: the CAS on `state_version` and
//! `owner_epoch`, and the `DurableAck` that lets the gate forget lines.

use std::time::Duration;

use telos_proto::v1::{DurableAck, server_frame::Frame};
use tracing::{debug, warn};

use super::session::SessionMeta;
use crate::game::{Character, to_state_json};
use crate::store::{SaveOutcome, Store};

/// One save round trip may take this long before we give up on it for this
/// cadence (the player stays dirty and is retried): a sick Redis must not
/// wedge the zone.
pub const SAVE_TIMEOUT: Duration = Duration::from_secs(2);

pub enum Saved {
    /// Saved (or nothing to save); `DurableAck` sent.
    Done,
    /// Refused by the fence: another owner's epoch won.
    NotOwner {
        carried: u64,
        winner: u64,
        version: u64,
    },
    /// Redis failed or timed out; still dirty.
    Failed,
    /// Held by an unresolved commit fence: not sent, still dirty.
    Held,
}

/// Save `character` under `meta`'s epoch and version.
pub async fn save_player(
    store: &Store,
    zone: &str,
    character: &Character,
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
    let json = to_state_json(character);
    let (epoch, seq) = (meta.epoch, meta.applied_seq);
    let mut result = tokio::time::timeout(
        SAVE_TIMEOUT,
        store.save(&key, epoch, meta.state_version, &json, &meta.conn_id, seq),
    )
    .await;
    if let Ok(Ok(SaveOutcome::Refused {
        current_epoch,
        current_version,
    })) = result
    {
        if current_epoch == epoch && current_version > meta.state_version {
            // At our own epoch with a newer version: only this session
            // writes under this epoch, so the row holds one of our own
            // saves whose reply was lost (a timeout). Adopt its version and
            // write again, or the player would stay unsaveable for ever.
            warn!(zone, player = %key, current_version, "adopting a row version our own lost save wrote");
            meta.state_version = current_version;
            result = tokio::time::timeout(
                SAVE_TIMEOUT,
                store.save(&key, epoch, meta.state_version, &json, &meta.conn_id, seq),
            )
            .await;
        } else if current_epoch <= epoch {
            // The row went back: Redis lost writes it had acknowledged (an
            // older version at our epoch, or an older epoch: our claim lost
            // too). We hold the newest epoch and every applied line in
            // memory: heal the row from it, or everything after the loss
            // would be refused for ever.
            warn!(zone, player = %key, current_epoch, current_version, epoch, version = meta.state_version,
                "durable row went back (Redis lost acknowledged writes): healing it from this session");
            metrics::counter!("telos_rows_healed_total").increment(1);
            result = tokio::time::timeout(
                SAVE_TIMEOUT,
                store.heal(&key, epoch, meta.state_version, &json, &meta.conn_id, seq),
            )
            .await;
        }
    }
    match result {
        Ok(Ok(SaveOutcome::Saved { version })) => {
            meta.state_version = version;
            meta.saved_seq = seq;
            meta.dirty = false;
            meta.send(Frame::DurableAck(DurableAck { seq }));
            Saved::Done
        }
        Ok(Ok(SaveOutcome::Refused {
            current_epoch,
            current_version,
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
