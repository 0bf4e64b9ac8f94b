//! Every journal line acknowledged (`Noted.`) is in the character's final
//! journal exactly once and in order. The one allowed exception: lines of a
//! connection that ended in a gate crash, which the world had applied but
//! not saved when the gate died — only as a suffix of that connection's
//! lines, only if no sample ever saw them in the durable row, and only if
//! the crash came before they were due to be saved (README: a gate crash
//! loses at most the lines applied since the last cadence save). Each such
//! loss is reported with its count and reason.

use std::collections::{BTreeMap, HashMap};

use super::super::clock::{Ms, secs};
use super::super::config::{ANSWER_BOUND, SAVE_INTERVAL};
use super::super::history::{BotHistory, CloseCause, Evidence, JournalLine, Series};
use super::findings::{CheckResult, Violation};
use super::windows::Faults;

/// The world keeps the last this many entries (CONTRACT.md); older lines
/// fall off the front and are not checked.
const JOURNAL_LIMIT: usize = 1000;

pub fn check(e: &Evidence, faults: &Faults) -> CheckResult {
    let mut violations = Vec::new();
    let mut notes = Vec::new();
    let (mut acked, mut lost_allowed) = (0usize, 0usize);
    for bot in &e.bots {
        let empty = Series::new();
        let durable = e.samples.durable_tail.get(&bot.name).unwrap_or(&empty);
        let r = check_bot(bot, durable, faults);
        acked += r.acked;
        lost_allowed += r.allowed;
        violations.extend(r.violations);
        notes.extend(r.notes);
    }
    CheckResult {
        name: "journal",
        summary: format!(
            "{} bots, {acked} lines acknowledged; {} violations; {lost_allowed} lost with a gate crash (allowed, see notes)",
            e.bots.len(),
            violations.len()
        ),
        notes,
        violations,
    }
}

struct BotResult {
    acked: usize,
    allowed: usize,
    violations: Vec<Violation>,
    notes: Vec<String>,
}

fn check_bot(bot: &BotHistory, durable: &Series, faults: &Faults) -> BotResult {
    let mut out = BotResult {
        acked: bot.journal.iter().filter(|l| l.acked.is_some()).count(),
        allowed: 0,
        violations: Vec::new(),
        notes: Vec::new(),
    };
    let v = |kind: &str, at: Option<Ms>, detail: String| Violation {
        check: "journal",
        kind: kind.to_string(),
        bot: Some(bot.name.clone()),
        at,
        window: at.map(|t| (t.saturating_sub(2_000), t + 2_000)),
        detail,
        excerpt: Vec::new(),
    };
    let Some(listing) = bot.last.listing.as_ref().or(bot.last.durable.as_ref()) else {
        out.violations.push(v(
            "no final journal",
            None,
            "neither a final `journal` listing nor a durable row was read".into(),
        ));
        return out;
    };
    let by_text: HashMap<&str, &JournalLine> =
        bot.journal.iter().map(|l| (l.text.as_str(), l)).collect();
    // The final journal as line numbers, in listing order.
    let mut listed: Vec<&JournalLine> = Vec::new();
    for entry in listing {
        match by_text.get(entry.as_str()) {
            Some(l) => listed.push(l),
            None => out.violations.push(v(
                "unknown entry",
                None,
                format!("the journal holds {entry:?}, which this bot never wrote"),
            )),
        }
    }
    let mut count: BTreeMap<u64, usize> = BTreeMap::new();
    for l in &listed {
        *count.entry(l.n).or_default() += 1;
    }
    for (n, k) in &count {
        if *k > 1 {
            let l = by_text_n(bot, *n);
            out.violations.push(v(
                "duplicated",
                l.and_then(|l| l.acked).or(l.map(|l| l.sent)),
                format!(
                    "line {n} ({:?}) is in the journal {k} times{}",
                    l.map_or("", |l| &l.text),
                    sent_acked(l)
                ),
            ));
        }
    }
    for w in listed.windows(2) {
        if w[1].n < w[0].n {
            out.violations.push(v(
                "reordered",
                w[1].acked.or(Some(w[1].sent)),
                format!(
                    "line {} (sent {}) comes after line {} (sent {}) in the journal",
                    w[1].n,
                    secs(w[1].sent),
                    w[0].n,
                    secs(w[0].sent)
                ),
            ));
        }
    }
    // With a full journal, the oldest lines fell off the front.
    let trimmed_below = if listing.len() >= JOURNAL_LIMIT {
        listed.iter().map(|l| l.n).min().unwrap_or(0)
    } else {
        0
    };
    let missing: Vec<&JournalLine> = bot
        .journal
        .iter()
        .filter(|l| l.acked.is_some() && l.n >= trimmed_below && !count.contains_key(&l.n))
        .collect();
    // Missing lines grouped by the connection they were sent on.
    let mut by_session: BTreeMap<usize, Vec<&JournalLine>> = BTreeMap::new();
    for l in missing {
        by_session.entry(l.session).or_default().push(l);
    }
    for (session, lines) in by_session {
        judge_session(bot, session, &lines, &count, durable, faults, &mut out);
    }
    out
}

