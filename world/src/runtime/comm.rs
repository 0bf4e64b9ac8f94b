//! Words between players on different shards: `tell` and `chat`, over
//! Redis pub/sub on one channel every shard subscribes to
//! (`telos:comm`; docs/architecture.md says why Redis and not peer gRPC or
//! the gates).
//!
//! - **chat**: one `PUBLISH`; every shard (this one too) gives the line to
//!   every zone it hosts. Nobody subscribed (Redis unreachable): the
//!   speaker is told nobody heard it.
//! - **tell**: tried here first (the roster says which zone holds the
//!   listener); otherwise published, and the shard whose zone gives it to
//!   the listener answers `Heard`. A listener frozen mid-move hears nobody
//!   until they land, so the tell is tried again every [`TELL_ROUND`] until
//!   [`TELL_DEADLINE`]. Every retry is the same tell (one id, and one
//!   answer awaited across all rounds: a late answer to an earlier round
//!   still counts); each shard remembers the tells it delivered or is
//!   delivering, so a retry that queued up behind the first (a shard slow
//!   to read the channel) is answered, not delivered twice. The
//!   speaker always gets one line: what they said, "no one called X is
//!   online" (the online list names nobody of that name twice in a row, or
//!   only a concealed one to a speaker who is no admin), or "could not be
//!   reached".

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::model::{Broadcast, Delivery, Tell};
use crate::runtime::subscription::{self, read_until_lost};
use crate::zone::comm::Outgoing;
use crate::zone::roster::Roster;
use crate::zone::{ANSWER_BOUND, Hosted, WALK_RETRY_WINDOW, ZoneEnv};
use telos_redis::directory::Directory;
use telos_redis::directory::connection::RESPONSE_TIMEOUT;
use telos_redis::directory::key_names;
use telos_redis::target::RedisTarget;

/// A tell is tried again this often while nobody has answered: a move
/// between zones or shards takes well under it.
pub const TELL_ROUND: Duration = Duration::from_millis(250);

/// ... for this long, then the speaker hears it could not be delivered:
/// the walk window (`WALK_RETRY_WINDOW`) plus a round, so a listener whose
/// move is retried to its end is still reached, and still inside the 2 s
/// every command is answered within.
pub const TELL_DEADLINE: Duration = WALK_RETRY_WINDOW.saturating_add(TELL_ROUND);
const _: () = assert!(TELL_DEADLINE.as_millis() < ANSWER_BOUND.as_millis());

/// Rounds the speaker's answer waits for them to land, if they are
/// mid-move when it comes (a walk between zones of this shard).
const SPEAKER_ROUNDS: u32 = 8;

/// Tells in flight from this shard at once; past it the speaker is told
/// at once (the chat limit keeps a player to a few a second, so only a
/// crowd with Redis down gets here).
const MAX_PENDING: usize = 4096;

/// Tells this shard delivered, remembered so a retry is answered rather
/// than delivered twice: about a deadline's worth at a busy shard's rate.
const DELIVERED_MEMORY: usize = 4096;

/// How long the subscription waits before it is made again after a loss.
const RESUBSCRIBE: Duration = Duration::from_secs(1);

/// One message on the comm channel (JSON).
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Wire {
    /// A tell looking for its listener (`heard.to`).
    Tell {
        from_shard: String,
        id: u64,
        heard: Delivery,
        speaker_is_admin: bool,
    },
    /// The listener's shard to the speaker's: given (`heard`), or the
    /// listener is concealed from this speaker.
    Answer {
        to_shard: String,
        id: u64,
        heard: bool,
    },
    Chat(Broadcast),
}

/// What became of one tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    Heard,
    Absent,
    Unreachable,
}

/// What the comm task shares with the tasks it spawns.
struct Hub {
    shard: String,
    directory: Directory,
    hosted: Hosted,
    roster: Roster,
    next_id: AtomicU64,
    /// Tells of ours waiting for an answer, by id.
    pending: Mutex<HashMap<u64, oneshot::Sender<Fate>>>,
    /// Tells we delivered: (speaker's shard, id).
    delivered: Mutex<VecDeque<(String, u64)>>,
    /// Tells being given to a zone right now: a retry of one of them
    /// leaves the answer to the first.
    delivering: Mutex<HashSet<(String, u64)>>,
}

