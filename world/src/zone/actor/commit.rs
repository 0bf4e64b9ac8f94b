//! One command, one commit: what a batch of applied lines changed — the
//! zone's state and every player row it touched, each with its
//! `applied_seq` — is committed in one fenced, atomic step
//! ([`Store::commit_zone`](telos_redis::store::Store::commit_zone)), and
//! only then is anything the batch said released (output commit).
//!
//! A batch is whatever the actor applied since its last commit: the loop
//! commits after each turn, so a batch forms while the previous commit is
//! in flight (a few ms at most). A crash rolls the zone and its players
//! back to one cut, never to two moments, so an item is never in two
//! places or in none; and an answer nobody has seen is the only kind a
//! crash can take back — the gate replays those lines where the player
//! plays next.
//!
//! While Redis does not answer, answers wait (the commit is retried) until
//! the lease's local deadline fences the zone: commands wait instead of
//! being answered and later taken back.

use std::collections::HashSet;
use std::time::Duration;

use telos_proto::v1::{DurableAck, server_frame::Frame};
use tokio::sync::oneshot;
use tokio::time::Instant;
use tracing::{debug, warn};

use super::ZoneActor;
use crate::handoff::fence::SETTLE_BOUND;
use crate::zone::handle::InputReply;
use crate::zone::persist::SAVE_TIMEOUT;
use telos_redis::store::{CommitOutcome, RowWrite, ZoneCommit, ZoneFence};

/// A commit refused for one row is tried again without it this many times
/// in one turn (each refusal is settled on its own first).
const ROW_REFUSALS: usize = 3;

/// How soon a commit that failed (Redis unreachable, a timeout) is tried
/// again.
const RETRY: Duration = Duration::from_millis(100);

/// What one commit attempt came to.
enum Attempt {
    Done,
    /// Nothing was written: try again later.
    Failed,
    /// Row `key` was refused: settle it, then commit the rest again.
    Refused(String),
}

impl ZoneActor {
    /// When a turn's commit that did not land is tried again (the actor
    /// wakes for it).
    pub(super) fn retry_at(&self) -> Option<Instant> {
        self.pending.retry_at()
    }

    /// The line's reply waits for the commit covering it.
    pub(super) fn hold_until_commit(
        &mut self,
        key: &str,
        reply: oneshot::Sender<InputReply>,
        r: InputReply,
    ) {
        self.pending.reply(key, reply, r);
    }

    /// The zone's state may have changed (a command, a tick, an arrival).
    pub(super) fn touch(&mut self) {
        self.pending.touch();
    }

    /// End of a turn: commit what it changed, then release what it said.
    /// Nothing is released while a commit is due and has not landed.
    pub(super) async fn end_turn(&mut self) {
        if self.commit_due() {
            if self.pending.backing_off() {
                return;
            }
            if !self.commit_unless_fenced().await {
                self.pending.retry_from(Instant::now() + RETRY);
                return;
            }
        }
        self.pending.committed();
        self.release_all();
    }

    /// Whether anything applied here is not durable yet.
    fn commit_due(&self) -> bool {
        self.pending.touched() || self.sessions.values().any(|m| m.needs_save())
    }

    /// Commit every change of the zone and its players now (see the
    /// module); `true` once the zone's commit landed (a damaged row may
    /// have been left out of it, see `commit_settled`). Held
    /// output stays held: [`release_all`](Self::release_all) sends it. A
    /// session handed off here whose `Commit` is still in flight must not
    /// write yet, and the zone's side of its lines must not be committed
    /// without its row: this waits (bounded) for it — a player about to
    /// leave the zone waits anyway.
    pub(super) async fn commit(&mut self) -> bool {
        self.settle_fences().await;
        self.commit_settled().await
    }

    /// A turn's commit: never waits for a handoff's `Commit` in flight (the
    /// zone plays on, its answers held; the turn after it resolves
    /// commits).
    async fn commit_unless_fenced(&mut self) -> bool {
        let fenced = self
            .sessions
            .values_mut()
            .any(|m| m.needs_save() && !m.writable());
        !fenced && self.commit_settled().await
    }

    async fn commit_settled(&mut self) -> bool {
        if !self.lease_valid() {
            return false;
        }
        let mut left_out = HashSet::new();
        for _ in 0..=ROW_REFUSALS {
            match self.try_commit(&left_out).await {
                Attempt::Done => return true,
                Attempt::Failed => return false,
                Attempt::Refused(key) => {
                    // Settled alone the way a refused save is (adopt our
                    // own lost write, heal a row Redis lost, or close a
                    // session a newer claim took over); then the rest
                    // again, whole. A row that still cannot be written (a
                    // damaged row) is left out rather than holding the
                    // whole zone: its player's answers wait, the others'
                    // do not.
                    self.save(&key).await;
                    if self.sessions.get(&key).is_some_and(|m| m.needs_save()) {
                        warn!(zone = %self.id, player = %key, "row refused the zone commit: committing without it (its answers wait)");
                        left_out.insert(key);
                    }
                }
            }
        }
        false
    }

