//! Words that leave a zone: a `tell` or a `chat` line a command produced
//! ([`crate::model::Action::Tell`], [`crate::model::Action::Broadcast`])
//! goes to the shard's comm task (`runtime::comm`), which carries it to
//! every shard. The actor never waits on it: a zone actor that awaited
//! another's answer could wait on one that waits on it.

use tokio::sync::mpsc;

use crate::model::{Broadcast, Tell};

/// Words queued for the comm task. 1024 in flight per shard: the chat limit
/// holds each player to a few lines a second, so a full queue means the
/// comm task is stuck (Redis unreachable), and the speaker is told at once.
pub const COMM_QUEUE: usize = 1024;

pub enum Outgoing {
    Tell(Box<Tell>),
    Broadcast(Box<Broadcast>),
}

/// Where a zone actor sends what leaves it.
#[derive(Clone)]
pub struct Comm {
    tx: Option<mpsc::Sender<Outgoing>>,
}

impl Comm {
    /// The handle and the comm task's end.
    pub fn new() -> (Comm, mpsc::Receiver<Outgoing>) {
        let (tx, rx) = mpsc::channel(COMM_QUEUE);
        (Comm { tx: Some(tx) }, rx)
    }

    /// No comm task (tests of other things): everything is refused.
    pub fn none() -> Comm {
        Comm { tx: None }
    }

    /// Queue `words`; back when they cannot go (queue full, no task).
    pub fn send(&self, words: Outgoing) -> Result<(), Outgoing> {
        match &self.tx {
            None => Err(words),
            Some(tx) => tx.try_send(words).map_err(|e| match e {
                mpsc::error::TrySendError::Full(w) | mpsc::error::TrySendError::Closed(w) => w,
            }),
        }
    }
}
