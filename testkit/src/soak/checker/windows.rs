//! The faults of a run as time windows: which fault a moment falls in, and
//! how far a bound is pushed out by the faults it overlaps. A leaf the
//! checks use to excuse or explain what they find.

use super::super::clock::{Ms, secs};
use super::super::config::{ANSWER_BOUND, FaultKind, LEASE_TTL};
use super::super::history::FaultRecord;

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
    /// window between `from` and the deadline pushes the deadline out
    /// (overlapping windows count once).
    pub fn deadline(&self, from: Ms, bound: Ms) -> Ms {
        self.deadline_with(from, bound, 0)
    }

    /// A command's answer deadline (issue 17, defect 5's rule): within the
    /// faults' duration plus 2 s, plus the lease TTL when one of the faults
    /// it waited through put a shard's lease at stake (a lease must run out
    /// before a peer may serve the zone).
    pub fn answer_deadline(&self, from: Ms, bound: Ms) -> Ms {
        self.deadline_with(from, bound, LEASE_TTL.as_millis() as Ms)
    }

    fn deadline_with(&self, from: Ms, bound: Ms, ttl: Ms) -> Ms {
        let mut deadline = from + bound;
        let mut covered = from;
        let mut lease = false;
        // By start: a window starting past the deadline ends the walk, as
        // every later one starts later still.
        for f in &self.list {
            let (a, b) = self.window(f);
            if a >= deadline {
                break;
            }
            if b <= from {
                continue;
            }
            let start = a.max(covered);
            if b > start {
                deadline += b - start;
                covered = b;
            }
            if !lease && f.kind.touches_a_lease() {
                lease = true;
                deadline += ttl;
            }
        }
        deadline
    }

    /// The fault whose window holds `t`, or that ended less than one answer
    /// bound before it.
    pub fn around(&self, t: Ms) -> Option<&'a FaultRecord> {
        self.find(t, |_| true)
    }

    /// A fault whose window (with its slack) overlaps `from..=to`: one in
    /// progress at any moment a command was in flight. A move sent a few
    /// ms before a fault began and refused during it was refused by the
    /// fault (partition seed 920: `east` sent as shard-b's Redis link went
    /// one-way, refused when its commit barrier could not reach Redis).
    pub fn during(&self, from: Ms, to: Ms) -> Option<&'a FaultRecord> {
        let slack = ANSWER_BOUND.as_millis() as Ms;
        self.list.iter().copied().find(|f| {
            let (a, b) = self.window(f);
            a <= to && from <= b + slack
        })
    }

    /// Whether a Redis crash's window (kill to restart, plus one answer
    /// bound) holds `t`.
    pub fn redis_crash_at(&self, t: Ms) -> bool {
        self.find(t, |f| f.kind == FaultKind::Redis).is_some()
    }

    /// The gate crash whose window (kill to restart, plus one answer
    /// bound) holds `t`.
    pub fn gate_crash_at(&self, t: Ms) -> Option<&'a FaultRecord> {
        self.find(t, |f| f.kind == FaultKind::Gate)
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
}
