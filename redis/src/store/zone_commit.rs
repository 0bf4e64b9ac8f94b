//! One zone batch committed whole: the zone's state and every character row
//! the batch touched, in one fenced script (`zone_commit.lua`).
//!
//! A command that changes a player and the zone (`get`, `drop`, `give`)
//! is durable in both or in neither: a crash rolls the zone and its
//! players back to one cut, never to two different moments (the crash
//! dupe). The script checks every fence before it writes anything — the
//! zone's lease (shard, generation) and the open that holds its state row,
//! and each row's `owner_epoch` and `state_version` — and is refused whole
//! when one fails, naming which.

use std::sync::LazyLock;

use redis::{Script, Value};

use super::claim_id::ClaimId;
use super::error::StoreError;
use super::handle::{Store, row_key};
use super::zone_state::{ZoneStateRefused, check_zone};
use crate::directory::key_names;

static COMMIT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("zone_commit.lua")));

/// The zone's part of a commit: its fence, and its state when it changed.
#[derive(Clone, Copy, Debug)]
pub struct ZoneFence<'a> {
    pub zone: &'a str,
    pub shard: &'a str,
    pub generation: u64,
    /// The open that holds the zone's state row.
    pub holder: ClaimId,
    /// The row's commit counter as this open last left it (`None`: not
    /// checked): a row behind it lost commits.
    pub commits: Option<u64>,
}

/// One character row a commit writes, fenced as a save is.
#[derive(Clone, Copy, Debug)]
pub struct RowWrite<'a> {
    pub name: &'a str,
    /// The epoch and `state_version` the session writes under.
    pub fence: (u64, u64),
    pub state: &'a [u8],
    pub conn_id: &'a str,
    pub applied_seq: u64,
    /// This write ends the session with the player's quit (`quit_seq`).
    pub quit: bool,
}

/// One zone batch to commit.
#[derive(Debug, Default)]
pub struct ZoneCommit<'a> {
    /// `None` for a private instance (no lease, no state row).
    pub zone: Option<ZoneFence<'a>>,
    /// The zone's state whole, when it changed since the last commit (a
    /// game that keeps no keyed parts).
    pub state: Option<&'a [u8]>,
    /// The keyed parts of the zone's state that changed (`None`: the part
    /// is gone); writing any supersedes a whole state.
    pub parts: Vec<(&'a str, Option<&'a [u8]>)>,
    pub rows: Vec<RowWrite<'a>>,
}

/// What a commit did.
#[derive(Debug, PartialEq, Eq)]
pub enum CommitOutcome {
    /// Everything written; each row's new `state_version`, in order.
    Committed { versions: Vec<u64> },
    /// Nothing written: the zone's fence refused.
    Zone(ZoneStateRefused),
    /// Nothing written: row `index` is not at its session's epoch and
    /// version (what it is at instead, as a refused save reports).
    Row {
        index: usize,
        current_epoch: u64,
        current_version: u64,
        current_claim: ClaimId,
    },
    /// Nothing written: row `index` does not exist.
    Missing { index: usize },
}

impl Store {
    /// Commit `batch` in one atomic, fenced step (see the module).
    pub async fn commit_zone(&self, batch: &ZoneCommit<'_>) -> Result<CommitOutcome, StoreError> {
        let mut call = COMMIT.prepare_invoke();
        match batch.zone {
            Some(z) => {
                if z.zone.is_empty() || telos_proto::ids::is_instance_id(z.zone) {
                    return Err(StoreError::Invalid(format!(
                        "no zone state row for zone id {:?}",
                        z.zone
                    )));
                }
                call.key(key_names::zone_state(z.zone))
                    .key(key_names::zone_lease(z.zone))
                    .arg(2)
                    .arg(z.shard)
                    .arg(z.generation)
                    .arg(z.holder.to_string());
            }
            None => {
                call.arg(0).arg("").arg(0).arg("");
            }
        }
        match batch.state {
            Some(state) if batch.zone.is_some() => call.arg("1").arg(state),
            _ => call.arg("0").arg(""),
        };
        let parts = if batch.zone.is_some() {
            &batch.parts[..]
        } else {
            &[]
        };
        call.arg(parts.len());
        for (key, value) in parts {
            if value.is_some_and(<[u8]>::is_empty) {
                return Err(StoreError::Invalid(format!(
                    "zone state part {key:?} is empty"
                )));
            }
            call.arg(*key).arg(value.unwrap_or_default());
        }
        for row in &batch.rows {
            call.key(row_key(row.name)?)
                .arg(row.fence.0)
                .arg(row.fence.1)
                .arg(row.state)
                .arg(row.conn_id)
                .arg(row.applied_seq)
                .arg(if row.quit { row.applied_seq } else { 0 });
        }
        let commits = batch.zone.and_then(|z| z.commits);
        call.arg(commits.map(|c| c.to_string()).unwrap_or_default());
        let reply: Value = call.invoke_async(&mut self.conn().durable()).await?;
        outcome(reply)
    }
}

