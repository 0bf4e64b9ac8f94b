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

use std::time::Duration;

use telos_proto::v1::{DurableAck, server_frame::Frame};
use tokio::sync::oneshot;
use tokio::time::Instant;
use tracing::{debug, warn};

use super::{RECONNECTING, ZoneActor};
use crate::handoff::fence::SETTLE_BOUND;
use crate::zone::handle::InputReply;
use crate::zone::persist::{Refusal, SAVE_TIMEOUT, classify};
use telos_redis::store::{
    ClaimId, CommitOutcome, RowWrite, ZoneCommit, ZoneFence, ZoneStateRefused,
};

/// A commit refused for one row is tried again without it this many times
/// in one turn (each refusal is settled on its own first).
const ROW_REFUSALS: usize = 3;

/// How long a row may refuse every commit of its zone before the zone
/// fences (see `commit_settled`).
const REFUSED_FENCE: Duration = Duration::from_secs(3);

/// How soon a commit that failed (Redis unreachable, a timeout) is tried
/// again.
const RETRY: Duration = Duration::from_millis(100);

/// See [`ZoneActor::zone_side`].
pub(super) struct ZoneSide {
    pub(super) generation: u64,
    pub(super) whole: Option<Vec<u8>>,
}

/// What one commit attempt came to.
enum Attempt {
    Done,
    /// Nothing was written: try again later.
    Failed,
    /// Row `key` was refused, and where it is instead: settle it, then
    /// commit again.
    Refused(String, RowAt),
    /// Commit again (what refused it is settled).
    Retry,
}