/// What a shard may do with a tell from another shard.
enum Claim {
    /// Already given: answer again, give nothing.
    Delivered,
    /// Being given by an earlier copy, which answers.
    Busy,
    /// This copy gives it.
    Mine,
}

/// Run the shard's comm: what its zones send out, and what the channel
/// brings in. Ends with the shard's root token.
pub async fn run(env: ZoneEnv, redis: RedisTarget, mut out: mpsc::Receiver<Outgoing>) {
    let hub = Arc::new(Hub {
        shard: env.shard_id.clone(),
        directory: env.directory.clone(),
        hosted: env.hosted.clone(),
        roster: env.roster.clone(),
        // Random per process: a shard restarted under the same id must not
        // reuse ids its predecessor's tells still hold in a listener
        // shard's delivered memory (they would be answered "heard" and
        // never given).
        next_id: AtomicU64::new(rand::random::<u64>() >> 1),
        pending: Mutex::default(),
        delivered: Mutex::default(),
        delivering: Mutex::default(),
    });
    let (h, root) = (hub.clone(), env.root.clone());
    env.tracker
        .spawn(async move { subscribe(h, redis, root).await });
    loop {
        let words = tokio::select! {
            _ = env.root.cancelled() => return,
            w = out.recv() => match w {
                Some(w) => w,
                None => return,
            },
        };
        match words {
            Outgoing::Tell(tell) => {
                let h = hub.clone();
                env.tracker.spawn(async move { h.tell(*tell).await });
            }
            // In order: one speaker's lines are read as they said them.
            Outgoing::Broadcast(line) => hub.chat(*line).await,
        }
    }
}

impl Hub {
    /// Give `d` to its player if a zone of this shard holds them.
    async fn give_here(&self, d: &Delivery) -> bool {
        let Some(zone) = self.roster.zone_of(&d.to) else {
            return false;
        };
        match self.hosted.get(&zone) {
            Some(handle) => handle.hear(d.clone()).await,
            None => false,
        }
    }

    /// Whether this shard's roster shows `key` concealed.
    fn concealed_here(&self, key: &str) -> bool {
        self.roster
            .snapshot()
            .iter()
            .any(|p| p.name.eq_ignore_ascii_case(key) && p.wizinvis)
    }

    async fn chat(&self, line: Broadcast) {
        let unsent = line.unsent.clone();
        let from = line.from.clone();
        let sent = match serde_json::to_string(&Wire::Chat(line)) {
            Ok(json) => self.publish(&json).await,
            Err(_) => false,
        };
        if !sent {
            self.give_here(&Delivery::new(&from, unsent)).await;
        }
    }

    /// `PUBLISH`; true when some shard received it (this one subscribes
    /// too, so none means the subscription, or Redis, is down).
    async fn publish(&self, json: &str) -> bool {
        match tokio::time::timeout(RESPONSE_TIMEOUT, self.directory.publish_comm(json)).await {
            Ok(Ok(n)) => n > 0,
            Ok(Err(e)) => {
                warn!(error = %e, "publishing on the comm channel failed");
                false
            }
            Err(_) => false,
        }
    }

    async fn tell(&self, tell: Tell) {
        let fate = self.find(&tell).await;
        metrics::counter!("telos_tells_total", "outcome" => match fate {
            Fate::Heard => "heard",
            Fate::Absent => "absent",
            Fate::Unreachable => "unreachable",
        })
        .increment(1);
        let answer = match fate {
            Fate::Heard => tell.said,
            Fate::Absent => Delivery::new(&tell.said.to, tell.absent),
            Fate::Unreachable => Delivery::new(&tell.said.to, tell.unreachable),
        };
        // The speaker may be mid-move themselves: a few rounds for them to
        // land (on this shard; one who left it meanwhile misses the line).
        for _ in 0..SPEAKER_ROUNDS {
            if self.give_here(&answer).await {
                return;
            }
            tokio::time::sleep(TELL_ROUND).await;
        }
        debug!(speaker = %answer.to, "the speaker of a tell left before its answer");
    }

