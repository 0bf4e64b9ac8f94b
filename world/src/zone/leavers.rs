//! Final saves of players leaving a zone for good, off the zone actor's
//! loop: at most [`IN_FLIGHT`] running per zone, the rest queued in the
//! order they left, and the logins waiting for one of them. The actor
//! acts on each outcome (see the actor's `quits`).

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use telos_proto::v1::ServerFrame;
use telos_redis::store::Store;
use tokio::sync::mpsc::Sender;
use tokio::sync::oneshot;
use tokio::task::{Id, JoinSet};
use tracing::{error, warn};

use crate::model::PlayerBox;
use crate::zone::handle::JoinError;
use crate::zone::persist::{Saved, save_player};
use crate::zone::session::{Joining, SessionMeta};

/// Final saves of leavers in flight at once, per zone: enough to pipeline
/// a crowd's saves over the store's connection, few enough that a crowd
/// does not flood Redis or the zone's task budget.
pub(super) const IN_FLIGHT: usize = 16;

/// Why a player leaves the zone for good.
#[derive(Clone, Copy, Debug)]
pub(super) enum Leaving {
    Quit,
    LinkDead,
    Wedged,
}

/// A player out of play whose final save is pending.
pub(super) struct Leaver {
    pub(super) key: String,
    pub(super) why: Leaving,
    pub(super) character: PlayerBox,
    pub(super) meta: SessionMeta,
}

/// A leaver's save, done.
pub(super) struct Settled {
    pub(super) leaver: Leaver,
    pub(super) saved: Saved,
}

/// The answer a waiting login gets.
pub(super) type JoinReply = oneshot::Sender<Result<u64, JoinError>>;

/// A leaver whose save task panicked: its key and stream.
pub(super) type Panicked = (String, Sender<ServerFrame>);

/// A login waiting for a leaver's save.
pub(super) type Waiting = (Box<Joining>, JoinReply);

/// A zone's pending final saves.
#[derive(Default)]
pub(super) struct Quits {
    tasks: JoinSet<Settled>,
    /// Which leaver each task saves, and its stream (a task that panicked
    /// is named by it, and its stream told).
    running: HashMap<Id, (String, Sender<ServerFrame>)>,
    /// Leavers waiting for a free slot, in the order they left.
    queued: VecDeque<Leaver>,
    /// Every pending leaver (queued or saving), with the logins waiting
    /// for its save.
    pending: HashMap<String, Vec<Waiting>>,
}

impl Quits {
    /// Whether `key` has a final save pending here.
    pub(super) fn holds(&self, key: &str) -> bool {
        self.pending.contains_key(key)
    }

    /// Whether no leaver is pending.
    pub(super) fn idle(&self) -> bool {
        self.pending.is_empty()
    }

    /// Leavers pending (queued or saving).
    pub(super) fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether any save is running (its outcome still to come).
    pub(super) fn busy(&self) -> bool {
        !self.tasks.is_empty()
    }

    /// Save `leaver` now, or once a slot is free.
    pub(super) fn admit(&mut self, store: &Store, zone: &str, leaver: Leaver) {
        self.pending.insert(leaver.key.clone(), Vec::new());
        if self.tasks.len() < IN_FLIGHT {
            self.start(store, zone, leaver);
        } else {
            self.queued.push_back(leaver);
        }
    }

    /// A slot freed: start the next queued save.
    pub(super) fn start_queued(&mut self, store: &Store, zone: &str) {
        if self.tasks.len() < IN_FLIGHT
            && let Some(next) = self.queued.pop_front()
        {
            self.start(store, zone, next);
        }
    }

    /// Hold a login of `key` until its save settles; handed back when
    /// nothing is pending for it.
    pub(super) fn wait(&mut self, key: &str, login: Waiting) -> Result<(), Waiting> {
        match self.pending.get_mut(key) {
            Some(waiting) => {
                waiting.push(login);
                Ok(())
            }
            None => Err(login),
        }
    }

    /// `key`'s save settled: it is no longer pending; the logins that
    /// waited for it.
    pub(super) fn settled(&mut self, key: &str) -> Vec<Waiting> {
        self.pending.remove(key).unwrap_or_default()
    }

