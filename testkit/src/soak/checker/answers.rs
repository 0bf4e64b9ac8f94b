//! Every command answered within its bound — 2 s beyond the fault in
//! progress, plus the lease TTL when the fault put a shard's lease at
//! stake (issue 17, defect 5's rule; a login: [`LOGIN_BOUND`] instead of
//! the 2 s) — and in the shape the contract
//! gives it: a move answers the new room or a line starting `You can't go
//! that way`. A connection may only be closed by a gate crash, a `quit`,
//! or while its bot was not reading (the gate drops a stuck client).

use super::super::classify::REFUSAL;
use super::super::clock::{Ms, secs};
use super::super::config::{ANSWER_BOUND, LOGIN_BOUND};
use super::super::history::{
    Answer, BotHistory, CloseCause, CommandRecord, Evidence, Kind, Outcome,
};
use super::findings::{CheckResult, Violation};
use super::windows::Faults;

/// Lines a login may be refused with while something is down (the gate's
/// outage lines); outside a fault each is a violation (issue 11 item 4).
const OUTAGE_REFUSALS: &[&str] = &[
    "The world is not reachable",
    "The world could not be reached",
];

/// How a login refused for a wrong name or password starts (CONTRACT.md);
/// the bots' are always right.
const LOGIN_FAILED: &str = "Login failed";

pub fn check(e: &Evidence, faults: &Faults) -> CheckResult {
    let mut violations = Vec::new();
    let mut notes = Vec::new();
    let (mut commands, mut refused, mut refused_calm) = (0usize, 0usize, 0usize);
    for bot in &e.bots {
        for (i, c) in bot.commands.iter().enumerate() {
            commands += 1;
            if let Some(Answer::Refused { .. }) = c.outcome.answer() {
                refused += 1;
                if faults.around(c.sent).is_none() {
                    refused_calm += 1;
                }
            }
            let mut found = check_command(bot, c, faults);
            // A refusal while the bot was elsewhere than it believed is
            // its own mistake, not the world's: the `where` it sends after
            // every refusal tells.
            if let (Some(desync), Kind::Move { from, .. }) = (misplaced(bot, i), &c.kind) {
                found.retain(|v| v.kind != CALM_REFUSAL);
                notes.push(format!(
                    "{}: `{}` at {} refused while the bot believed it was in {from}; `where` said {desync}",
                    bot.name,
                    c.line,
                    secs(c.sent)
                ));
            }
            violations.extend(found);
        }
        violations.extend(check_sessions(bot, faults));
    }
    CheckResult {
        name: "answers",
        summary: format!(
            "{commands} commands; {} violations; {refused} moves refused with `{REFUSAL}` ({refused_calm} with no fault in progress)",
            violations.len()
        ),
        notes,
        violations,
    }
}

const CALM_REFUSAL: &str = "move refused with no fault in progress";

/// When command `i` is a refused move and the bot's next command, a
/// `where`, put it somewhere else than the move started from: that room.
fn misplaced(bot: &BotHistory, i: usize) -> Option<String> {
    let c = &bot.commands[i];
    let (Kind::Move { from, .. }, Some(Answer::Refused { .. })) = (&c.kind, c.outcome.answer())
    else {
        return None;
    };
    let next = bot.commands.get(i + 1)?;
    match next.outcome.answer() {
        Some(Answer::Where { room, .. }) if next.kind == Kind::Where && room != from => {
            Some(room.clone())
        }
        _ => None,
    }
}

/// A short name for a command's kind.
fn what(kind: &Kind) -> &'static str {
    match kind {
        Kind::Move { .. } => "move",
        Kind::Journal { .. } => "journal",
        Kind::JournalList => "journal listing",
        Kind::Say { .. } => "say",
        Kind::Where => "where",
        Kind::Look => "look",
        Kind::Carry { pick_up: true } => "get all",
        Kind::Carry { pick_up: false } => "drop all",
        Kind::Quit => "quit",
        Kind::Login => "login",
    }
}

