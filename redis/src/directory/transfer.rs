//! Pending zone transfers (transfers design note, "stream" read as "zone",
//! "node" as "shard"). A transfer is a record `{from, to}` keyed by zone,
//! proposed through one validating script, completed only at the exact
//! lease generation the source closed the zone at, and announced on a
//! pub/sub channel so every shard's watcher reacts at once (a once-a-second
//! poll backs it up).

use std::sync::LazyLock;
use std::time::Duration;

use redis::{AsyncCommands, Script};
use serde::{Deserialize, Serialize};

use super::args::{check_shard, check_zone, ttl_ms};
use super::error::DirectoryError;
use super::events::{Cause, ClusterEvent, EVENTS_MAXLEN};
use super::handle::Directory;
use super::key_names;

static PROPOSE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("transfer_propose.lua")));
static COMPLETE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("transfer_complete.lua")));
static CANCEL: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("transfer_cancel.lua")));

/// How long `status` shows why a transfer was cancelled.
const CANCEL_REASON_TTL: Duration = Duration::from_secs(3600);

/// A pending transfer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transfer {
    pub zone: String,
    pub from: String,
    pub to: String,
    /// Redis server time the record was written, ms since the epoch.
    pub created_ms: u64,
}

/// The answer to a proposal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Proposal {
    /// Written now.
    Recorded { from: String },
    /// The identical transfer was already pending: a no-op.
    AlreadyPending { from: String },
    /// The zone already lives on that shard: nothing to do.
    AlreadyThere,
}

/// Why a proposal was rejected; each message is what the operator sees.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProposalRejected {
    #[error("unknown zone {0:?}")]
    UnknownZone(String),
    #[error(
        "zone {0:?} is instanced: each party gets its own copy, hosted by the shard of the zone its entrance is in; transfer that zone instead"
    )]
    Instanced(String),
    #[error("unknown shard {0:?} (not registered, or not live)")]
    UnknownShard(String),
    #[error("shard {0:?} is draining")]
    ShardNotLive(String),
    #[error("shard has no free capacity ({0} players)")]
    NoCapacity(String),
    #[error("zone {0:?} has no live owner to transfer from")]
    Unowned(String),
    #[error("a different transfer is already pending: {0}")]
    Conflict(String),
}

/// The answer to a completion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Completion {
    /// Re-pointed at the target at `gen`; the record is gone.
    Completed { r#gen: u64 },
    /// No pending record (already completed or cancelled): harmless.
    NoRecord,
    /// The record names another source.
    WrongSource,
    /// The zone still has a live lease: close it first.
    StillOpen,
    /// The zone moved on since that close (another generation): rejected.
    Stale { current: u64 },
}

impl Directory {
    /// Propose moving `zone` to `to`, for `cause` (kept with the record
    /// and on the event stream). Validated in one script: the zone
    /// exists, the target is a registered live shard with free capacity,
    /// and no different transfer is pending.
    pub async fn propose_transfer(
        &self,
        zone: &str,
        to: &str,
        cause: Cause,
    ) -> Result<Result<Proposal, ProposalRejected>, DirectoryError> {
        check_zone(zone)?;
        check_shard(to)?;
        let (status, detail): (String, String) = PROPOSE
            .key(key_names::zones())
            .key(key_names::zone_lease(zone))
            .key(key_names::transfer(zone))
            .key(key_names::transfers())
            .key(key_names::shard(to))
            .key(key_names::events())
            .arg(zone)
            .arg(to)
            .arg(key_names::transfer_channel())
            .arg(cause.as_str())
            .arg(EVENTS_MAXLEN)
            .invoke_async(&mut self.conn())
            .await?;
        let from = || detail.split("->").next().unwrap_or_default().to_string();
        Ok(match status.as_str() {
            "recorded" => Ok(Proposal::Recorded { from: from() }),
            "already" => Ok(Proposal::AlreadyPending { from: from() }),
            "already_there" => Ok(Proposal::AlreadyThere),
            // A failed lookup leaves the plain answer.
            "unknown_zone" if self.is_instanced(zone).await.unwrap_or(false) => {
                Err(ProposalRejected::Instanced(detail))
            }
            "unknown_zone" => Err(ProposalRejected::UnknownZone(detail)),
            "unknown_shard" => Err(ProposalRejected::UnknownShard(detail)),
            "shard_not_live" => Err(ProposalRejected::ShardNotLive(detail)),
            "no_capacity" => Err(ProposalRejected::NoCapacity(detail)),
            "unowned" => Err(ProposalRejected::Unowned(detail)),
            _ => Err(ProposalRejected::Conflict(detail)),
        })
    }

