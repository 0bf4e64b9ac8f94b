//! The checker on synthetic histories: a clean one passes; each kind of
//! defect it exists for is flagged, and what a fault explains is not.

use super::super::clock::Ms;
use super::super::config::FaultKind;
use super::super::history::*;
use super::*;

const NAME: &str = "Walkaa";

/// A bot that wrote journal lines `1..=n`, each sent at `10 * n` s and
/// acknowledged 50 ms later, all on connection 0, and whose final listing
/// holds `listed` (line numbers).
pub(super) fn bot(n: u64, listed: &[u64]) -> BotHistory {
    let mut b = BotHistory::new(NAME, Role::Walker);
    b.sessions.push(Session {
        opened: 0,
        logged_in: Some(100),
        closed: None,
        tail: Vec::new(),
    });
    for i in 1..=n {
        let sent = i * 1_000;
        b.journal.push(JournalLine {
            n: i,
            text: journal_text(NAME, i),
            sent,
            acked: Some(sent + 50),
            session: 0,
        });
        b.commands.push(command(
            Kind::Journal { n: i },
            sent,
            Some((sent + 50, Answer::Noted)),
        ));
    }
    b.last.listing = Some(listed.iter().map(|i| journal_text(NAME, *i)).collect());
    b.last.location = Some(("city".into(), "city:square".into(), "shard-a".into()));
    b.last.believed_room = Some("city:square".into());
    b
}

pub(super) fn command(kind: Kind, sent: Ms, answer: Option<(Ms, Answer)>) -> CommandRecord {
    CommandRecord {
        session: 0,
        line: "x".into(),
        kind,
        sent,
        read_from: None,
        outcome: match answer {
            Some((at, answer)) => Outcome::Answered { at, answer },
            None => Outcome::Abandoned { at: sent + 60_000 },
        },
        excerpt: Vec::new(),
        shown_again: 0,
    }
}

pub(super) fn fault(id: usize, kind: FaultKind, start: Ms, end: Ms) -> FaultRecord {
    FaultRecord {
        id,
        kind,
        target: "shard-b".into(),
        start,
        restored: Some(end),
        window_end: Some(end),
        healthy: Some(end),
        notes: Vec::new(),
        problems: Vec::new(),
    }
}

pub(super) fn status() -> StatusView {
    StatusView {
        shards: vec![StatusShard {
            id: "shard-a".into(),
            state: "live".into(),
            players: 1,
        }],
        zones: vec![StatusZone {
            id: "city".into(),
            owner: Some("shard-a".into()),
            players: 1,
            transfer: false,
        }],
    }
}

pub(super) fn evidence(bots: Vec<BotHistory>) -> Evidence {
    Evidence {
        seed: 1,
        bots,
        end: EndState {
            status: Some((100_000, status())),
            stopped: 100_000,
            ..EndState::default()
        },
        rss_growth_kib: 64 * 1024,
        ..Evidence::default()
    }
}

pub(super) fn kinds(v: &Verdict) -> Vec<String> {
    v.violations().map(|v| v.kind.clone()).collect()
}

#[test]
fn a_clean_history_passes() {
    let mut e = evidence(vec![bot(5, &[1, 2, 3, 4, 5])]);
    e.samples
        .zone_gen
        .insert("city".into(), vec![(0, Some(1)), (5_000, Some(2))]);
    e.samples.lease_gen.insert(
        "city".into(),
        vec![(0, Some(1)), (5_000, None), (6_000, Some(2))],
    );
    e.samples
        .owner_epoch
        .insert(NAME.into(), vec![(0, Some(1)), (9_000, Some(2))]);
    let v = check(&e);
    assert!(v.passed(), "{:?}", kinds(&v));
}

#[test]
fn a_duplicated_line_is_flagged() {
    let v = check(&evidence(vec![bot(3, &[1, 2, 2, 3])]));
    assert_eq!(kinds(&v), ["duplicated"]);
}

#[test]
fn a_reordered_line_is_flagged() {
    let v = check(&evidence(vec![bot(3, &[1, 3, 2])]));
    assert_eq!(kinds(&v), ["reordered"]);
}

#[test]
fn a_missing_middle_line_is_flagged() {
    let v = check(&evidence(vec![bot(3, &[1, 3])]));
    assert_eq!(kinds(&v), ["missing"]);
}

/// `bot(5, listed)` whose connection 0 ended at 5.5 s with the gate
/// crash `#1`, logged in again on connection 1.
fn crashed(listed: &[u64]) -> Evidence {
    let mut b = bot(5, listed);
    b.sessions[0].closed = Some((5_500, CloseCause::Remote));
    b.sessions.push(Session {
        opened: 6_500,
        logged_in: Some(6_700),
        closed: None,
        tail: Vec::new(),
    });
    let mut e = evidence(vec![b]);
    e.faults.push(fault(1, FaultKind::Gate, 5_400, 6_400));
    e
}