fn check_command(bot: &BotHistory, c: &CommandRecord, faults: &Faults) -> Vec<Violation> {
    let bound = if c.kind == Kind::Login {
        LOGIN_BOUND
    } else {
        ANSWER_BOUND
    };
    let from = c.read_from.unwrap_or(c.sent);
    let deadline = faults.answer_deadline(from, bound.as_millis() as Ms);
    let excerpt: Vec<String> = c
        .excerpt
        .iter()
        .map(|(t, l)| format!("{:>8} | {l}", secs(*t)))
        .collect();
    let v = |kind: String, at: Ms, detail: String| Violation {
        check: "answers",
        kind,
        bot: Some(bot.name.clone()),
        at: Some(at),
        window: Some((c.sent.saturating_sub(1_000), at + 1_000)),
        detail,
        excerpt: excerpt.clone(),
    };
    let sent = format!(
        "`{}` sent {}{} ({})",
        c.line,
        secs(c.sent),
        c.read_from
            .map(|r| format!(", read from {}", secs(r)))
            .unwrap_or_default(),
        faults.describe(c.sent)
    );
    let mut out = Vec::new();
    if c.shown_again > 0 {
        // Output commit: a line is answered once it is durable, so a
        // replay only ever carries lines whose answers nobody saw.
        let at = c.outcome.answered_at().unwrap_or(c.sent);
        out.push(v(
            "answer shown twice".into(),
            at,
            format!(
                "{sent}: {} answer(s) to the bot's own lines shown again while waiting for it",
                c.shown_again
            ),
        ));
    }
    match &c.outcome {
        Outcome::Answered { at, answer } => {
            if *at > deadline {
                out.push(v(
                    format!("late {}", what(&c.kind)),
                    *at,
                    format!(
                        "{sent}: answered {} after {} (bound {} with the faults in progress)",
                        secs(*at),
                        secs(at - from),
                        secs(deadline - from)
                    ),
                ));
            }
            match answer {
                Answer::OffContract { line } => out.push(v(
                    "refusal off contract".into(),
                    *at,
                    format!("{sent}: refused with {line:?}, which does not start with `{REFUSAL}`"),
                )),
                Answer::Unrecognised if c.kind != Kind::Quit => out.push(v(
                    format!("unrecognised answer to {}", what(&c.kind)),
                    *at,
                    format!(
                        "{sent}: the world took it but printed none of the contract's shapes for it"
                    ),
                )),
                Answer::Refused { line } if faults.during(c.sent, *at).is_none() => out.push(v(
                    CALM_REFUSAL.into(),
                    *at,
                    format!(
                        "{sent}: refused with {line:?} though the exit exists and nothing was down"
                    ),
                )),
                Answer::LoginRefused { line } => {
                    let outage = OUTAGE_REFUSALS.iter().any(|p| line.starts_with(p));
                    if line.starts_with(LOGIN_FAILED) {
                        out.push(v(
                            "`Login failed` for the right password".into(),
                            *at,
                            format!(
                                "{sent}: {line:?} (CONTRACT.md: `Login failed` means a wrong name or password; it also counts towards the gate's failure limit)"
                            ),
                        ));
                    } else if !outage {
                        out.push(v(
                            "login refused".into(),
                            *at,
                            format!("{sent}: a valid login was refused: {line:?}"),
                        ));
                    } else if faults.around(*at).is_none() {
                        out.push(v(
                            "login refused while nothing was down".into(),
                            *at,
                            format!("{sent}: {line:?} with every process up"),
                        ));
                    }
                }
                _ => {}
            }
        }
        // Given up before its bound ran out: the run was ending, nothing
        // to judge (a bot never gives up early otherwise).
        Outcome::Abandoned { at } if *at < deadline => {}
        Outcome::Abandoned { at } => out.push(v(
            format!("unanswered {}", what(&c.kind)),
            *at,
            format!(
                "{sent}: no answer by {} (gave up after {})",
                secs(*at),
                secs(at - from)
            ),
        )),
        // Waited past its bound before the connection went: unanswered
        // all the same (a later gate crash does not excuse it).
        Outcome::Closed { at } if *at > deadline => out.push(v(
            format!("unanswered {}", what(&c.kind)),
            *at,
            format!(
                "{sent}: no answer by {}, when the connection closed ({})",
                secs(*at),
                faults.describe(*at)
            ),
        )),
        // Closed within its bound: judged with its session (below).
        Outcome::Closed { .. } => {}
    }
    out
}

/// A connection closed by the gate's side outside a gate crash, and not
/// while its bot was not reading.
fn check_sessions(bot: &BotHistory, faults: &Faults) -> Vec<Violation> {
    let slack = ANSWER_BOUND.as_millis() as Ms;
    let mut out = Vec::new();
    for (i, s) in bot.sessions.iter().enumerate() {
        let Some((at, CloseCause::Remote)) = s.closed else {
            continue;
        };
        if faults.gate_crash_at(at).is_some() {
            continue;
        }
        let stalled = bot
            .pauses
            .iter()
            .any(|(from, to)| *from <= at && at <= to + slack);
        if stalled {
            continue;
        }
        let pending: Vec<&CommandRecord> = bot
            .commands
            .iter()
            .filter(|c| c.session == i && matches!(c.outcome, Outcome::Closed { .. }))
            .collect();
        let interrupted = pending
            .iter()
            .map(|c| format!("`{}` sent {}", c.line, secs(c.sent)))
            .collect::<Vec<_>>()
            .join(", ");
        out.push(Violation {
            check: "answers",
            kind: "connection closed by the gate".into(),
            bot: Some(bot.name.clone()),
            at: Some(at),
            window: Some((at.saturating_sub(5_000), at + 1_000)),
            detail: format!(
                "connection {i} (opened {}) closed at {} ({}); unanswered: {}",
                secs(s.opened),
                secs(at),
                faults.describe(at),
                if interrupted.is_empty() {
                    "nothing"
                } else {
                    &interrupted
                }
            ),
            excerpt: s.tail.clone(),
        });
    }
    out
}
