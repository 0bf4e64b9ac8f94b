//! Per-player session state held by the zone actor next to the character.

use telos_proto::v1::{Closed, ServerFrame, server_frame::Frame};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::handoff::fence::{CommitFence, SETTLE_BOUND, WriteAs};
use crate::model::PlayerBox;
use crate::model::chat::ChatBucket;
use crate::zone::hearing::{Hearing, summary_line};
use telos_redis::store::ClaimId;

/// Bound of a player's out channel (frames towards the gate). A gate that
/// stops reading fills it; the player is then "wedged" and reclaimed rather
/// than letting the actor block or buffer without bound.
pub const OUT_CHANNEL: usize = 512;

/// Session bookkeeping that travels with a player between zone actors.
#[derive(Debug)]
pub struct SessionMeta {
    /// Gate connection id; `seq` numbers are per connection.
    pub conn_id: String,
    /// The ownership epoch this session writes the durable row under.
    pub epoch: u64,
    /// The claim that minted `epoch` (the row's `owner_claim`): tells this
    /// session's epoch from the same number minted again by someone else
    /// after Redis lost writes.
    pub claim: ClaimId,
    /// The claim id of this session's last departure that ended with the
    /// player staying. An attempt may have minted under it with its reply
    /// lost: an epoch the row holds under this id is this session's own
    /// (adopted at the next save), and the next departure reuses the id so
    /// its claim is answered with that epoch instead of being refused.
    pub departure_claim: Option<ClaimId>,
    /// The durable row's `state_version` (CAS base of the next save).
    pub state_version: u64,
    /// Highest input seq applied: a line with `seq <= applied_seq` is dropped.
    pub applied_seq: u64,
    /// `applied_seq` covered by the last successful save (last `DurableAck`).
    pub saved_seq: u64,
    /// Durable state changed since the last save.
    pub dirty: bool,
    /// The player quit (or hung up): the session's last line is applied
    /// and its save records that this connection's session ended there
    /// (the row's `quit_seq`), so a resume after a lost save reply is
    /// answered `Goodbye.` instead of played on.
    pub quit: bool,
    /// Frames to the gate.
    pub out: mpsc::Sender<ServerFrame>,
    /// The out channel was found full: the gate stopped reading.
    pub wedged: bool,
    /// The durable row this character saves to (rides the handoff snapshot).
    pub persist_id: String,
    /// What the player may still say to others (the chat limit; it starts
    /// full on each shard).
    pub chat: ChatBucket,
    /// Handed off here and its `Commit` is still in flight: the session
    /// plays but must not write until it resolves (see
    /// [`fence`](crate::handoff::fence)).
    pub commit: Option<CommitFence>,
    /// Frames held until the zone's next commit is acknowledged (output
    /// commit): an answer leaves only once the line it answers is durable.
    pub held: Held,
    /// How much of others' chatter this player is shown (a crowd in one
    /// room never fills the stream).
    pub hearing: Hearing,
}

/// Frames towards the gate that wait for the zone's commit covering them
/// (see [`SessionMeta::send`]).
#[derive(Debug, Default)]
pub struct Held(Vec<ServerFrame>);

impl Held {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Take over what `other` holds (after what this holds).
    pub fn take_from(&mut self, other: &mut Held) {
        self.0.append(&mut other.0);
    }
}

/// Slots of a player's out channel chatter never takes: the player's own
/// answers and the end of the session always find room, however loud the
/// room is.
pub const OUT_RESERVE: usize = OUT_CHANNEL / 4;

/// Chatter a player was not shown (over their allowance, or their stream
/// was as full as chatter may make it).
pub const CHATTER_SKIPPED_TOTAL: &str = "telos_chatter_skipped_total";

/// Whether `frame` is chatter, and if so whether it is a line of text
/// (`Some(true)`) or a structured event (`Some(false)`).
fn chatter(frame: &Frame) -> Option<bool> {
    match frame {
        Frame::Output(o) if o.chatter => Some(true),
        Frame::Event(e) if e.chatter => Some(false),
        _ => None,
    }
}