    async fn settle_fences(&mut self) {
        let deadline = Instant::now() + SETTLE_BOUND;
        for meta in self.sessions.values_mut() {
            if meta.needs_save() && !meta.writable() && !meta.settle_by(deadline).await {
                warn!(zone = %self.id, "Commit unresolved: its player's lines wait for the next commit");
            }
        }
    }

    async fn try_commit(&mut self, left_out: &HashSet<String>) -> Attempt {
        let state = self.state.dump_state_json();
        let changed = state
            .as_deref()
            .filter(|s| self.row.last.as_deref() != Some(*s));
        let zone = match (&self.lease, self.row.opened_at) {
            (Some(_), Some(generation)) => Some(ZoneFence {
                zone: &self.id,
                shard: &self.env.shard_id,
                generation,
                holder: self.row.holder,
            }),
            _ => None,
        };
        let mut keys = Vec::new();
        let mut states = Vec::new();
        for (key, meta) in &self.sessions {
            if meta.needs_save()
                && meta.commit.is_none()
                && !left_out.contains(key)
                && let Some(character) = self.state.player(key)
            {
                keys.push(key.clone());
                states.push(character.dump_state_json());
            }
        }
        if changed.is_none() && keys.is_empty() {
            self.pending.committed();
            return Attempt::Done;
        }
        let rows = keys
            .iter()
            .zip(&states)
            .map(|(key, state)| {
                let m = &self.sessions[key];
                RowWrite {
                    name: key,
                    fence: (m.epoch, m.state_version),
                    state,
                    conn_id: &m.conn_id,
                    applied_seq: m.applied_seq,
                    quit: m.quit,
                }
            })
            .collect();
        let batch = ZoneCommit {
            state: changed.filter(|_| zone.is_some()),
            zone,
            rows,
        };
        let started = Instant::now();
        let until = self.lease.as_ref().map_or(started + SAVE_TIMEOUT, |l| {
            l.deadline().min(started + SAVE_TIMEOUT)
        });
        let outcome = tokio::time::timeout_at(until, self.env.store.commit_zone(&batch)).await;
        let written = batch.state.map(<[u8]>::to_vec);
        drop(batch);
        match outcome {
            Ok(Ok(CommitOutcome::Committed { versions })) => {
                metrics::histogram!("telos_zone_commit_seconds")
                    .record(started.elapsed().as_secs_f64());
                metrics::counter!("telos_zone_commits_total", "outcome" => "committed")
                    .increment(1);
                if written.is_some() {
                    self.row.last = written;
                }
                self.pending.committed();
                self.committed(&keys, &versions);
                Attempt::Done
            }
            Ok(Ok(CommitOutcome::Row { index, .. })) | Ok(Ok(CommitOutcome::Missing { index })) => {
                metrics::counter!("telos_zone_commits_total", "outcome" => "row_refused")
                    .increment(1);
                Attempt::Refused(keys[index].clone())
            }
            Ok(Ok(CommitOutcome::Zone(refused))) => {
                metrics::counter!("telos_zone_commits_total", "outcome" => "zone_refused")
                    .increment(1);
                warn!(zone = %self.id, %refused, "zone commit refused: a stale owner; stopping the zone");
                self.handle.cancel.cancel();
                Attempt::Failed
            }
            Ok(Err(e)) => self.commit_failed(&e.to_string()),
            Err(_) => self.commit_failed(&format!("no answer within {:?}", until - started)),
        }
    }

    fn commit_failed(&self, error: &str) -> Attempt {
        metrics::counter!("telos_zone_commits_total", "outcome" => "failed").increment(1);
        metrics::counter!("telos_redis_errors_total", "op" => "commit").increment(1);
        // Once per outage, not at every retry.
        if self.pending.retry_at().is_none() {
            warn!(zone = %self.id, error, "zone commit failed; answers wait for the retry");
        } else {
            debug!(zone = %self.id, error, "zone commit failed again");
        }
        Attempt::Failed
    }

    /// The rows of `keys` are at `versions` now: every line applied so far
    /// is durable, and the gate may forget them.
    fn committed(&mut self, keys: &[String], versions: &[u64]) {
        for (key, version) in keys.iter().zip(versions) {
            if let Some(m) = self.sessions.get_mut(key) {
                m.state_version = *version;
                m.saved_seq = m.applied_seq;
                m.dirty = false;
                let seq = m.applied_seq;
                m.send(Frame::DurableAck(DurableAck { seq }));
            }
        }
    }

    /// The zone's commit landed: send what its lines said, to everyone who
    /// hears it, and answer them — all but a player whose row was left out
    /// of it (see `commit_settled`), who waits for the next.
    pub(super) fn release_all(&mut self) {
        for meta in self.sessions.values_mut().filter(|m| !m.needs_save()) {
            meta.release();
        }
        for frozen in self.frozen.values_mut() {
            frozen.meta.release();
        }
        let sessions = &self.sessions;
        self.pending
            .answer(|key| sessions.get(key).is_some_and(|m| m.needs_save()));
    }
}
