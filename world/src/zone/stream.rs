//! A player's stream to the gate as the zone actor writes it: answers held
//! until the commit covering their lines is acknowledged (output commit),
//! others' chatter bounded per recipient ([`Hearing`]) and never taking the
//! stream's last quarter, and the stream's end (`Closed`, or the `Redirect`
//! that moves it) always delivered, waiting for room when it must. A gate
//! that stops reading its player's own answers fills the channel: the
//! stream is then "wedged" and the actor reclaims the player.

use telos_proto::v1::{Closed, ServerFrame, server_frame::Frame};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::zone::hearing::{Hearing, summary_line};

/// Bound of a player's out channel (frames towards the gate). A gate that
/// stops reading fills it; the player is then "wedged" and reclaimed rather
/// than letting the actor block or buffer without bound.
pub const OUT_CHANNEL: usize = 512;

/// The stream to one player's gate.
#[derive(Debug)]
pub struct GateStream {
    /// Frames to the gate.
    out: mpsc::Sender<ServerFrame>,
    /// The out channel was found full: the gate stopped reading.
    pub wedged: bool,
    /// Frames held until the zone's next commit is acknowledged (output
    /// commit): an answer leaves only once the line it answers is durable.
    held: Held,
    /// How much of others' chatter this player is shown (a crowd in one
    /// room never fills the stream).
    hearing: Hearing,
}

impl GateStream {
    pub fn new(out: mpsc::Sender<ServerFrame>) -> Self {
        Self {
            out,
            wedged: false,
            held: Held::default(),
            hearing: Hearing::default(),
        }
    }

    /// The channel's sender (a task that must reach the gate off the
    /// actor: a leaver's save that panicked).
    pub fn sender(&self) -> &mpsc::Sender<ServerFrame> {
        &self.out
    }

    /// Point the stream at another channel (a test's dead gate).
    #[cfg(test)]
    pub fn redirect_to(&mut self, out: mpsc::Sender<ServerFrame>) {
        self.out = out;
    }

    /// Nothing is held for the next commit.
    pub fn holds_nothing(&self) -> bool {
        self.held.is_empty()
    }

    /// Take over what `old` holds, after what this holds (a session
    /// replaced by a newer one of the same connection).
    pub fn take_held_from(&mut self, old: &mut GateStream) {
        self.held.take_from(&mut old.held);
    }
}

/// Frames towards the gate that wait for the zone's commit covering them
/// (see [`GateStream::send`]).
#[derive(Debug, Default)]
struct Held(Vec<ServerFrame>);

impl Held {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Take over what `other` holds (after what this holds).
    fn take_from(&mut self, other: &mut Held) {
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

impl GateStream {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn closed_final() -> Frame {
        Frame::Closed(Closed {
            reason: "Goodbye.".into(),
            r#final: true,
            ..Default::default()
        })
    }

    /// Issue 30: two thousand players acting at once in one room. Before,
    /// each one's line went into this player's stream until it was full,
    /// the player was reclaimed as wedged and the final `Closed` dropped.
    #[tokio::test]
    async fn a_loud_room_never_fills_the_stream_nor_drops_the_goodbye() {
        let (out, mut rx) = mpsc::channel(OUT_CHANNEL);
        let mut m = GateStream::new(out);
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
        let mut m = GateStream::new(out.clone());
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
        let mut m = GateStream::new(out);
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
        let mut m = GateStream::new(out);
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