/// Missing acknowledged lines of one connection: allowed only as the
/// unsaved suffix of a connection a gate crash ended.
fn judge_session(
    bot: &BotHistory,
    session: usize,
    missing: &[&JournalLine],
    present: &BTreeMap<u64, usize>,
    durable: &Series,
    faults: &Faults,
    out: &mut BotResult,
) {
    let v = |kind: &str, l: &JournalLine, detail: String| Violation {
        check: "journal",
        kind: kind.to_string(),
        bot: Some(bot.name.clone()),
        at: l.acked,
        window: Some((
            l.sent.saturating_sub(2_000),
            l.acked.unwrap_or(l.sent) + 2_000,
        )),
        detail,
        excerpt: Vec::new(),
    };
    let closed = bot.sessions.get(session).and_then(|s| s.closed);
    let crash = match closed {
        Some((at, CloseCause::Remote)) => faults.gate_crash_at(at).map(|f| (at, f)),
        _ => None,
    };
    let Some((closed_at, crash)) = crash else {
        let ended = match closed {
            Some((at, CloseCause::Quit)) => format!("quit at {}", secs(at)),
            Some((at, CloseCause::Abandoned)) => {
                format!(
                    "dropped by the bot at {} after an unanswered command",
                    secs(at)
                )
            }
            Some((at, CloseCause::Remote)) => {
                format!("closed by the gate at {}, not in a gate crash", secs(at))
            }
            None => "still open at the end".to_string(),
        };
        for l in missing {
            out.violations.push(v(
                "missing",
                l,
                format!(
                    "acknowledged line {} ({:?}){} is not in the journal (its connection: {ended})",
                    l.n,
                    l.text,
                    sent_acked(Some(l))
                ),
            ));
        }
        return;
    };
    // A suffix: nothing of this connection after the first missing line
    // may be in the journal.
    let first = missing.iter().map(|l| l.n).min().unwrap_or(0);
    let later_present: Vec<u64> = bot
        .journal
        .iter()
        .filter(|l| l.session == session && l.n > first && present.contains_key(&l.n))
        .map(|l| l.n)
        .collect();
    // The row's last entry being a line of this connection at or after a
    // missing one means the missing one was saved (lines are applied in
    // order); a later connection's lines say nothing about it.
    let same_session = |n: u64| by_text_n(bot, n).is_some_and(|l| l.session == session);
    let durable_max = durable
        .iter()
        .filter_map(|(t, v)| v.map(|n| (*t, n)))
        .filter(|(_, n)| same_session(*n))
        .max_by_key(|(_, n)| *n);
    let mut allowed = Vec::new();
    for l in missing {
        if let Some(&later) = later_present.first() {
            out.violations.push(v(
                "missing (not a suffix)",
                l,
                format!(
                    "acknowledged line {} is missing but line {later}, sent after it on the same connection, is there",
                    l.n
                ),
            ));
        } else if let Some((t, n)) = durable_max.filter(|(_, n)| *n >= l.n) {
            out.violations.push(v(
                "durable line lost",
                l,
                format!(
                    "acknowledged line {} was in the durable row (it reached line {n} of the same connection at {}) and is gone after gate crash {}",
                    l.n,
                    secs(t),
                    crash.label()
                ),
            ));
        } else if let Some(due) = save_due(l, faults).filter(|due| *due < closed_at) {
            out.violations.push(v(
                "unsaved past the save interval",
                l,
                format!(
                    "acknowledged line {} ({}) should have been saved by {} (the save interval and one bound, beyond the faults in progress) but was not, and was lost with gate crash {} at {}",
                    l.n,
                    sent_acked(Some(l)).trim_start_matches(", "),
                    secs(due),
                    crash.label(),
                    secs(closed_at)
                ),
            ));
        } else {
            allowed.push(*l);
        }
    }
    if allowed.is_empty() {
        return;
    }
    out.allowed += allowed.len();
    let (lo, hi) = (allowed[0], allowed[allowed.len() - 1]);
    let saved = match durable
        .iter()
        .rfind(|(t, v)| *t <= closed_at && v.is_some())
    {
        Some((t, Some(n))) => format!(
            "the last durable line sampled before the crash was {n} (at {})",
            secs(*t)
        ),
        _ => "no line of it was ever sampled in the durable row".to_string(),
    };
    out.notes.push(format!(
        "{}: {} acknowledged line(s) {}..{} (acknowledged {}..{}) lost with gate crash {} at {}: the world had applied but not saved them ({saved}); a suffix of the connection's lines, as allowed",
        bot.name,
        allowed.len(),
        lo.n,
        hi.n,
        secs(lo.acked.unwrap_or(lo.sent)),
        secs(hi.acked.unwrap_or(hi.sent)),
        crash.label(),
        secs(closed_at),
    ));
}

/// By when an acknowledged line must be durable: a shard saves a dirty
/// player every save interval, give or take one answer bound, and not
/// while a fault stops it (the deadline runs beyond the faults in progress).
fn save_due(l: &JournalLine, faults: &Faults) -> Option<Ms> {
    let bound = (SAVE_INTERVAL + ANSWER_BOUND).as_millis() as Ms;
    l.acked.map(|at| faults.deadline(at, bound))
}

fn by_text_n(bot: &BotHistory, n: u64) -> Option<&JournalLine> {
    bot.journal.iter().find(|l| l.n == n)
}

fn sent_acked(l: Option<&JournalLine>) -> String {
    match l {
        Some(l) => match l.acked {
            Some(a) => format!(", sent {} acknowledged {}", secs(l.sent), secs(a)),
            None => format!(", sent {} never acknowledged", secs(l.sent)),
        },
        None => String::new(),
    }
}
