//! The history checker: reads an [`Evidence`] (what the bots recorded, the
//! faults as carried out, the Redis and /proc samples, the end state) and
//! says which of issue 11's properties held, Jepsen style: from histories,
//! not from timings of the checker's own.
//!
//! # Layout
//! - [`journal`]: every acknowledged journal line exactly once and in
//!   order; after a gate crash only an unsaved suffix may be missing.
//! - [`answers`]: every command answered within its bound, in the shape
//!   the contract gives it; connections closed only by a fault.
//! - [`fences`]: lease generations and owner epochs never go back; a new
//!   lease owner holds a generation above every one before.
//! - [`actors`]: at most one actor serves a zone at a time, and zones are
//!   served under generations that only go up, across processes.
//! - [`items`]: every tracked item exactly once (item conservation: the
//!   censuses while healthy and after the bots quit).
//! - [`end_state`]: processes alive, RSS bounded, `telosctl status` and
//!   every bot's `where` agreeing, durable rows equal to the listings, and
//!   the fault driver's own findings (a drain's exit, a failed transfer).
//! - `findings` (what a check reports) and `windows` (the faults as time
//!   windows): the leaves every check uses. This root only runs the checks.

#[cfg(test)]
mod actor_tests;
mod actors;
mod answers;
pub mod end_state;
mod fences;
mod findings;
mod items;
mod journal;
#[cfg(test)]
mod tests;
mod windows;

use super::history::Evidence;

use self::windows::Faults;

pub use self::findings::{CheckResult, Verdict, Violation};

/// Run every check.
pub fn check(e: &Evidence) -> Verdict {
    let faults = Faults::new(&e.faults, e.end.stopped);
    Verdict {
        checks: vec![
            journal::check(e, &faults),
            answers::check(e, &faults),
            fences::check(e, &faults),
            actors::check(e, &faults),
            end_state::check(e),
            items::check(e),
        ],
    }
}