/// Where a refused row is.
struct RowAt {
    epoch: u64,
    version: u64,
    claim: ClaimId,
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
            if !self.commit_settled().await {
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
    /// module) and, once it landed, release what was held; `true` when it
    /// landed. A session handed off here whose `Commit` is still in flight
    /// must not write yet, and the zone's side of its lines must not be
    /// committed without its row: this waits (bounded) for it.
    pub(super) async fn commit(&mut self) -> bool {
        self.settle_fences().await;
        self.commit_settled().await
    }

    /// The commit itself (a turn's, which never waits for a handoff's
    /// `Commit` in flight: the zone plays on, its answers held, and the
    /// turn after it resolves commits), unless a session with lines to commit cannot
    /// write yet (its handoff's `Commit` in flight): then nothing is
    /// committed, not even the zone's side.
    async fn commit_settled(&mut self) -> bool {
        let fenced = self
            .sessions
            .values_mut()
            .any(|m| m.needs_save() && !m.writable());
        if fenced || !self.lease_valid() {
            return false;
        }
        for _ in 0..=ROW_REFUSALS {
            match self.try_commit().await {
                Attempt::Done => {
                    self.pending.refusals_ended();
                    self.release_all();
                    return true;
                }
                Attempt::Failed => return false,
                Attempt::Retry => {}
                Attempt::Refused(key, row) => {
                    if !self.settle_refusal(&key, row).await {
                        return false;
                    }
                }
            }
        }
        // A row that keeps refusing (a damaged row): the zone's answers
        // wait for it, but not for ever — the zone fences and reopens
        // from its last commit, where that player cannot log in until the
        // row is repaired.
        if self.pending.refused() > REFUSED_FENCE {
            warn!(zone = %self.id, "a row has refused every commit for {REFUSED_FENCE:?}: fencing the zone");
            self.handle.cancel.cancel();
        }
        false
    }

    /// A row refused the zone commit (nothing was written): settle the
    /// refusal in memory and commit again, whole — never by writing the row
    /// alone, which would split the player from the zone. `false`: the
    /// commit cannot land now (see below).
    async fn settle_refusal(&mut self, key: &str, row: RowAt) -> bool {
        let Some(meta) = self.sessions.get_mut(key) else {
            return true;
        };
        let ours = (meta.epoch, meta.claim, meta.state_version);
        match classify(
            ours,
            meta.departure_claim,
            row.epoch,
            row.claim,
            row.version,
        ) {
            // Our own write or mint whose reply was lost: adopt it.
            Refusal::OwnMint => (meta.epoch, meta.claim) = (row.epoch, row.claim),
            Refusal::LostReply => meta.state_version = row.version,
            // Redis lost acknowledged writes: the row is healed from this
            // session first (Redis lost the cut anyway), then committed.
            Refusal::WentBack => {
                self.save(key).await;
            }
            // Another owner holds the character: this session is stale (it
            // is told so, none of its uncommitted answers shown), and this
            // zone's state holds effects of its lines that no row will
            // ever carry. It must not be committed: the zone fences and
            // reopens from its last cut.
            refusal @ (Refusal::NewerOwner | Refusal::Reissued) => {
                meta.stream.drop_uncommitted();
                let carried = meta.epoch;
                warn!(zone = %self.id, player = %key, row_epoch = row.epoch, "a player's row is another owner's: fencing the zone (it reopens from its last commit)");
                if refusal == Refusal::NewerOwner {
                    self.ownership_lost(key, carried, row.epoch, row.version);
                } else {
                    self.close(key, RECONNECTING, false);
                }
                self.handle.cancel.cancel();
                return false;
            }
        }
        true
    }
    async fn settle_fences(&mut self) {
        let deadline = Instant::now() + SETTLE_BOUND;
        for meta in self.sessions.values_mut() {
            if meta.needs_save() && !meta.writable() && !meta.settle_by(deadline).await {
                warn!(zone = %self.id, "Commit unresolved: its player's lines wait for the next commit");
            }
        }
    }

    async fn try_commit(&mut self) -> Attempt {
        let side = self.zone_side();
        let changed = side.as_ref().and_then(|s| s.whole.as_deref());
        let zone = side.as_ref().map(|s| self.zone_fence(s.generation));
        let mut keys = Vec::new();
        let mut states = Vec::new();
        for (key, meta) in &self.sessions {
            if meta.needs_save()
                && meta.commit.is_none()
                && let Some(character) = self.state.player(key)
            {
                keys.push(key.clone());
                states.push(character.dump_state_json());
            }
        }
        if changed.is_none() && self.row.unsent.is_empty() && keys.is_empty() {
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
            state: changed,
            parts: self.row.unsent_parts(zone.is_some()),
            zone,
            rows,
        };
        let zone = batch.zone.is_some();
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
                if zone {
                    self.row.written(written);
                }
                self.pending.committed();
                self.committed(&keys, &versions);
                Attempt::Done
            }
            Ok(Ok(CommitOutcome::Row {
                index,
                current_epoch,
                current_version,
                current_claim,
            })) => {
                metrics::counter!("telos_zone_commits_total", "outcome" => "row_refused")
                    .increment(1);
                let row = RowAt {
                    epoch: current_epoch,
                    version: current_version,
                    claim: current_claim,
                };
                Attempt::Refused(keys[index].clone(), row)
            }
            Ok(Ok(CommitOutcome::Missing { index })) => {
                // A player with no durable row (an ephemeral shard, a row
                // deleted under a player in play): nothing of theirs can be
                // written; the zone commits without them.
                let key = &keys[index];
                warn!(zone = %self.id, player = %key, "a player has no durable row: committing the zone without it");
                if let Some(m) = self.sessions.get_mut(key) {
                    (m.dirty, m.saved_seq) = (false, m.applied_seq);
                }
                Attempt::Retry
            }
            Ok(Ok(CommitOutcome::Zone(ZoneStateRefused::Behind { commits }))) => {
                self.row_went_back(commits);
                Attempt::Retry
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

    /// The zone's side of a commit when it has a row (not a private
    /// instance, nor a zone built ahead of its lease): the keyed parts that
    /// changed are gathered into the row's unsent parts; a game without
    /// parts gives its whole state when it changed.
    pub(super) fn zone_side(&mut self) -> Option<ZoneSide> {
        let generation = self.row.opened_at.filter(|_| self.lease.is_some())?;
        let whole = match self.state.changed_parts() {
            Some(parts) => {
                self.row.unsent.extend(parts);
                None
            }
            None => self
                .state
                .dump_state_json()
                .filter(|s| self.row.last.as_deref() != Some(s.as_slice())),
        };
        Some(ZoneSide { generation, whole })
    }

    /// The fence of a commit of this zone at lease `generation`.
    pub(super) fn zone_fence(&self, generation: u64) -> ZoneFence<'_> {
        ZoneFence {
            zone: &self.id,
            shard: &self.env.shard_id,
            generation,
            holder: self.row.holder,
            commits: Some(self.row.commits),
        }
    }

    /// The zone's row lost commits (Redis lost acknowledged writes): its
    /// parts may be older than what the game last reported, so the next
    /// commit writes every part (the players' rows heal on their own
    /// refusals).
    pub(super) fn row_went_back(&mut self, commits: u64) {
        warn!(zone = %self.id, commits, expected = self.row.commits, "the zone's row lost commits (Redis lost writes): rewriting all of it");
        metrics::counter!("telos_rows_healed_total").increment(1);
        self.row.commits = commits;
        self.row.last = None;
        self.state.report_all_parts();
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
                m.stream.send(Frame::DurableAck(DurableAck { seq }));
            }
        }
    }

    /// The zone's commit landed: send what its lines said, to everyone who
    /// hears it, and answer them — all but a player whose row was left out
    /// of it (see `commit_settled`), who waits for the next.
    pub(super) fn release_all(&mut self) {
        for meta in self.sessions.values_mut().filter(|m| !m.needs_save()) {
            meta.stream.release();
        }
        // A walker frozen with its move line applied waits for its
        // `Redirect` (or its refusal), which releases what it holds.
        for frozen in self.frozen.values_mut().filter(|f| !f.meta.needs_save()) {
            frozen.meta.stream.release();
        }
        let sessions = &self.sessions;
        self.pending
            .answer(|key| sessions.get(key).is_some_and(|m| m.needs_save()));
    }
}
