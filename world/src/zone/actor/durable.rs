//! The zone's own state in the store (floor items, mobs, timers — what the
//! game keeps, in keyed parts ([`ZoneModel::changed_parts`]) or whole
//! ([`ZoneModel::dump_state_json`](crate::model::ZoneModel))): opened from
//! the store before the zone takes anyone, committed with its players'
//! rows after every turn that changed it (`commit`), and saved on every
//! planned close (a drain's seal, a transfer's close, a shutdown) through
//! the same fenced script, fenced in the store on the zone's lease
//! generation and on this actor's open (the store's `zone_state`).
//!
//! A zone claimed here (boot, orphan, transfer pre-warm) opens its state as
//! the actor starts; a zone built ahead of its lease (an adoption, a
//! transfer target) opens it when the lease is observed to be ours
//! (`Msg::Restore`), which is after the previous owner's final save: the
//! drain seals and saves before it flips the lease, a transfer's source
//! saves before it closes.
//!
//! [`ZoneModel::changed_parts`]: crate::model::ZoneModel::changed_parts

use std::time::Duration;

use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::ZoneActor;
use crate::zone::persist::SAVE_TIMEOUT;
use telos_redis::store::{CommitOutcome, ZoneCommit, ZoneStateOpened, ZoneStateRefused};

/// Attempts at opening the state before the zone gives up on opening (a
/// Redis blip rides through; a longer outage stops the zone, which its
/// claimer retries).
const OPEN_ATTEMPTS: u32 = 3;
/// Pause between those attempts.
const OPEN_RETRY: Duration = Duration::from_millis(200);

/// Why the zone's state could not be opened: the zone does not run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OpenError {
    #[error("refused: {0}")]
    Refused(#[from] ZoneStateRefused),
    #[error("the store could not be read: {0}")]
    Failed(String),
}

impl ZoneActor {
    /// Take the zone's state row over at lease generation `generation` and
    /// put the saved state into the (freshly opened, empty) zone; with
    /// nothing saved, the zone stays as the world files built it.
    pub(super) async fn open_state(&mut self, generation: u64) -> Result<(), OpenError> {
        let started = Instant::now();
        let mut attempt = 0;
        let opened = loop {
            attempt += 1;
            let open = self.env.store.open_zone_state(
                &self.id,
                &self.env.shard_id,
                generation,
                self.row.holder,
            );
            let failed = match tokio::time::timeout(SAVE_TIMEOUT, open).await {
                Ok(Ok(result)) => break result?,
                Ok(Err(e)) => e.to_string(),
                Err(_) => format!("no answer within {SAVE_TIMEOUT:?}"),
            };
            if attempt >= OPEN_ATTEMPTS {
                return Err(OpenError::Failed(failed));
            }
            debug!(zone = %self.id, error = failed, "opening the zone state failed; retrying");
            tokio::time::sleep(OPEN_RETRY).await;
        };
        self.row.opened_at = Some(generation);
        metrics::histogram!("telos_zone_state_open_seconds")
            .record(started.elapsed().as_secs_f64());
        self.row.unsent.clear();
        self.row.commits = opened.commits;
        self.load_opened(generation, opened);
        Ok(())
    }

    /// Put what the row held into the (freshly opened, empty) zone: its
    /// keyed parts, or its whole state; nothing saved, or nothing this game
    /// can read, leaves the zone as the world files built it.
    fn load_opened(&mut self, generation: u64, opened: ZoneStateOpened) {
        if opened.is_empty() {
            info!(zone = %self.id, generation, "no saved zone state: opened from the world files");
            return;
        }
        let bytes = opened.whole.as_ref().map_or(0, Vec::len)
            + opened
                .parts
                .iter()
                .map(|(k, v)| k.len() + v.len())
                .sum::<usize>();
        let loaded = if opened.parts.is_empty() {
            let whole = opened.whole.unwrap_or_default();
            let loaded = self.state.load_state_json(&whole);
            if loaded.is_ok() {
                self.row.last = Some(whole);
            }
            loaded
        } else {
            self.state.load_state_parts(&opened.parts)
        };
        match loaded {
            Ok(()) => {
                info!(zone = %self.id, generation, bytes, parts = opened.parts.len(), "zone state opened from the store");
            }
            Err(e) => {
                // A row this game cannot read (a world edited beyond
                // recognition, a bug): the zone still opens, from its
                // world files, and its next commit replaces the row.
                metrics::counter!("telos_zone_state_total", "outcome" => "unreadable").increment(1);
                warn!(zone = %self.id, error = %e, "saved zone state unreadable: opened from the world files");
            }
        }
    }

    /// Save the zone's state if it changed since the last save. Refused:
    /// the lease moved on or another open took the row — this actor is a
    /// stale owner and stops (unless it is closing already). `true` when
    /// the row holds the zone's state now.
    pub(super) async fn save_state(&mut self) -> bool {
        let Some(side) = self.zone_side() else {
            return true;
        };
        if side.whole.is_none() && self.row.unsent.is_empty() {
            return true;
        }
        let started = Instant::now();
        let batch = ZoneCommit {
            zone: Some(self.zone_fence(side.generation)),
            state: side.whole.as_deref(),
            parts: self.row.unsent_parts(true),
            rows: Vec::new(),
        };
        let save = self.env.store.commit_zone(&batch);
        // Never wait on Redis past the lease's local deadline: a zone cut
        // from Redis must fence by then (a peer may serve it just after),
        // not sit in a save while still counted as serving. The save
        // itself is fenced by the generation in Redis either way.
        let until = self.lease.as_ref().map_or(started + SAVE_TIMEOUT, |l| {
            l.deadline().min(started + SAVE_TIMEOUT)
        });
        let outcome = tokio::time::timeout_at(until, save).await;
        drop(batch);
        let generation = side.generation;
        let failed = match outcome {
            Ok(Ok(CommitOutcome::Committed { .. })) => {
                metrics::counter!("telos_zone_state_total", "outcome" => "saved").increment(1);
                metrics::histogram!("telos_zone_state_save_seconds")
                    .record(started.elapsed().as_secs_f64());
                self.row.written(side.whole);
                return true;
            }
            Ok(Ok(CommitOutcome::Zone(ZoneStateRefused::Behind { commits }))) => {
                // Rewritten whole by the next try (the seal's retries).
                self.row_went_back(commits);
                return false;
            }
            Ok(Ok(CommitOutcome::Zone(refused))) => {
                metrics::counter!("telos_zone_state_total", "outcome" => "refused").increment(1);
                warn!(zone = %self.id, generation, %refused, "zone state save refused: a stale owner; stopping the zone");
                self.handle.cancel.cancel();
                return false;
            }
            Ok(Ok(other)) => format!("unexpected answer {other:?}"),
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no answer within {:?}", until - started),
        };
        metrics::counter!("telos_zone_state_total", "outcome" => "failed").increment(1);
        warn!(zone = %self.id, error = failed, "zone state save failed; retried at the next commit");
        false
    }

    /// `Msg::Restore`: the lease of a zone built ahead of it is ours at
    /// `generation` (observed, not yet confirmed: nobody is in the zone).
    pub(super) async fn restore(&mut self, generation: u64) -> bool {
        if !self.sessions.is_empty() || !self.frozen.is_empty() {
            // Cannot happen while the lease is unconfirmed (every join is
            // refused); never load over players.
            warn!(zone = %self.id, "restore with players in the zone: refused");
            return false;
        }
        match self.open_state(generation).await {
            Ok(()) => true,
            Err(e) => {
                warn!(zone = %self.id, generation, error = %e, "opening the zone state failed");
                false
            }
        }
    }
}
