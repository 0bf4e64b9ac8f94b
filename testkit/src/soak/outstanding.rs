//! The markers one connection has sent and not yet seen answered, in the
//! order it sent them, and the lines one command's wait read for the next.
//!
//! A bot that stops reading keeps typing: it sends several commands, each
//! with its marker, and matches their answers in order once it reads again
//! ([`super::client::Conn::complete`]). The world answers in input order,
//! so a marker answered before the awaited one is either an *older*
//! marker's (a replay after an outage repeats it) or a *later* command's:
//! then every line up to the awaited marker was applied, and the awaited
//! marker's answer was lost with a link the gate gave up (the contract
//! answers it with the room the resume shows). Before, a later marker read
//! as an older one: the first command's wait read on through every later
//! command's output to the marker it sent after the resume notice, the
//! later commands waited out their 60 s for answers already read, and one
//! lost answer in a stall made seven violations (partition seed 3030, a
//! slow reader behind a `slow` gate link cut off for it).
//!
//! A marker sent after a resume notice ends the wait of any command sent
//! before it; one sent before a command's own is an older one's for it.

use std::collections::VecDeque;

use super::clock::Ms;

/// What a marker's answer is to the command waiting for `own`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerIs {
    /// Its own marker, or one sent after a resume notice since it was sent.
    Ours,
    /// A command's sent after it: its own marker's answer was lost.
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

    /// What `word`'s answer is to the command waiting for `own`; a marker
    /// that ends the wait, or that nobody waits for any more, is forgotten.
    pub fn judge(&mut self, own: &'static str, word: &str) -> MarkerIs {
        let position = |w: &str| self.sent.iter().position(|s| s.word == w);
        let (Some(mine), Some(theirs)) = (position(own), position(word)) else {
            // Not outstanding: a replay of one answered long ago.
            return MarkerIs::Older;
        };
        if theirs == mine || (theirs > mine && self.sent[theirs].resumed) {
            self.sent.remove(theirs);
            if theirs != mine {
                self.sent.remove(mine);
            }
            return MarkerIs::Ours;
        }
        if theirs > mine {
            return MarkerIs::Later;
        }
        self.sent.remove(theirs);
        MarkerIs::Older
    }

    /// The command waiting for `own` is done without its marker (its
    /// answer was lost, a later one's came): it waits for nothing more.
    pub fn done(&mut self, own: &str) {
        self.sent.retain(|s| s.word != own);
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

    #[test]
    fn lines_handed_on_are_read_first_in_order() {
        let mut o = Outstanding::default();
        o.hand_on([(1, "a".to_string()), (2, "b".to_string())]);
        assert_eq!(o.next_handed_on(), Some((1, "a".into())));
        assert_eq!(o.next_handed_on(), Some((2, "b".into())));
        assert_eq!(o.next_handed_on(), None);
    }
}