    /// Round after round until the listener has it, the online list says
    /// nobody of that name plays (twice in a row: a handoff may briefly
    /// list them nowhere), or the deadline. One id and one awaited answer
    /// for every round.
    async fn find(&self, tell: &Tell) -> Fate {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, mut answer) = oneshot::channel();
        {
            let mut pending = self.pending.lock().expect("comm pending lock");
            if pending.len() >= MAX_PENDING {
                return Fate::Unreachable;
            }
            pending.insert(id, tx);
        }
        let fate = self.rounds(tell, id, &mut answer).await;
        // Out of `pending` first: an answer arriving from here on finds no
        // sender and is dropped, so the `try_recv` below sees every answer
        // that will ever come (read before the removal, one landing in
        // between was lost and a heard tell reported unreached).
        self.pending.lock().expect("comm pending lock").remove(&id);
        match fate {
            // An answer that came in meanwhile is the truth.
            Fate::Absent | Fate::Unreachable => answer.try_recv().unwrap_or(fate),
            Fate::Heard => Fate::Heard,
        }
    }

    async fn rounds(&self, tell: &Tell, id: u64, answer: &mut oneshot::Receiver<Fate>) -> Fate {
        let key = tell.heard.to.clone();
        let deadline = Instant::now() + TELL_DEADLINE;
        let mut unlisted = 0;
        loop {
            if self.concealed_here(&key) && !tell.speaker_is_admin {
                return Fate::Absent;
            }
            // Heard elsewhere in an earlier round, its answer late: the
            // listener may have come here since; do not give it twice.
            if let Ok(fate) = answer.try_recv() {
                return fate;
            }
            if self.give_here(&tell.heard).await {
                return Fate::Heard;
            }
            match self.listed(&key).await {
                Some(None) => {
                    unlisted += 1;
                    if unlisted >= 2 {
                        return Fate::Absent;
                    }
                }
                Some(Some(concealed)) if concealed && !tell.speaker_is_admin => {
                    return Fate::Absent;
                }
                _ => unlisted = 0,
            }
            let round = (Instant::now() + TELL_ROUND).min(deadline);
            if let Some(fate) = self.ask_elsewhere(tell, id, answer, round).await {
                return fate;
            }
            tokio::time::sleep_until(round).await;
            if Instant::now() >= deadline {
                return Fate::Unreachable;
            }
        }
    }

    /// `Some(Some(concealed))`: the online list names `key`; `Some(None)`:
    /// it does not; `None`: it cannot be read now.
    async fn listed(&self, key: &str) -> Option<Option<bool>> {
        let here = self.roster.snapshot();
        let list = match tokio::time::timeout(RESPONSE_TIMEOUT, self.directory.online()).await {
            Ok(Ok(list)) => list,
            _ => return None,
        };
        Some(
            here.iter()
                .chain(&list)
                .find(|p| p.name.eq_ignore_ascii_case(key))
                .map(|p| p.wizinvis),
        )
    }

    /// Publish the tell (again: the same id) and wait for its answer
    /// until `until`.
    async fn ask_elsewhere(
        &self,
        tell: &Tell,
        id: u64,
        answer: &mut oneshot::Receiver<Fate>,
        until: Instant,
    ) -> Option<Fate> {
        let wire = Wire::Tell {
            from_shard: self.shard.clone(),
            id,
            heard: tell.heard.clone(),
            speaker_is_admin: tell.speaker_is_admin,
        };
        match serde_json::to_string(&wire) {
            Ok(json) if self.publish(&json).await => tokio::time::timeout_at(until, answer)
                .await
                .ok()
                .and_then(Result::ok),
            _ => None,
        }
    }

    /// One message from the channel. Channel lines and answers are
    /// handled in order, never waiting; a tell waits on a zone's mailbox,
    /// so it gets a task of its own and holds up nothing behind it.
    fn on_message(self: &Arc<Self>, json: String) {
        let wire: Wire = match serde_json::from_str(&json) {
            Ok(w) => w,
            Err(e) => {
                // A newer build's message: skipped, never fatal.
                debug!(error = %e, "an unreadable comm message");
                return;
            }
        };
        match wire {
            Wire::Chat(line) => {
                let line = Arc::new(line);
                for zone in self.hosted.all() {
                    zone.broadcast(line.clone());
                }
            }
            Wire::Answer {
                to_shard,
                id,
                heard,
            } if to_shard == self.shard => {
                let fate = if heard { Fate::Heard } else { Fate::Absent };
                if let Some(tx) = self.pending.lock().expect("comm pending lock").remove(&id) {
                    let _ = tx.send(fate);
                }
            }
            Wire::Answer { .. } => {}
            // Our own tells were tried here before they were published.
            Wire::Tell { from_shard, .. } if from_shard == self.shard => {}
            Wire::Tell {
                from_shard,
                id,
                heard,
                speaker_is_admin,
            } => {
                let hub = self.clone();
                tokio::spawn(async move {
                    hub.deliver_tell(from_shard, id, heard, speaker_is_admin)
                        .await
                });
            }
        }
    }

    /// A tell from another shard: given here if the listener plays here,
    /// and answered; not answered when they do not.
    async fn deliver_tell(
        &self,
        from_shard: String,
        id: u64,
        heard: Delivery,
        speaker_is_admin: bool,
    ) {
        let seen = (from_shard.clone(), id);
        let heard_now = if self.concealed_here(&heard.to) && !speaker_is_admin {
            Some(false)
        } else {
            match self.claim(&seen) {
                Claim::Delivered => Some(true),
                Claim::Busy => None,
                Claim::Mine => {
                    let given = self.give_here(&heard).await;
                    if given {
                        self.remember(seen.clone());
                    }
                    self.delivering
                        .lock()
                        .expect("comm delivering lock")
                        .remove(&seen);
                    // Not here: the shard that holds them answers.
                    given.then_some(true)
                }
            }
        };
        if let Some(heard) = heard_now {
            self.answer(from_shard, id, heard).await;
        }
    }

    /// Whether this copy of a tell is the one to give it (checked and
    /// marked in one step: copies are handled concurrently).
    fn claim(&self, seen: &(String, u64)) -> Claim {
        let delivered = self.delivered.lock().expect("comm delivered lock");
        let mut delivering = self.delivering.lock().expect("comm delivering lock");
        if delivered.contains(seen) {
            Claim::Delivered
        } else if !delivering.insert(seen.clone()) {
            Claim::Busy
        } else {
            Claim::Mine
        }
    }

    fn remember(&self, seen: (String, u64)) {
        let mut d = self.delivered.lock().expect("comm delivered lock");
        if d.len() >= DELIVERED_MEMORY {
            d.pop_front();
        }
        d.push_back(seen);
    }

    async fn answer(&self, to_shard: String, id: u64, heard: bool) {
        let wire = Wire::Answer {
            to_shard,
            id,
            heard,
        };
        if let Ok(json) = serde_json::to_string(&wire) {
            self.publish(&json).await;
        }
    }
}