    /// Complete `zone`'s transfer from `from`, closed at `closed_gen`.
    pub async fn complete_transfer(
        &self,
        zone: &str,
        from: &str,
        closed_gen: u64,
        lease_ttl: Duration,
    ) -> Result<Completion, DirectoryError> {
        check_zone(zone)?;
        let (status, generation): (String, String) = COMPLETE
            .key(key_names::zone_lease(zone))
            .key(key_names::zone_gen(zone))
            .key(key_names::transfer(zone))
            .key(key_names::transfers())
            .key(key_names::events())
            .arg(zone)
            .arg(from)
            .arg(closed_gen)
            .arg(ttl_ms(lease_ttl)?)
            .arg(key_names::transfer_channel())
            .arg(EVENTS_MAXLEN)
            .invoke_async(&mut self.conn().durable())
            .await?;
        let generation: u64 = generation.parse().unwrap_or_default();
        Ok(match status.as_str() {
            "completed" => Completion::Completed { r#gen: generation },
            "no_record" => Completion::NoRecord,
            "wrong_source" => Completion::WrongSource,
            "still_open" => Completion::StillOpen,
            _ => Completion::Stale {
                current: generation,
            },
        })
    }

    /// Cancel the pending `{from, to}` transfer of `zone`, keeping `reason`
    /// for `status`. False when that record is not (or no longer) pending.
    pub async fn cancel_transfer(
        &self,
        zone: &str,
        from: &str,
        to: &str,
        reason: &str,
    ) -> Result<bool, DirectoryError> {
        check_zone(zone)?;
        let done: i64 = CANCEL
            .key(key_names::transfer(zone))
            .key(key_names::transfers())
            .key(key_names::transfer_cancelled(zone))
            .arg(zone)
            .arg(from)
            .arg(to)
            .arg(reason)
            .arg(ttl_ms(CANCEL_REASON_TTL)?)
            .arg(key_names::transfer_channel())
            .invoke_async(&mut self.conn())
            .await?;
        if done == 1 {
            let event = ClusterEvent {
                kind: "transfer_cancelled".into(),
                zone: Some(zone.into()),
                from: Some(from.into()),
                to: Some(to.into()),
                reason: Some(reason.into()),
                ..ClusterEvent::default()
            };
            // Cancelled either way: an event not written is only logged.
            if let Err(e) = self.record_event(&event).await {
                tracing::warn!(zone, error = %e, "the cancelled transfer's event was not recorded");
            }
        }
        Ok(done == 1)
    }

    /// Every pending transfer, sorted by zone.
    pub async fn transfers(&self) -> Result<Vec<Transfer>, DirectoryError> {
        let mut con = self.conn();
        let mut zones: Vec<String> = con.smembers(key_names::transfers()).await?;
        zones.sort();
        let mut out = Vec::new();
        for zone in zones {
            if let Some(t) = self.transfer(&zone).await? {
                out.push(t);
            }
        }
        Ok(out)
    }

    /// The pending transfer of `zone`, if any.
    pub async fn transfer(&self, zone: &str) -> Result<Option<Transfer>, DirectoryError> {
        let mut con = self.conn();
        let (from, to, created): (Option<String>, Option<String>, Option<u64>) =
            redis::cmd("HMGET")
                .arg(key_names::transfer(zone))
                .arg("from")
                .arg("to")
                .arg("created_ms")
                .query_async(&mut con)
                .await?;
        Ok(match (from, to) {
            (Some(from), Some(to)) => Some(Transfer {
                zone: zone.to_string(),
                from,
                to,
                created_ms: created.unwrap_or_default(),
            }),
            _ => None,
        })
    }

    /// Why `zone`'s last transfer was cancelled, if it was (recently).
    pub async fn transfer_cancel_reason(
        &self,
        zone: &str,
    ) -> Result<Option<String>, DirectoryError> {
        Ok(self.conn().get(key_names::transfer_cancelled(zone)).await?)
    }

    /// The generation counter of `zone` (the last generation ever issued).
    pub async fn zone_generation(&self, zone: &str) -> Result<u64, DirectoryError> {
        let v: Option<u64> = self.conn().get(key_names::zone_gen(zone)).await?;
        Ok(v.unwrap_or_default())
    }

    /// Redis server time, ms since the epoch (for ages shown by `status`).
    pub async fn server_time_ms(&self) -> Result<u64, DirectoryError> {
        let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(&mut self.conn()).await?;
        Ok(secs * 1000 + micros / 1000)
    }
}
