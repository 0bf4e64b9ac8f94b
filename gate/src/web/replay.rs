//! What a web session keeps to resume a page that dropped, pure: the
//! output the page may not have seen (numbered, bounded in bytes) and the
//! number of the last input line taken, so a line the page sends again is
//! applied once.
//!
//! Every message to the page but the resume protocol's own (`Telos.Session`,
//! `Telos.Ack`) is numbered from 0 in order; the page counts what it
//! received and says so (`Telos.Seen`, and on resume). The page numbers
//! its input lines from 1 (`Telos.Input`); the gate acks each and takes a
//! number at most once.

use std::collections::VecDeque;

use super::frames::Msg;

/// Output kept for replay, and the input numbering.
#[derive(Debug)]
pub struct Replay {
    kept: VecDeque<Msg>,
    /// The number of `kept[0]`.
    first: u64,
    bytes: usize,
    cap: usize,
    /// The number the next message gets: how many there have been.
    next: u64,
    /// The last numbered input line taken.
    input: u64,
}

/// Whether an input line is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    New,
    /// Taken before: the page resent a line whose ack it missed.
    Duplicate,
}

/// The page has missed output that is no longer kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Missed(pub u64);

impl Replay {
    /// `cap`: bytes of output kept at most.
    pub fn new(cap: usize) -> Self {
        Self {
            kept: VecDeque::new(),
            first: 0,
            bytes: 0,
            cap,
            next: 0,
            input: 0,
        }
    }

    /// Number and keep a message, forgetting the oldest beyond the bound
    /// (one longer than the bound is not kept at all).
    pub fn push(&mut self, msg: Msg) {
        self.bytes += msg.len();
        self.kept.push_back(msg);
        self.next += 1;
        while self.bytes > self.cap {
            let Some(old) = self.kept.pop_front() else {
                break;
            };
            self.bytes -= old.len();
            self.first += 1;
        }
    }

    /// The page has the first `count` messages: they need not be kept.
    pub fn seen(&mut self, count: u64) {
        let count = count.min(self.next);
        while self.first < count {
            let Some(old) = self.kept.pop_front() else {
                break;
            };
            self.bytes -= old.len();
            self.first += 1;
        }
        if self.kept.is_empty() && self.kept.capacity() > 64 {
            self.kept.shrink_to(64);
        }
    }

    /// The messages after the first `seen` (what a page that has `seen`
    /// messages lacks), or how many it missed beyond the bound. A page
    /// claiming more than there were has everything.
    pub fn since(&self, seen: u64) -> Result<impl Iterator<Item = &Msg>, Missed> {
        let seen = seen.min(self.next);
        if seen < self.first {
            return Err(Missed(self.first - seen));
        }
        Ok(self.kept.iter().skip((seen - self.first) as usize))
    }

    /// How many messages there have been.
    pub fn next(&self) -> u64 {
        self.next
    }

    /// Bytes kept.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Input line `n` from the page: new, or one taken before.
    pub fn take_input(&mut self, n: u64) -> Input {
        if n <= self.input {
            return Input::Duplicate;
        }
        self.input = n;
        Input::New
    }

    /// The last numbered input line taken.
    pub fn input(&self) -> u64 {
        self.input
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Msg {
        Msg::Binary(s.as_bytes().to_vec())
    }

    #[test]
    fn a_resent_line_is_taken_once_and_in_order() {
        let mut r = Replay::new(1024);
        assert_eq!(r.take_input(1), Input::New);
        assert_eq!(r.take_input(2), Input::New);
        // The page lost the acks of 1 and 2 and resends them with 3.
        assert_eq!(r.take_input(1), Input::Duplicate);
        assert_eq!(r.take_input(2), Input::Duplicate);
        assert_eq!(r.take_input(3), Input::New);
        assert_eq!(r.take_input(3), Input::Duplicate);
        assert_eq!(r.input(), 3);
    }

    #[test]
    fn replay_gives_what_the_page_lacks_within_the_bound() {
        let mut r = Replay::new(10);
        r.push(text("aaaa"));
        r.push(text("bbbb"));
        let all: Vec<&Msg> = r.since(0).unwrap().collect();
        assert_eq!(all, [&text("aaaa"), &text("bbbb")]);
        let last: Vec<&Msg> = r.since(1).unwrap().collect();
        assert_eq!(last, [&text("bbbb")]);
        assert_eq!(r.since(2).unwrap().count(), 0);
        // A page claiming more than there was has everything.
        assert_eq!(r.since(99).unwrap().count(), 0);
        // Over the bound the oldest goes: a page that had none missed one.
        r.push(text("cccc"));
        assert_eq!(r.bytes(), 8);
        assert_eq!(r.since(0).err(), Some(Missed(1)));
        assert_eq!(r.since(1).unwrap().count(), 2);
        // One message longer than the bound is not kept.
        r.push(text(&"x".repeat(11)));
        assert_eq!(r.bytes(), 0);
        assert_eq!(r.since(3).err(), Some(Missed(1)));
        assert_eq!(r.since(4).unwrap().count(), 0);
        assert_eq!(r.next(), 4);
    }

    #[test]
    fn seen_output_is_forgotten() {
        let mut r = Replay::new(1024);
        for i in 0..10 {
            r.push(text(&format!("line {i}")));
        }
        r.seen(7);
        assert_eq!(r.bytes(), 3 * 6);
        assert_eq!(r.since(6).err(), Some(Missed(1)));
        let rest: Vec<&Msg> = r.since(7).unwrap().collect();
        assert_eq!(rest, [&text("line 7"), &text("line 8"), &text("line 9")]);
        // A count past the end forgets everything and nothing more.
        r.seen(1000);
        assert_eq!(r.bytes(), 0);
        r.push(text("next"));
        assert_eq!(r.since(10).unwrap().count(), 1);
    }
}
