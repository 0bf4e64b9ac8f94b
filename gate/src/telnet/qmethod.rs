//! RFC 1143's "Q method": the state of one side of every telnet option,
//! with the queue bit, so that two negotiators never loop and a change
//! asked for while the previous one is still unanswered waits for that
//! answer instead of crossing it on the wire.
//!
//! The one case this exists for: echo turned back on after a password and
//! off again for the next prompt before the client answered. Without the
//! queue the second `WILL ECHO` crosses the client's `DONT ECHO`, its
//! `DO ECHO` then meets an option we think is off, and the client is told
//! `WONT ECHO` — and prints the next password as it is typed.

/// Whether a change waits behind the one in flight (RFC 1143 "queue").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Queue {
    Empty,
    Opposite,
}

/// One side of one option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Q {
    #[default]
    No,
    Yes,
    WantNo(Queue),
    WantYes(Queue),
}

/// What to send after a state change: the enabling verb (`WILL` or `DO`)
/// or the disabling one (`WONT` or `DONT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Send {
    Enable,
    Disable,
}

/// The result of a verb received from the other side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Answer {
    /// The verb owed in reply, if any.
    pub send: Option<Send>,
    /// The option just turned on (`Some(true)`) or off (`Some(false)`).
    pub turned: Option<bool>,
}

/// One side (ours or the client's) of all 256 options: 256 small states,
/// no allocation per option.
#[derive(Debug)]
pub struct Side([Q; 256]);

impl Default for Side {
    fn default() -> Self {
        Side([Q::No; 256])
    }
}

impl Side {
    /// Whether the option is on on this side.
    pub fn is_on(&self, opt: u8) -> bool {
        self.0[opt as usize] == Q::Yes
    }

    /// We want the option on: the verb to send now, if any.
    pub fn ask_enable(&mut self, opt: u8) -> Option<Send> {
        let q = &mut self.0[opt as usize];
        let (next, send) = match *q {
            Q::No => (Q::WantYes(Queue::Empty), Some(Send::Enable)),
            Q::WantNo(_) => (Q::WantNo(Queue::Opposite), None),
            Q::WantYes(_) => (Q::WantYes(Queue::Empty), None),
            Q::Yes => (Q::Yes, None),
        };
        *q = next;
        send
    }

    /// We want the option off: the verb to send now, if any.
    pub fn ask_disable(&mut self, opt: u8) -> Option<Send> {
        let q = &mut self.0[opt as usize];
        let (next, send) = match *q {
            Q::Yes => (Q::WantNo(Queue::Empty), Some(Send::Disable)),
            Q::WantYes(_) => (Q::WantYes(Queue::Opposite), None),
            Q::WantNo(_) => (Q::WantNo(Queue::Empty), None),
            Q::No => (Q::No, None),
        };
        *q = next;
        send
    }

    /// A line came from the client after our verb went out: any answer it
    /// was going to send came first (a telnet client answers as it reads,
    /// ahead of what its user types). Still unanswered, the client never
    /// will: take its silence as agreement with an enable (it may already
    /// act on it) and as done for a disable, so the next change is sent
    /// instead of queued forever. Returns the verb a queued change owes.
    pub fn settle(&mut self, opt: u8) -> Option<Send> {
        match self.0[opt as usize] {
            Q::WantYes(_) => self.received_enable(opt, false).send,
            Q::WantNo(_) => self.received_disable(opt).send,
            Q::Yes | Q::No => None,
        }
    }

    /// The other side sent the enabling verb (`DO` for ours, `WILL` for
    /// its own); `agree` is whether we accept it when we did not ask.
    pub fn received_enable(&mut self, opt: u8, agree: bool) -> Answer {
        let q = &mut self.0[opt as usize];
        let (next, answer) = match *q {
            Q::No if agree => (Q::Yes, answer(Some(Send::Enable), Some(true))),
            Q::No => (Q::No, answer(Some(Send::Disable), None)),
            Q::Yes => (Q::Yes, Answer::default()),
            // An answer to our disable that enables is an error (RFC 1143).
            Q::WantNo(Queue::Empty) => (Q::No, Answer::default()),
            Q::WantNo(Queue::Opposite) => (Q::Yes, answer(None, Some(true))),
            Q::WantYes(Queue::Empty) => (Q::Yes, answer(None, Some(true))),
            Q::WantYes(Queue::Opposite) => {
                (Q::WantNo(Queue::Empty), answer(Some(Send::Disable), None))
            }
        };
        *q = next;
        answer
    }

    /// The other side sent the disabling verb (`DONT` or `WONT`).
    pub fn received_disable(&mut self, opt: u8) -> Answer {
        let q = &mut self.0[opt as usize];
        let (next, answer) = match *q {
            Q::No => (Q::No, Answer::default()),
            Q::Yes => (Q::No, answer(Some(Send::Disable), Some(false))),
            Q::WantNo(Queue::Empty) | Q::WantYes(_) => (Q::No, Answer::default()),
            Q::WantNo(Queue::Opposite) => {
                (Q::WantYes(Queue::Empty), answer(Some(Send::Enable), None))
            }
        };
        *q = next;
        answer
    }
}

fn answer(send: Option<Send>, turned: Option<bool>) -> Answer {
    Answer { send, turned }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPT: u8 = 1;

    #[test]
    fn a_change_asked_while_one_is_in_flight_waits_for_its_answer() {
        let mut s = Side::default();
        assert_eq!(s.ask_enable(OPT), Some(Send::Enable));
        assert_eq!(s.received_enable(OPT, false).turned, Some(true));
        // Off, then on again before the client answered the off.
        assert_eq!(s.ask_disable(OPT), Some(Send::Disable));
        assert_eq!(s.ask_enable(OPT), None, "queued, not crossed");
        // The client's DONT: now the queued enable goes out.
        assert_eq!(s.received_disable(OPT).send, Some(Send::Enable));
        // Its DO completes it: on, and nothing more owed.
        assert_eq!(s.received_enable(OPT, false), answer(None, Some(true)));
        assert!(s.is_on(OPT));
    }

    #[test]
    fn a_client_that_never_answers_gets_every_change_sent_after_its_next_line() {
        let mut s = Side::default();
        assert_eq!(s.ask_enable(OPT), Some(Send::Enable));
        assert_eq!(s.settle(OPT), None);
        assert!(s.is_on(OPT), "silence after an enable: taken as agreed");
        assert_eq!(s.ask_disable(OPT), Some(Send::Disable));
        assert_eq!(s.settle(OPT), None);
        assert_eq!(s.ask_enable(OPT), Some(Send::Enable), "sent, not queued");
    }

    #[test]
    fn a_queued_change_can_be_taken_back_and_unasked_requests_are_answered() {
        let mut s = Side::default();
        s.ask_enable(OPT);
        s.ask_disable(OPT);
        // The client agrees to the enable: it is turned off at once.
        assert_eq!(s.received_enable(OPT, false).send, Some(Send::Disable));
        assert_eq!(s.received_disable(OPT), Answer::default());
        assert!(!s.is_on(OPT));
        // Unasked: refused or accepted, once; repeated, no loop.
        assert_eq!(s.received_enable(OPT, false).send, Some(Send::Disable));
        assert_eq!(s.received_enable(OPT, true).send, Some(Send::Enable));
        assert_eq!(s.received_enable(OPT, true), Answer::default());
        assert_eq!(s.received_disable(OPT).send, Some(Send::Disable));
        assert_eq!(s.received_disable(OPT), Answer::default());
    }
}