/// The end of a stream whose channel is full (a `Closed`, or the
/// `Redirect` that moves it): it waits for room off the actor, bounded, so
/// a session's `Goodbye.` (or its "reconnect", or where it went) is never
/// dropped because the stream was full.
fn deliver_end(out: mpsc::Sender<ServerFrame>, frame: ServerFrame) {
    /// A gate that reads nothing this long is gone; its connection's end
    /// tells the player instead.
    const END_WAIT: std::time::Duration = std::time::Duration::from_secs(30);
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        rt.spawn(async move {
            let _ = tokio::time::timeout(END_WAIT, out.send(frame)).await;
        });
    }
}

/// Frames a session holds at most before chatter (what others in the room
/// did or said) is dropped rather than held: its own answers are bounded
/// already (one line in flight per player), the room's are not while a
/// commit does not land.
pub const HELD_CHATTER_LIMIT: usize = OUT_CHANNEL / 2;

impl SessionMeta {
    /// A frame for the gate, held until the zone's next commit is
    /// acknowledged ([`release`](Self::release)), in order. `Attached`
    /// starts a stream and goes at once; the end of the stream here is not
    /// held: a `Redirect` or a final `Closed` releases
    /// what is held first (the zone committed before the player left), a
    /// not-final `Closed` drops it — those lines were never committed, the
    /// gate replays them where the player plays next, and nobody saw their
    /// answers.
    pub fn send(&mut self, frame: Frame) {
        match &frame {
            // Where the stream starts: its replay point, never an answer.
            Frame::Attached(_) => {}
            Frame::Redirect(_) | Frame::Closed(Closed { r#final: true, .. }) => self.release(),
            Frame::Closed(_) => self.drop_uncommitted(),
            _ => {
                if chatter(&frame).is_some_and(|text| !self.admit_chatter(text)) {
                    return;
                }
                return self.held.0.push(ServerFrame { frame: Some(frame) });
            }
        }
        self.push(ServerFrame { frame: Some(frame) });
    }

    /// May one more frame of chatter (a line if `text`) be held for this
    /// player: within what they are shown of the room, and within what is
    /// held while a commit does not land.
    fn admit_chatter(&mut self, text: bool) -> bool {
        if self.held.0.len() >= HELD_CHATTER_LIMIT {
            metrics::counter!("telos_held_chatter_dropped_total").increment(1);
            return false;
        }
        if !self.hearing.admit(Instant::now(), text) {
            metrics::counter!(CHATTER_SKIPPED_TOTAL).increment(1);
            return false;
        }
        true
    }

    /// Tell the player how much of a loud room they were not shown, once
    /// there is room to (the zone's tick asks).
    pub fn summarise_skipped(&mut self) {
        if let Some(skipped) = self.hearing.summary(Instant::now()) {
            // Not chatter itself: a gate must not drop the one line that
            // says what was dropped.
            let line = crate::zone::events::output(&summary_line(skipped), false);
            self.held.0.push(ServerFrame {
                frame: Some(Frame::Output(line)),
            });
        }
    }

    /// Forget the held frames: their lines were never committed, and the
    /// gate replays them where the player plays next.
    pub fn drop_uncommitted(&mut self) {
        self.held.0.clear();
    }

    /// Send every held frame: the commit covering them is acknowledged.
    pub fn release(&mut self) {
        for frame in std::mem::take(&mut self.held.0) {
            self.push(frame);
        }
    }

    /// Queue a frame without ever blocking the actor. Chatter takes only
    /// what leaves [`OUT_RESERVE`] free and is otherwise left out (and
    /// summarised); anything else finding the channel full marks the
    /// session wedged and is dropped (the actor reclaims the player) —
    /// except the end of the stream, which is always delivered (see
    /// [`deliver_end`]).
    fn push(&mut self, frame: ServerFrame) {
        if let Some(text) = frame.frame.as_ref().and_then(chatter)
            && self.out.capacity() <= OUT_RESERVE
        {
            self.hearing.left_out(text);
            return metrics::counter!(CHATTER_SKIPPED_TOTAL).increment(1);
        }
        match self.out.try_send(frame) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(frame)) => {
                if matches!(frame.frame, Some(Frame::Closed(_) | Frame::Redirect(_))) {
                    deliver_end(self.out.clone(), frame);
                }
                self.wedged = true;
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }

    /// Text for the player: an answer to their own command, or the world
    /// speaking to them.
    pub fn output(&mut self, text: String) {
        if !text.is_empty() {
            self.send(Frame::Output(crate::zone::events::output(&text, false)));
        }
    }

    /// Words another player wrote to this one (a `tell`): never dropped as
    /// chatter is, but wrapped as chatter is (`Output.others_words`).
    pub fn others_words(&mut self, text: String) {
        if !text.is_empty() {
            let mut o = crate::zone::events::output(&text, false);
            o.others_words = true;
            self.send(Frame::Output(o));
        }
    }

    /// What others in the room did or said (see `Output.chatter`).
    pub fn chatter(&mut self, text: String) {
        if !text.is_empty() {
            self.send(Frame::Output(crate::zone::events::output(&text, true)));
        }
    }

    /// A structured event, for a client that takes them (the gate
    /// decides; the world always sends).
    pub fn event(&mut self, event: crate::model::Event) {
        self.send(Frame::Event(crate::zone::events::to_wire(event)));
    }

    /// An event another player caused ([`Self::chatter`]'s kind).
    pub fn chatter_event(&mut self, event: crate::model::Event) {
        let mut wire = crate::zone::events::to_wire(event);
        wire.chatter = true;
        self.send(Frame::Event(wire));
    }

    /// Lines applied but not yet covered by a save.
    pub fn unsaved_lines(&self) -> u64 {
        self.applied_seq.saturating_sub(self.saved_seq)
    }

    pub fn needs_save(&self) -> bool {
        self.dirty || self.unsaved_lines() > 0
    }

    /// May this session write the durable row now? Settles a resolved
    /// commit fence into the epoch and version first; `false` while the
    /// `Commit` is still in flight.
    pub fn writable(&mut self) -> bool {
        let Some(fence) = &self.commit else {
            return true;
        };
        match fence.outcome() {
            None => false,
            Some(outcome) => {
                // Superseded too: the next save is refused by the newer
                // owner's epoch and the session is closed as stale.
                let w = outcome.settle(WriteAs {
                    epoch: self.epoch,
                    claim: self.claim,
                    state_version: self.state_version,
                });
                (self.epoch, self.claim, self.state_version) = (w.epoch, w.claim, w.state_version);
                self.commit = None;
                true
            }
        }
    }

    /// For a save that must not be skipped: wait (bounded) for an in-flight
    /// `Commit`, then settle it. `false`: still unresolved.
    pub async fn settle(&mut self) -> bool {
        self.settle_by(Instant::now() + SETTLE_BOUND).await
    }

    /// [`settle`](Self::settle) with a deadline shared by several sessions
    /// (a zone stopping saves everyone within one bound, not one each).
    pub async fn settle_by(&mut self, deadline: Instant) -> bool {
        if let Some(fence) = &mut self.commit {
            fence
                .wait(deadline.saturating_duration_since(Instant::now()))
                .await;
        }
        self.writable()
    }
}

/// A player entering a zone from a login, resume or takeover.
pub struct Joining {
    pub character: PlayerBox,
    pub meta: SessionMeta,
    /// The `Attached` frame to send first (its `ack_input_seq` is filled in
    /// by the actor, so it always precedes the room description).
    pub attached: telos_proto::v1::Attached,
    /// How the player comes in: what the room and the player are shown.
    pub arrival: crate::model::Arrival,
}

/// A player moving between two zone actors of this shard.
pub struct SiblingMove {
    pub character: PlayerBox,
    pub meta: SessionMeta,
    /// Direction they walked, for the arrival message.
    pub dir: Option<crate::model::Direction>,
    /// Room to return to if the destination refuses.
    pub from_room: String,
    /// When the walk is refused if it has not landed (see
    /// [`WALK_RETRY_WINDOW`](super::WALK_RETRY_WINDOW)).
    pub until: Instant,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handoff::fence::CommitOutcome;
    use crate::handoff::fence::commit_fence;

    fn meta(epoch: u64, state_version: u64) -> SessionMeta {
        meta_on(mpsc::channel(1).0, epoch, state_version)
    }

    fn meta_on(out: mpsc::Sender<ServerFrame>, epoch: u64, state_version: u64) -> SessionMeta {
        SessionMeta {
            conn_id: "c".into(),
            epoch,
            claim: ClaimId::from_u64(epoch),
            departure_claim: None,
            state_version,
            applied_seq: 5,
            saved_seq: 0,
            dirty: true,
            quit: false,
            out,
            wedged: false,
            hearing: Default::default(),
            persist_id: "p".into(),
            chat: ChatBucket::default(),
            commit: None,
            held: Held::default(),
        }
    }

    #[test]
    fn a_session_without_a_fence_is_writable() {
        assert!(meta(3, 1).writable());
    }

    #[test]
    fn held_until_committed_then_writes_under_the_snapshot_epoch() {
        let (resolver, fence) = commit_fence();
        let mut m = meta(7, 2);
        m.commit = Some(fence);
        assert!(!m.writable());
        assert!(!m.writable(), "still held on a second look");
        resolver.resolve(CommitOutcome::Committed);
        assert!(m.writable());
        assert_eq!((m.epoch, m.state_version), (7, 2));
        assert!(m.commit.is_none());
    }

    #[test]
    fn reclaimed_moves_to_the_newer_epoch_and_the_rows_version() {
        let (resolver, fence) = commit_fence();
        let mut m = meta(7, 2);
        m.commit = Some(fence);
        resolver.resolve(CommitOutcome::Reclaimed {
            epoch: 9,
            claim: ClaimId::from_u64(99),
            state_version: 3,
        });
        assert!(m.writable());
        assert_eq!((m.epoch, m.state_version), (9, 3));
        assert_eq!(m.claim, ClaimId::from_u64(99), "the claim that minted it");
    }

    #[test]
    fn reclaimed_never_lowers_an_epoch_minted_meanwhile() {
        let (resolver, fence) = commit_fence();
        let mut m = meta(7, 2);
        m.commit = Some(fence);
        m.epoch = 11; // a refused handoff from here minted 11
        resolver.resolve(CommitOutcome::Reclaimed {
            epoch: 9,
            claim: ClaimId::from_u64(99),
            state_version: 3,
        });
        assert!(m.writable());
        assert_eq!((m.epoch, m.state_version), (11, 3));
    }

    #[test]
    fn superseded_keeps_the_handoffs_epoch_so_the_next_save_is_refused() {
        let (resolver, fence) = commit_fence();
        let mut m = meta(7, 2);
        m.commit = Some(fence);
        resolver.resolve(CommitOutcome::Superseded { winner: 8 });
        assert!(m.writable());
        assert_eq!((m.epoch, m.state_version), (7, 2));
    }

    #[tokio::test]
    async fn settle_waits_for_the_outcome() {
        let (resolver, fence) = commit_fence();
        let mut m = meta(7, 2);
        m.commit = Some(fence);
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            resolver.resolve(CommitOutcome::Committed);
        });
        assert!(m.settle().await);
        assert!(m.commit.is_none());
    }

