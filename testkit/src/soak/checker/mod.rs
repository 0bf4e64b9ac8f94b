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
//! - [`fences`]: lease generations and owner epochs never go back.
//! - [`end_state`]: processes alive, RSS bounded, `telosctl status` and
//!   every bot's `where` agreeing, durable rows equal to the listings, and
//!   the fault driver's own findings (a drain's exit, a failed transfer).

mod answers;
pub mod end_state;
mod fences;
mod journal;
#[cfg(test)]
mod tests;

use super::clock::{Ms, secs};
use super::config::ANSWER_BOUND;
use super::history::{Evidence, FaultRecord};

/// One property that did not hold, at one place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The check that found it (`journal`, `answers`, …).
    pub check: &'static str,
    /// What kind of violation, for grouping (`unanswered`, `duplicated`).
    pub kind: String,
    pub bot: Option<String>,
    /// When it happened (or was seen).
    pub at: Option<Ms>,
    /// The stretch of time whose process logs explain it.
    pub window: Option<(Ms, Ms)>,
    pub detail: String,
    /// Received lines, with times, where they help.
    pub excerpt: Vec<String>,
}

/// The result of one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckResult {
    pub name: &'static str,
    /// One line: what was checked and how it went.
    pub summary: String,
    /// Findings that are allowed but must be said (a loss a gate crash
    /// explains, with how many and why).
    pub notes: Vec<String>,
    pub violations: Vec<Violation>,
}

/// Every check's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub checks: Vec<CheckResult>,
}

impl Verdict {
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.violations.is_empty())
    }

    pub fn violations(&self) -> impl Iterator<Item = &Violation> {
        self.checks.iter().flat_map(|c| c.violations.iter())
    }
}

/// Run every check.
pub fn check(e: &Evidence) -> Verdict {
    let faults = Faults::new(&e.faults, e.end.stopped);
    Verdict {
        checks: vec![
            journal::check(e, &faults),
            answers::check(e, &faults),
            fences::check(e, &faults),
            end_state::check(e),
        ],
    }
}

/// The faults of a run as time windows.
pub struct Faults<'a> {
    list: Vec<&'a FaultRecord>,
    /// Where an unfinished window ends.
    run_end: Ms,
}

impl<'a> Faults<'a> {
    pub fn new(list: &'a [FaultRecord], run_end: Ms) -> Faults<'a> {
        let mut list: Vec<&FaultRecord> = list.iter().collect();
        list.sort_by_key(|f| f.start);
        Faults { list, run_end }
    }

    /// `[start, end]` of a fault's window for answer bounds.
    pub fn window(&self, f: &FaultRecord) -> (Ms, Ms) {
        let end = f
            .window_end
            .or(f.healthy)
            .unwrap_or(self.run_end.max(f.start));
        (f.start, end)
    }

    /// The deadline of something started at `from` with `bound`: the bound
    /// runs beyond every fault in progress, i.e. each stretch of a fault
    /// window between `from` and the deadline pushes the deadline out.
    pub fn deadline(&self, from: Ms, bound: Ms) -> Ms {
        let mut deadline = from + bound;
        for f in &self.list {
            let (a, b) = self.window(f);
            if a < deadline && b > from {
                deadline += b - a.max(from);
            }
        }
        deadline
    }

    /// The fault whose window holds `t`, or that ended less than one answer
    /// bound before it.
    pub fn around(&self, t: Ms) -> Option<&'a FaultRecord> {
        self.find(t, |_| true)
    }

    /// The gate crash whose window (kill to restart, plus one answer
    /// bound) holds `t`.
    pub fn gate_crash_at(&self, t: Ms) -> Option<&'a FaultRecord> {
        self.find(t, |f| f.kind == super::config::FaultKind::Gate)
    }

    fn find(&self, t: Ms, which: impl Fn(&FaultRecord) -> bool) -> Option<&'a FaultRecord> {
        let slack = ANSWER_BOUND.as_millis() as Ms;
        self.list.iter().copied().find(|f| {
            let (a, b) = self.window(f);
            which(f) && a <= t && t <= b + slack
        })
    }

    /// "during #3 kill shard-b" / "1.2s after #3 kill shard-b" / "no fault
    /// in progress".
    pub fn describe(&self, t: Ms) -> String {
        match self.around(t) {
            Some(f) => {
                let (a, b) = self.window(f);
                if t <= b {
                    format!("during {} ({}..{})", f.label(), secs(a), secs(b))
                } else {
                    format!("{} after {} ended", secs(t - b), f.label())
                }
            }
            None => "no fault in progress".to_string(),
        }
    }

    pub fn id_at(&self, t: Ms) -> Option<usize> {
        self.around(t).map(|f| f.id)
    }
}
