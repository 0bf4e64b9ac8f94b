//! The markers one connection has sent and not yet seen answered, in the
//! order it sent them, and the lines one command's wait read for the next.
//!
//! A bot that stops reading keeps typing: it sends several commands, each
//! with its marker, and matches their answers in order once it reads again
//! ([`super::client::Conn::complete`]). The world answers in input order,
//! so a marker answered before the awaited one is either an *older*
//! marker's (a replay after an outage repeats it) or a *later* one's: then
//! every line up to it was applied, and the awaited marker's answer was
//! lost with a link the gate gave up (the contract answers it with the
//! room the resume shows). Before, a later marker read as an older one:
//! the first command's wait read on through every later command's output
//! to the marker it had sent after the resume notice, the later commands
//! waited out their 60 s for answers already read, and one lost answer in
//! a stall made seven violations (partition seed 3030, a slow reader
//! behind a `slow` gate link cut off for it).
//!
//! A marker sent after a resume notice ends the wait of the last command
//! sent before it; for a command with others sent after it and before the
//! marker, it is a later one's (their answers were all lost too, and each
//! is answered by the resume's room view in turn). Marker words cycle, so
//! a marker is told by where it stands in the queue, not by its word
//! alone: the awaited one is the oldest command's, and everything before a
//! marker answered is forgotten (input order proves it answered or lost).

use std::collections::VecDeque;

use super::clock::Ms;

/// What a marker's answer is to the command waiting for `own`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerIs {
    /// Its own marker, or one sent after a resume notice with no other
    /// command between.
    Ours,
    /// One sent after it (a later command's, or a resume marker with
    /// other commands between): its own marker's answer was lost.
    Later,
    /// An older marker's (a replay), or one nobody waits for any more.
    Older,
}

/// One marker sent and not yet answered.
#[derive(Debug, Clone, Copy)]
struct Sent {
    word: &'static str,
    /// Sent after a resume notice, rather than behind a command.
    resumed: bool,
}

/// See the module.
#[derive(Debug, Default)]
pub struct Outstanding {
    sent: VecDeque<Sent>,
    /// Lines read for a later command, with when each was read.
    handed_on: VecDeque<(Ms, String)>,
}

impl Outstanding {
    /// A command's marker went out.
    pub fn command(&mut self, word: &'static str) {
        self.sent.push_back(Sent {
            word,
            resumed: false,
        });
    }

    /// A marker went out after a resume notice.
    pub fn resumed(&mut self, word: &'static str) {
        self.sent.push_back(Sent {
            word,
            resumed: true,
        });
    }

    /// Where the awaited command's marker stands: the oldest command's
    /// (commands complete in the order they were sent).
    fn mine(&self, own: &str) -> Option<usize> {
        self.sent.iter().position(|s| !s.resumed && s.word == own)
    }

    /// What `word`'s answer is to the command waiting for `own`. A marker
    /// that ends the wait is forgotten with everything before it; an older
    /// one is forgotten.
    pub fn judge(&mut self, own: &'static str, word: &str) -> MarkerIs {
        let Some(mine) = self.mine(own) else {
            return MarkerIs::Older;
        };
        let at_or_after = self
            .sent
            .iter()
            .skip(mine)
            .position(|s| s.word == word)
            .map(|i| i + mine);
        let Some(theirs) = at_or_after else {
            // Before ours, or not outstanding: a replay.
            if let Some(before) = self.sent.iter().take(mine).position(|s| s.word == word) {
                self.sent.remove(before);
            }
            return MarkerIs::Older;
        };
        let commands_between = || self.sent.range(mine + 1..theirs).any(|s| !s.resumed);
        if theirs == mine || (self.sent[theirs].resumed && !commands_between()) {
            self.sent.drain(..=theirs);
            return MarkerIs::Ours;
        }
        MarkerIs::Later
    }

    /// The command waiting for `own` is done without its marker (its
    /// answer was lost, a later one's came): it waits for nothing more,
    /// and nothing sent before it is awaited.
    pub fn done(&mut self, own: &str) {
        if let Some(mine) = self.mine(own) {
            self.sent.drain(..=mine);
        }
    }

    /// Lines the next wait reads first (they came for a later command).
    pub fn hand_on(&mut self, lines: impl IntoIterator<Item = (Ms, String)>) {
        self.handed_on.extend(lines);
    }

    /// The next line handed on by an earlier wait, if any.
    pub fn next_handed_on(&mut self) -> Option<(Ms, String)> {
        self.handed_on.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_ends_on_its_own_marker_or_one_sent_after_a_resume_never_an_older_one() {
        let mut o = Outstanding::default();
        o.command("where");
        o.done("where");
        o.command("look");
        assert_eq!(o.judge("look", "where"), MarkerIs::Older, "a replay");
        assert_eq!(o.judge("look", "look"), MarkerIs::Ours);
        o.command("north");
        o.resumed("who");
        assert_eq!(o.judge("north", "who"), MarkerIs::Ours);
        assert_eq!(o.judge("south", "north"), MarkerIs::Older, "nobody waits");
    }

    #[test]
    fn a_later_commands_marker_says_the_awaited_answer_was_lost() {
        let mut o = Outstanding::default();
        for word in ["ge", "g", "drop"] {
            o.command(word);
        }
        o.resumed("dr");
        assert_eq!(o.judge("ge", "g"), MarkerIs::Later);
        o.done("ge");
        assert_eq!(o.judge("g", "g"), MarkerIs::Ours);
        assert_eq!(o.judge("drop", "drop"), MarkerIs::Ours);
        // The marker sent after the resume notice is answered last: nobody
        // sent before it waits any more, and a command sent after it takes
        // it for an older one's.
        o.command("alias");
        assert_eq!(o.judge("alias", "dr"), MarkerIs::Older);
        assert_eq!(o.judge("alias", "alias"), MarkerIs::Ours);
    }

    /// Every typed-ahead command applied before the cut, every answer lost,
    /// nothing replayed: only the marker sent after the notice is answered.
    /// It is a later one's to each command but the last, whose wait it ends.
    #[test]
    fn a_resume_marker_ends_only_the_last_wait_before_it() {
        let mut o = Outstanding::default();
        for word in ["a", "b", "c"] {
            o.command(word);
        }
        o.resumed("r");
        assert_eq!(o.judge("a", "r"), MarkerIs::Later);
        o.done("a");
        assert_eq!(o.judge("b", "r"), MarkerIs::Later);
        o.done("b");
        assert_eq!(o.judge("c", "r"), MarkerIs::Ours);
        assert!(o.sent.is_empty());
    }

    /// Marker words come round again: a stale entry (a resume marker whose
    /// answer was lost in a second cut) never makes a replay look later.
    #[test]
    fn a_word_come_round_again_is_told_by_its_place() {
        let mut o = Outstanding::default();
        o.command("x");
        o.resumed("look");
        o.done("x");
        o.command("look");
        // The stale resume marker is before ours: its word is ours.
        assert_eq!(o.judge("look", "look"), MarkerIs::Ours);
        assert!(o.sent.is_empty());
    }

    #[test]
    fn lines_handed_on_are_read_first_in_order() {
        let mut o = Outstanding::default();
        o.hand_on([(1, "a".to_string()), (2, "b".to_string())]);
        assert_eq!(o.next_handed_on(), Some((1, "a".into())));
        assert_eq!(o.next_handed_on(), Some((2, "b".into())));
        assert_eq!(o.next_handed_on(), None);
    }
}