#[test]
fn a_missing_suffix_after_a_gate_crash_is_allowed_and_counted() {
    let e = crashed(&[1, 2, 3]);
    let v = check(&e);
    assert!(v.passed(), "{:?}", kinds(&v));
    let notes: Vec<&String> = v.checks.iter().flat_map(|c| c.notes.iter()).collect();
    let note = notes
        .iter()
        .find(|n| n.contains("lost with gate crash"))
        .expect("a note");
    assert!(note.contains("2 acknowledged line(s) 4..5"), "{note}");
    assert!(
        v.checks[0].summary.contains("2 lost with a gate crash"),
        "{}",
        v.checks[0].summary
    );
}

#[test]
fn a_suffix_older_than_the_save_interval_is_not_excused_by_a_gate_crash() {
    // Acknowledged at 1.05..5.05 s; the crash at 5.5 s: line 1 was due by
    // 5.05 s (2 s save interval + 2 s bound), so it should have been saved.
    let v = check(&crashed(&[]));
    assert_eq!(kinds(&v), ["unsaved past the save interval"]);
    // A fault in progress pushes the due time out: a Redis outage from
    // 1.5 s to 4 s (no saves possible) makes line 1 due at 7.55 s.
    let mut e = crashed(&[]);
    e.faults.push(fault(2, FaultKind::Redis, 1_500, 4_000));
    assert!(check(&e).passed(), "{:?}", kinds(&check(&e)));
}

#[test]
fn a_command_still_waiting_when_a_gate_crash_closes_it_was_unanswered() {
    let mut e = crashed(&[1, 2, 3, 4, 5]);
    let b = &mut e.bots[0];
    b.commands.push(CommandRecord {
        outcome: Outcome::Closed { at: 5_500 },
        ..command(Kind::Where, 2_000, None)
    });
    assert_eq!(kinds(&check(&e)), ["unanswered where"]);
}

#[test]
fn a_gap_after_a_gate_crash_is_not_a_suffix() {
    let v = check(&crashed(&[1, 2, 3, 5]));
    assert_eq!(kinds(&v), ["missing (not a suffix)"]);
}

#[test]
fn a_suffix_the_durable_row_had_is_not_allowed_to_vanish() {
    let mut e = crashed(&[1, 2, 3]);
    // Line 5 (connection 0) was sampled in the row before the crash.
    e.samples
        .durable_tail
        .insert(NAME.into(), vec![(5_200, Some(5))]);
    let v = check(&e);
    assert_eq!(kinds(&v), ["durable line lost", "durable line lost"]);
}

#[test]
fn a_later_connections_durable_lines_do_not_make_a_lost_suffix_durable() {
    let mut e = crashed(&[1, 2, 3, 6]);
    let b = &mut e.bots[0];
    b.journal.push(JournalLine {
        n: 6,
        text: journal_text(NAME, 6),
        sent: 7_000,
        acked: Some(7_050),
        session: 1,
    });
    e.samples
        .durable_tail
        .insert(NAME.into(), vec![(5_200, Some(3)), (8_000, Some(6))]);
    let v = check(&e);
    assert!(v.passed(), "{:?}", kinds(&v));
}

#[test]
fn a_missing_suffix_without_a_gate_crash_is_flagged() {
    let mut e = crashed(&[1, 2, 3]);
    e.faults[0].kind = FaultKind::Kill;
    let v = check(&e);
    assert!(
        kinds(&v)
            .iter()
            .all(|k| k == "missing" || k == "connection closed by the gate"),
        "{:?}",
        kinds(&v)
    );
    assert_eq!(kinds(&v).iter().filter(|k| *k == "missing").count(), 2);
}

#[test]
fn an_unanswered_command_is_flagged() {
    let mut b = bot(1, &[1]);
    b.commands.push(command(
        Kind::Move {
            from: "city:east_gate".into(),
            dir: "east".into(),
            to: "hills:foot".into(),
        },
        3_000,
        None,
    ));
    let v = check(&evidence(vec![b.clone()]));
    assert_eq!(kinds(&v), ["unanswered move"]);
    // Cut short by the end of the run before its bound ran out: not judged.
    let last = b.commands.last_mut().unwrap();
    last.outcome = Outcome::Abandoned { at: 3_500 };
    let v = check(&evidence(vec![b]));
    assert!(v.passed(), "{:?}", kinds(&v));
}

#[test]
fn a_late_answer_is_flagged_unless_a_fault_explains_it() {
    let mut b = bot(1, &[1]);
    b.commands.push(command(
        Kind::Where,
        10_000,
        Some((
            15_000,
            Answer::Where {
                zone: "city".into(),
                room: "city:square".into(),
                shard: "shard-a".into(),
            },
        )),
    ));
    let calm = evidence(vec![b.clone()]);
    assert_eq!(kinds(&check(&calm)), ["late where"]);
    // A kill from 9 s to 13 s: the bound runs to 13 + 2 = 15 s.
    let mut faulty = evidence(vec![b]);
    faulty.faults.push(fault(1, FaultKind::Kill, 9_000, 13_000));
    assert!(check(&faulty).passed(), "{:?}", kinds(&check(&faulty)));
}

