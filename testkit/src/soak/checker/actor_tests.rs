//! The checker's issue-17 properties on synthetic histories: one actor per
//! zone, generations rising across owners and processes, and the answer
//! bound of defect 5.

use super::super::clock::Ms;
use super::super::config::FaultKind;
use super::super::history::*;
use super::tests::{bot, evidence, fault, kinds};
use super::*;

fn serving(process: &str, zone: &str, actors: u64, generation: u64) -> Serving {
    Serving {
        process: process.into(),
        zone: zone.into(),
        actors,
        generation,
    }
}

/// Scrapes every 500 ms from `from` to `to` (ms) that all see `serving`.
fn scrapes(from: Ms, to: Ms, serving: &[Serving]) -> Vec<ActorRound> {
    (from..=to)
        .step_by(500)
        .map(|at| ActorRound {
            at,
            serving: serving.to_vec(),
            silent: Vec::new(),
        })
        .collect()
}

#[test]
fn a_zone_served_twice_for_longer_than_a_handover_is_flagged() {
    let mut e = evidence(vec![bot(1, &[1])]);
    let one = [serving("shard-a#1", "city", 1, 3)];
    let handover = [
        serving("shard-a#1", "city", 1, 3),
        serving("shard-b#1", "city", 1, 4),
    ];
    // A handover seen for 1 s: allowed.
    e.samples.actors = [scrapes(0, 2_000, &one), scrapes(2_500, 3_500, &handover)].concat();
    e.samples
        .actors
        .extend(scrapes(4_000, 5_000, &[serving("shard-b#1", "city", 1, 4)]));
    assert!(check(&e).passed(), "{:?}", kinds(&check(&e)));
    // Two processes for 3 s: one violation for the stretch.
    e.samples.actors = [scrapes(0, 2_000, &one), scrapes(2_500, 5_500, &handover)].concat();
    assert_eq!(kinds(&check(&e)), ["one zone served by two processes"]);
    // Two actors in one process (issue 17, defect 1), for good.
    e.samples.actors = scrapes(0, 10_000, &[serving("shard-b#1", "ring3", 2, 3)]);
    assert_eq!(kinds(&check(&e)), ["two actors for one zone on one shard"]);
}

#[test]
fn a_generation_reused_by_a_new_process_or_served_after_a_newer_one_is_flagged() {
    let mut e = evidence(vec![bot(1, &[1])]);
    // shard-a#1 paused at gen 3; shard-a#2 started and served gen 3 too
    // (issue 17, defect 2).
    e.samples.actors = [
        scrapes(0, 1_000, &[serving("shard-a#1", "city", 1, 3)]),
        scrapes(1_500, 2_000, &[serving("shard-a#2", "city", 1, 3)]),
    ]
    .concat();
    assert_eq!(
        kinds(&check(&e)),
        ["one generation served by two processes"]
    );
    // A new process at a new generation: fine; the old one serving its
    // old generation again afterwards: flagged.
    e.samples.actors = [
        scrapes(0, 1_000, &[serving("shard-a#1", "city", 1, 3)]),
        scrapes(1_500, 2_000, &[serving("shard-a#2", "city", 1, 4)]),
    ]
    .concat();
    assert!(check(&e).passed(), "{:?}", kinds(&check(&e)));
    // A process woken from a pause answers one scrape before its watchdog
    // fences it: not two writers (its actor refuses past its deadline).
    let shown = e.samples.actors.clone();
    e.samples
        .actors
        .extend(scrapes(2_500, 2_500, &[serving("shard-c#1", "city", 1, 2)]));
    assert!(check(&e).passed(), "{:?}", kinds(&check(&e)));
    // Still serving its old generation 3 s on: flagged.
    e.samples.actors = shown;
    e.samples
        .actors
        .extend(scrapes(2_500, 5_500, &[serving("shard-c#1", "city", 1, 2)]));
    assert_eq!(kinds(&check(&e)), ["zone served under an older generation"]);
}

#[test]
fn a_new_lease_owner_must_hold_a_higher_generation() {
    let mut e = evidence(vec![bot(1, &[1])]);
    let lease = |o: &str, g: u64| Some((o.to_string(), g));
    e.samples.lease.insert(
        "city".into(),
        vec![
            (0, lease("shard-a", 3)),
            (1_000, None),
            (2_000, lease("shard-b", 4)),
        ],
    );
    assert!(check(&e).passed(), "{:?}", kinds(&check(&e)));
    e.samples
        .lease
        .get_mut("city")
        .unwrap()
        .push((3_000, lease("shard-a", 4)));
    assert_eq!(
        kinds(&check(&e)),
        ["new lease owner without a higher generation"]
    );
}

#[test]
fn an_answer_may_wait_the_lease_ttl_beyond_a_fault_on_a_lease_only() {
    let list = [
        fault(1, FaultKind::Kill, 10_000, 14_000),
        fault(2, FaultKind::Transfer, 30_000, 31_000),
        // Overlapping windows count once.
        fault(3, FaultKind::Gate, 50_000, 54_000),
        fault(4, FaultKind::Gate, 52_000, 56_000),
    ];
    let f = windows::Faults::new(&list, 100_000);
    // Sent at 9 s: 2 s, the kill's 4 s, the TTL's 6 s.
    assert_eq!(
        f.answer_deadline(9_000, 2_000),
        9_000 + 2_000 + 4_000 + 6_000
    );
    assert_eq!(f.deadline(9_000, 2_000), 9_000 + 2_000 + 4_000);
    assert_eq!(f.answer_deadline(29_500, 2_000), 29_500 + 2_000 + 1_000);
    assert_eq!(f.answer_deadline(49_000, 2_000), 49_000 + 2_000 + 6_000);
    assert_eq!(f.answer_deadline(1_000, 2_000), 3_000);
}