    /// The next save to finish; `Err` with the leaver (and stream) of a
    /// task that panicked (logged).
    pub(super) async fn next(&mut self) -> Result<Settled, Option<Panicked>> {
        match self.tasks.join_next_with_id().await {
            Some(Ok((id, settled))) => {
                self.running.remove(&id);
                Ok(settled)
            }
            Some(Err(e)) => {
                let panicked = self.running.remove(&e.id());
                let key = panicked.as_ref().map(|(key, _)| key);
                error!(player = ?key, error = %e, "a leaver's final save task failed");
                Err(panicked)
            }
            None => Err(None),
        }
    }

    fn start(&mut self, store: &Store, zone: &str, leaver: Leaver) {
        let (store, zone) = (store.clone(), zone.to_string());
        let named = (leaver.key.clone(), leaver.meta.stream.sender().clone());
        let task = self.tasks.spawn(async move {
            let mut leaver = leaver;
            let meta = &mut leaver.meta;
            // A session a handoff's `Commit` still holds is saved once the
            // `Commit` resolves (bounded), not before.
            let held = meta.needs_save() && !meta.writable();
            let saved = if held && !meta.settle().await {
                warn!(zone, player = %leaver.key, "Commit unresolved: not saving (the gate keeps the lines)");
                Saved::Held
            } else {
                final_save(&store, &zone, &mut leaver).await
            };
            if matches!(leaver.why, Leaving::Quit) && matches!(saved, Saved::Done) {
                revoke_resume(&store, &leaver.key, &leaver.meta.conn_id).await;
            }
            Settled { leaver, saved }
        });
        self.running.insert(task.id(), named);
    }
}

/// Tries of a leaver's final save that failed (a timeout, a dropped
/// connection, an error reply) before it settles as failed...
const FINAL_SAVE_TRIES: u32 = 3;

/// ...a try starting only this long after the first one *ended*, so that a
/// sick Redis holds a seal or a waiting login at most about three saves'
/// timeouts (a second try that fails fast leaves room for a third).
/// Counted from the first try's end, not its start: a try that timed out
/// took [`SAVE_TIMEOUT`](crate::zone::persist::SAVE_TIMEOUT), longer than
/// this window, and counted from its start it was never tried again — the
/// very case the retry is for (below).
const FINAL_SAVE_RETRY_WITHIN: Duration = Duration::from_millis(1500);

/// The pause before the second try (doubled for the third).
const FINAL_SAVE_BACKOFF: Duration = Duration::from_millis(200);

/// A leaver's final save, tried again when it failed.
/// A crowd's saves are in flight together: a process starved of CPU for a
/// moment reads their replies late, past the client's response timeout,
/// though Redis wrote them (the 2000-quitter test: 40 quits closed
/// not-final on the first try, their gates resuming to be told
/// `Goodbye.`; and again on a fresh CI machine, one quit whose first try
/// timed out and, the window counted from its start, was never retried).
/// A retry of a save that did land is refused at our own epoch and claim,
/// adopts the version it wrote (`LostReply`) and writes the same state
/// again: no line is applied twice, and a first try that lands late is
/// refused on its version.
async fn final_save(store: &Store, zone: &str, leaver: &mut Leaver) -> Saved {
    let mut until = None;
    let mut pause = FINAL_SAVE_BACKOFF;
    let mut tries = 1;
    loop {
        let saved = save_player(store, zone, &*leaver.character, &mut leaver.meta).await;
        let until =
            *until.get_or_insert_with(|| tokio::time::Instant::now() + FINAL_SAVE_RETRY_WITHIN);
        let late = tokio::time::Instant::now() + pause >= until;
        if !matches!(saved, Saved::Failed) || tries == FINAL_SAVE_TRIES || late {
            return saved;
        }
        tries += 1;
        tokio::time::sleep(pause).await;
        pause *= 2;
    }
}

/// A quit that saved ends the session for good: its resume credential is
/// forgotten, so nobody (a gate that missed the final `Closed`, or whoever
/// copied the credential) resumes it. Not on a not-final close, where the
/// gate must resume. A failed revoke leaves the credential to its TTL.
pub(super) async fn revoke_resume(store: &Store, key: &str, conn_id: &str) {
    if let Err(e) = store.revoke_credential(key, conn_id).await {
        warn!(player = %key, error = %e, "revoking the resume credential after quit failed; it lapses by its TTL");
    }
}