#[test]
fn refusals_must_speak_the_contract() {
    let mut b = bot(1, &[1]);
    let m = Kind::Move {
        from: "city:east_gate".into(),
        dir: "east".into(),
        to: "hills:foot".into(),
    };
    b.commands.push(command(
        m.clone(),
        20_000,
        Some((
            20_100,
            Answer::OffContract {
                line: "The way is closed for now; try again later.".into(),
            },
        )),
    ));
    b.commands.push(command(
        m.clone(),
        30_000,
        Some((
            30_100,
            Answer::Refused {
                line: "You can't go that way.".into(),
            },
        )),
    ));
    // Sent just before the drain began, refused during it: the drain's.
    b.commands.insert(
        0,
        command(
            m,
            18_990,
            Some((
                19_500,
                Answer::Refused {
                    line: "You can't go that way.".into(),
                },
            )),
        ),
    );
    let mut e = evidence(vec![b]);
    e.faults.push(fault(1, FaultKind::Drain, 19_000, 21_000));
    // The contract's refusal during the drain is fine; 9 s after it, with
    // nothing down, it is not; the off-contract one never is.
    assert_eq!(
        kinds(&check(&e)),
        [
            "refusal off contract",
            "move refused with no fault in progress"
        ]
    );
    // Unless the bot was elsewhere than it believed, as its next `where`
    // shows: then it is a note.
    e.bots[0].commands.push(command(
        Kind::Where,
        30_200,
        Some((
            30_210,
            Answer::Where {
                zone: "city".into(),
                room: "city:tavern".into(),
                shard: "shard-a".into(),
            },
        )),
    ));
    let v = check(&e);
    assert_eq!(kinds(&v), ["refusal off contract"]);
    assert!(
        v.checks[1].notes[0].contains("believed it was in city:east_gate"),
        "{:?}",
        v.checks[1].notes
    );
}

#[test]
fn an_outage_line_at_login_is_allowed_only_during_a_fault() {
    let mut b = bot(1, &[1]);
    let refused = |at| {
        Some((
            at,
            Answer::LoginRefused {
                line: "The world is not reachable right now; please try again shortly.".into(),
            },
        ))
    };
    b.commands
        .push(command(Kind::Login, 20_000, refused(20_100)));
    b.commands
        .push(command(Kind::Login, 40_000, refused(40_100)));
    // `Login failed` says the password was wrong: never for the bots'.
    let failed = Answer::LoginRefused {
        line: "Login failed: the world cannot be reached; try again.".into(),
    };
    b.commands
        .push(command(Kind::Login, 20_500, Some((20_600, failed))));
    let mut e = evidence(vec![b]);
    e.faults.push(fault(1, FaultKind::Redis, 19_000, 21_000));
    assert_eq!(
        kinds(&check(&e)),
        [
            "login refused while nothing was down",
            "`Login failed` for the right password"
        ]
    );
}

#[test]
fn a_generation_or_epoch_going_back_is_flagged() {
    let mut e = evidence(vec![bot(1, &[1])]);
    e.samples.zone_gen.insert(
        "city".into(),
        vec![(0, Some(3)), (1_000, Some(4)), (2_000, Some(3))],
    );
    e.samples
        .lease_gen
        .insert("city".into(), vec![(0, Some(3)), (3_000, Some(5))]);
    e.samples.owner_epoch.insert(
        NAME.into(),
        vec![(0, Some(7)), (1_000, None), (2_000, Some(6))],
    );
    let k = kinds(&check(&e));
    assert!(
        k.contains(&"zone generation went back".to_string()),
        "{k:?}"
    );
    assert!(k.contains(&"owner epoch went back".to_string()), "{k:?}");
    assert!(
        k.contains(&"lease generation above the counter".to_string()),
        "{k:?}"
    );
    assert_eq!(k.len(), 3, "{k:?}");
}

#[test]
fn a_closed_connection_needs_a_gate_crash_or_a_stalled_reader() {
    let mut b = bot(1, &[1]);
    b.sessions[0].closed = Some((50_000, CloseCause::Remote));
    let mut stalled = b.clone();
    assert_eq!(
        kinds(&check(&evidence(vec![b]))),
        ["connection closed by the gate"]
    );
    stalled.pauses.push((40_000, 49_000));
    assert!(check(&evidence(vec![stalled])).passed());
}

#[test]
fn the_end_state_must_agree_with_status_and_the_durable_rows() {
    let mut b = bot(2, &[1, 2]);
    b.last.durable = Some(vec![journal_text(NAME, 1)]);
    b.last.location = Some(("city".into(), "city:tavern".into(), "shard-b".into()));
    let mut e = evidence(vec![b]);
    e.end.processes.push(ProcessEnd {
        name: "gate#2".into(),
        pid: 7,
        alive: false,
    });
    e.samples
        .rss_kib
        .insert("shard-a#1".into(), vec![(0, 10_000), (50_000, 200_000)]);
    let k = kinds(&check(&e));
    for want in [
        "process not alive",
        "RSS grew",
        "position disagrees",
        "durable journal differs",
        "status: owner disagrees with where",
    ] {
        assert!(k.contains(&want.to_string()), "{want}: {k:?}");
    }
}
