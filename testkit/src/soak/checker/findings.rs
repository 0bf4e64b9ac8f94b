//! What a check reports: the properties that did not hold ([`Violation`]),
//! one check's result and the run's [`Verdict`]. A leaf every check uses.

use super::super::clock::Ms;

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