    fn closed_final() -> Frame {
        Frame::Closed(Closed {
            reason: "Goodbye.".into(),
            r#final: true,
        })
    }

    /// Issue 30: two thousand players acting at once in one room. Before,
    /// each one's line went into this player's stream until it was full,
    /// the player was reclaimed as wedged and the final `Closed` dropped.
    #[tokio::test]
    async fn a_loud_room_never_fills_the_stream_nor_drops_the_goodbye() {
        let (out, mut rx) = mpsc::channel(OUT_CHANNEL);
        let mut m = meta_on(out, 1, 1);
        for i in 0..2000 {
            m.chatter(format!("Crowd{i} vanishes.\n"));
            if i % 100 == 0 {
                m.release(); // the zone's commits land as it goes
            }
        }
        m.output("You are in the square.\n".into());
        m.release();
        m.send(closed_final());
        assert!(!m.wedged, "reclaimed because the room was loud");
        let mut frames = Vec::new();
        while let Ok(f) = rx.try_recv() {
            frames.push(f.frame.expect("a frame"));
        }
        let chatter = frames.iter().filter(|f| chatter(f).is_some()).count();
        assert!(
            chatter <= crate::zone::hearing::BURST as usize,
            "{chatter} lines of chatter"
        );
        assert!(
            matches!(&frames[frames.len() - 2], Frame::Output(o) if !o.chatter),
            "the player's own answer"
        );
        assert!(matches!(frames.last(), Some(Frame::Closed(c)) if c.r#final));
    }

    /// Chatter never takes the slots kept for the player's own answers:
    /// with a gate that reads nothing, chatter stops at the reserve and the
    /// own answer and the goodbye still fit.
    #[tokio::test]
    async fn chatter_leaves_the_reserve_free() {
        let (out, mut rx) = mpsc::channel(OUT_CHANNEL);
        let mut m = meta_on(out.clone(), 1, 1);
        for _ in 0..OUT_CHANNEL {
            m.hearing = Default::default(); // a fresh allowance each time
            m.chatter("Someone waves.\n".into());
            m.release();
        }
        assert_eq!(out.capacity(), OUT_RESERVE);
        m.output("Ok.\n".into());
        m.release();
        m.send(closed_final());
        assert!(!m.wedged);
        let mut last = None;
        while let Ok(f) = rx.try_recv() {
            last = f.frame;
        }
        assert!(matches!(last, Some(Frame::Closed(_))));
    }

    /// A stream already full (a gate that stopped reading): the session is
    /// wedged, but its end waits for room instead of being dropped.
    #[tokio::test]
    async fn the_end_of_a_full_stream_waits_for_room() {
        let (out, mut rx) = mpsc::channel(1);
        let mut m = meta_on(out, 1, 1);
        m.output("first\n".into());
        m.release();
        m.send(closed_final());
        assert!(m.wedged);
        assert!(matches!(
            rx.recv().await.and_then(|f| f.frame),
            Some(Frame::Output(_))
        ));
        let end = tokio::time::timeout(std::time::Duration::from_secs(5), rx.recv()).await;
        assert!(matches!(
            end,
            Ok(Some(ServerFrame {
                frame: Some(Frame::Closed(_))
            }))
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn what_a_player_was_not_shown_is_summarised_once_there_is_room() {
        let (out, mut rx) = mpsc::channel(OUT_CHANNEL);
        let mut m = meta_on(out, 1, 1);
        for _ in 0..300 {
            m.chatter("Someone waves.\n".into());
        }
        m.summarise_skipped();
        tokio::time::advance(std::time::Duration::from_secs(1)).await;
        m.summarise_skipped();
        m.release();
        let mut texts = Vec::new();
        while let Ok(f) = rx.try_recv() {
            if let Some(Frame::Output(o)) = f.frame {
                texts.push(o.text);
            }
        }
        let skipped = 300 - crate::zone::hearing::BURST as u64;
        assert_eq!(texts.len(), crate::zone::hearing::BURST as usize + 1);
        assert_eq!(texts.last(), Some(&summary_line(skipped)));
    }
}