impl Store {
    /// Save `state` as `zone`'s whole state, fenced on the lease (`shard`,
    /// `generation`) and on the open `holder`: a zone commit without rows
    /// (see [`zone_commit`](super::zone_commit)).
    pub async fn save_zone_state(
        &self,
        zone: &str,
        shard: &str,
        generation: u64,
        holder: ClaimId,
        state: &[u8],
    ) -> Result<Result<(), ZoneStateRefused>, StoreError> {
        check_zone(zone)?;
        let batch = ZoneCommit {
            zone: Some(ZoneFence {
                zone,
                shard,
                generation,
                holder,
                commits: None,
            }),
            state: Some(state),
            ..ZoneCommit::default()
        };
        match self.commit_zone(&batch).await? {
            CommitOutcome::Committed { .. } => Ok(Ok(())),
            CommitOutcome::Zone(refused) => Ok(Err(refused)),
            other => Err(StoreError::Invalid(format!(
                "a zone save without rows: {other:?}"
            ))),
        }
    }
}

fn outcome(reply: Value) -> Result<CommitOutcome, StoreError> {
    let bad = || StoreError::Invalid("unexpected reply from the zone commit script".into());
    let Value::Array(items) = reply else {
        return Err(bad());
    };
    let int = |v: Option<&Value>| -> Option<i64> {
        match v? {
            Value::Int(n) => Some(*n),
            Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
            Value::SimpleString(s) => s.parse().ok(),
            _ => None,
        }
    };
    let text = |v: Option<&Value>| -> String {
        match v {
            Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
            Some(Value::SimpleString(s)) => s.clone(),
            _ => String::new(),
        }
    };
    let index = |v: Option<&Value>| int(v).and_then(|i| usize::try_from(i - 1).ok());
    match int(items.first()).ok_or_else(bad)? {
        1 => items[1..]
            .iter()
            .map(|v| int(Some(v)).map(|n| n as u64).ok_or_else(bad))
            .collect::<Result<_, _>>()
            .map(|versions| CommitOutcome::Committed { versions }),
        0 if text(items.get(1)) == "row" => Ok(CommitOutcome::Row {
            index: index(items.get(2)).ok_or_else(bad)?,
            current_epoch: int(items.get(3)).unwrap_or(0) as u64,
            current_version: int(items.get(4)).unwrap_or(0) as u64,
            current_claim: ClaimId::parse(&text(items.get(5))),
        }),
        0 if text(items.get(1)) == "holder" => Ok(CommitOutcome::Zone(ZoneStateRefused::Holder)),
        0 if text(items.get(1)) == "behind" => Ok(CommitOutcome::Zone(ZoneStateRefused::Behind {
            commits: int(items.get(2)).unwrap_or(0) as u64,
        })),
        0 => Ok(CommitOutcome::Zone(ZoneStateRefused::Lease)),
        _ => Ok(CommitOutcome::Missing {
            index: index(items.get(2)).ok_or_else(bad)?,
        }),
    }
}

#[cfg(test)]
#[path = "zone_commit_tests.rs"]
mod tests;