/// Keep a subscription to the comm channel, made again after every loss.
async fn subscribe(hub: Arc<Hub>, target: RedisTarget, root: tokio_util::sync::CancellationToken) {
    let mut was_lost = false;
    loop {
        let e = tokio::select! {
            _ = root.cancelled() => return,
            e = follow(&hub, &target, was_lost) => e,
        };
        if std::mem::replace(&mut was_lost, true) {
            debug!(error = %e, "comm subscription still lost");
        } else {
            warn!(error = %e, "comm subscription lost: tell and chat reach only this shard until it is back");
        }
        tokio::select! {
            _ = root.cancelled() => return,
            _ = tokio::time::sleep(RESUBSCRIBE) => {}
        }
    }
}

/// Subscribe and handle every message until the subscription is lost;
/// returns why.
async fn follow(hub: &Arc<Hub>, target: &RedisTarget, was_lost: bool) -> redis::RedisError {
    let pubsub = match subscription::subscribe(target, &key_names::comm_channel()).await {
        Ok(pubsub) => pubsub,
        Err(e) => return e,
    };
    if was_lost {
        info!("comm subscription made again");
    }
    read_until_lost(pubsub, RESUBSCRIBE, |msg| {
        if let Ok(json) = msg.get_payload::<String>() {
            hub.on_message(json);
        }
    })
    .await
}
