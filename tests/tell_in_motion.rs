//! A `tell` to a player who is moving between shards, end to end (issue
//! 20): a real `redis-server`, two keyed `telos-world` shards (the city on
//! `shard-a`, every other zone on `shard-b`) and a real `telos-gate`,
//! players as [`Bot`]s over TCP.
//!
//! Alice, in the city, tells Bob numbered lines, one every few
//! milliseconds without waiting for answers, while Bob walks back and
//! forth across the shard boundary (every step a handoff), or while his
//! shard drains under him; and once while his shard is stopped for a few
//! of her retry rounds. Every tell is answered to Alice exactly once —
//! delivered, not online, or could not be reached; never silence, never
//! twice — and each tell Alice was told went reached Bob exactly once,
//! each one she was told did not go never reached him.

use std::collections::BTreeMap;
use std::time::Duration;

use telos_testkit::bot::Bot;
use telos_testkit::wait::until_progress;
use telos_testkit::world::{opposite, path_to_zone, start_room};

mod support;
use support::two_shards::TwoShards;

const PASSWORD: &str = "correct horse";
/// No new answer for this long on a loaded machine (a tell's own
/// deadline is about 2 s): a tell went unanswered.
const WAIT: Duration = Duration::from_secs(30);
/// Boundary crossings Bob makes while Alice talks.
const CROSSINGS: usize = 40;
/// Between two of Alice's tells: several land in every handoff.
const PACE: Duration = Duration::from_millis(20);
/// How long the listener's shard is stopped: about three of the speaker's
/// retry rounds (250 ms each), well inside the tell's deadline (1.75 s).
const HELD_UP: Duration = Duration::from_millis(750);
/// `who` asked this many times, 100 ms apart, for a player who just
/// arrived (the online list is republished within a second).
const LISTED_TRIES: usize = 100;
/// Tells at least; Alice keeps telling until Bob has done his walking.
const MIN_TELLS: usize = 50;

/// Alice says more than a conversation does; the chat limit is not what
/// this tests.
const UNLIMITED_CHAT: [&str; 4] = [
    "--chat-burst-bytes",
    "100000000",
    "--chat-bytes-per-sec",
    "100000000",
];

fn start() -> anyhow::Result<TwoShards> {
    TwoShards::start(&UNLIMITED_CHAT, &[])
}

/// How a tell was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Answer {
    Delivered,
    NotOnline,
    Unreachable,
}

fn answer_of(line: &str, text: &str) -> Option<Answer> {
    if line == format!("You tell Bob, '{text}'") {
        Some(Answer::Delivered)
    } else if line == "No one called Bob is online." {
        Some(Answer::NotOnline)
    } else if line.starts_with("Bob could not be reached") {
        Some(Answer::Unreachable)
    } else {
        None
    }
}

/// Whether a line answers some tell to Bob.
fn is_answer(line: &str) -> bool {
    line.starts_with("You tell Bob, '")
        || line == "No one called Bob is online."
        || line.starts_with("Bob could not be reached")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tell_to_a_player_crossing_shards_is_answered_once_and_heard_once()
-> anyhow::Result<()> {
    let cluster = start()?;
    let addr = cluster.gate.addr.clone();
    let to_forest = path_to_zone(&start_room(), "forest");
    let (last, before) = to_forest.split_last().expect("a path into the forest");

    let mut alice = Bot::create_at(&addr, "Alice", PASSWORD).await?;
    let mut bob = Bot::create_at(&addr, "Bob", PASSWORD).await?;
    for dir in before {
        bob.command(dir).await?;
    }
    let (_, _, shard) = bob.where_().await?;
    assert_eq!(shard, "shard-a", "Bob waits at the boundary");

    // Bob crosses and comes back, again and again: each step a handoff.
    let there = last.clone();
    let back = opposite(last).to_string();
    let walker = tokio::spawn(async move {
        for i in 0..CROSSINGS {
            let dir = if i % 2 == 0 { &there } else { &back };
            let text = bob.command(dir).await?;
            anyhow::ensure!(
                !text.contains("You can't go that way"),
                "Bob could not go {dir}: {text:?}"
            );
        }
        Ok(bob)
    });

    let sent = tell_until(&mut alice, || walker.is_finished()).await?;
    let mut bob = walker.await??;
    let outcomes = check_answers(&mut alice, &mut bob, &sent).await?;
    eprintln!(
        "{} tells while Bob crossed {CROSSINGS} times: {outcomes:?}",
        sent.len()
    );
    assert!(
        outcomes.get(&Answer::Delivered).copied().unwrap_or(0) > 0,
        "some tells reach a player on the move"
    );
    Ok(())
}

/// Alice tells Bob a numbered line every [`PACE`], not waiting for answers
/// (tells are in flight through every moment of every move), until `done`
/// and at least [`MIN_TELLS`]; the lines told.
async fn tell_until(alice: &mut Bot, done: impl Fn() -> bool) -> anyhow::Result<Vec<String>> {
    let mut sent = Vec::new();
    while sent.len() < MIN_TELLS || !done() {
        let text = format!("line {}", sent.len());
        alice.send(&format!("tell bob {text}")).await?;
        sent.push(text);
        tokio::time::sleep(PACE).await;
    }
    Ok(sent)
}

/// Every tell in `sent` answered to Alice exactly once; each one she was
/// told went heard by Bob exactly once, each other one never. How they
/// were answered.
async fn check_answers(
    alice: &mut Bot,
    bob: &mut Bot,
    sent: &[String],
) -> anyhow::Result<BTreeMap<Answer, usize>> {
    // Every tell answered: wait while answers keep coming.
    let answered = |alice: &Bot| alice.transcript().lines().filter(|l| is_answer(l)).count();
    until_progress("every tell answered", WAIT, || {
        let n = answered(alice);
        Ok((n < sent.len()).then_some(n))
    })
    .await?;
    // Late duplicates would be in by now: a tell's retries end within its
    // deadline, and both have applied everything sent.
    tokio::time::sleep(Duration::from_secs(3)).await;
    alice.sync().await?;
    bob.sync().await?;
    let said = alice.transcript();
    let answers: Vec<&str> = said.lines().filter(|l| is_answer(l)).collect();
    assert_eq!(
        answers.len(),
        sent.len(),
        "one answer per tell; Alice's transcript:\n{said}"
    );
    let heard = bob.transcript();
    let mut outcomes: BTreeMap<Answer, usize> = BTreeMap::new();
    for text in sent {
        let delivered = answers
            .iter()
            .filter(|l| **l == format!("You tell Bob, '{text}'"))
            .count();
        assert!(
            delivered <= 1,
            "{text:?} answered as delivered {delivered} times"
        );
        let line = format!("Alice tells you, '{text}'");
        let times = heard.lines().filter(|l| *l == line).count();
        assert_eq!(
            times, delivered,
            "{text:?}: Alice was told it went {delivered} times, Bob heard it {times} times; \
             Bob's transcript:\n{heard}\nAlice's:\n{said}"
        );
        if delivered == 1 {
            *outcomes.entry(Answer::Delivered).or_default() += 1;
        }
    }
    for line in &answers {
        if let Some(a @ (Answer::NotOnline | Answer::Unreachable)) = answer_of(line, "") {
            *outcomes.entry(a).or_default() += 1;
        }
    }
    Ok(outcomes)
}

/// Bob's shard drains (SIGTERM) while Alice tells him: he moves to the
/// other shard in place, and every tell is still answered once and heard
/// once if it was told as heard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tell_to_a_player_whose_shard_drains_is_answered_once_and_heard_once()
-> anyhow::Result<()> {
    let mut cluster = start()?;
    let addr = cluster.gate.addr.clone();
    let mut alice = Bot::create_at(&addr, "Alice", PASSWORD).await?;
    let mut bob = Bot::create_at(&addr, "Bob", PASSWORD).await?;
    for dir in path_to_zone(&start_room(), "forest") {
        bob.command(&dir).await?;
    }
    let (_, _, shard) = bob.where_().await?;
    assert_eq!(shard, "shard-b");

    let mut shard_b = cluster.shards.remove(1);
    let drain = tokio::task::spawn_blocking(move || {
        let status = shard_b.stop_with(libc::SIGTERM, Duration::from_secs(120));
        (shard_b, status)
    });
    let sent = tell_until(&mut alice, || drain.is_finished()).await?;
    let (_shard_b, status) = drain.await?;
    assert!(status?.success(), "shard-b drained and exited cleanly");
    let outcomes = check_answers(&mut alice, &mut bob, &sent).await?;
    eprintln!(
        "{} tells while Bob's shard drained: {outcomes:?}",
        sent.len()
    );
    let (_, _, shard) = bob.where_().await?;
    assert_eq!(shard, "shard-a", "Bob moved with the drain");
    Ok(())
}

/// A shard slow to take a tell (stopped for a few of the speaker's retry
/// rounds) still gives it to the listener once: every round's retry that
/// queued up behind the first is the same tell, not a new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tell_held_up_at_the_listeners_shard_is_heard_once() -> anyhow::Result<()> {
    let cluster = start()?;
    let addr = cluster.gate.addr.clone();
    let mut alice = Bot::create_at(&addr, "Alice", PASSWORD).await?;
    let mut bob = Bot::create_at(&addr, "Bob", PASSWORD).await?;
    for dir in path_to_zone(&start_room(), "forest") {
        bob.command(&dir).await?;
    }
    let (_, _, shard) = bob.where_().await?;
    assert_eq!(shard, "shard-b");
    // Until the online list (shard-b's part of it) names Bob: the tell is
    // to a player every shard knows is online.
    let listed = |who: &str| {
        who.lines()
            .any(|l| l.starts_with("Bob ") && l.contains('['))
    };
    let mut who = String::new();
    for _ in 0..LISTED_TRIES {
        who = alice.command("who").await?;
        if listed(&who) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(listed(&who), "Bob never listed online: {who}");
    // shard-b stops for about four of the speaker's rounds (well inside
    // the tell's deadline), then goes on.
    let shard_b = &cluster.shards[1];
    shard_b.signal(libc::SIGSTOP);
    alice.send("tell bob are you there").await?;
    tokio::time::sleep(HELD_UP).await;
    shard_b.signal(libc::SIGCONT);

    let lines = alice.read_until(is_answer, WAIT).await?;
    let answer = lines.last().expect("the answer").clone();
    tokio::time::sleep(Duration::from_secs(3)).await;
    bob.sync().await?;
    let heard = bob
        .transcript()
        .lines()
        .filter(|l| *l == "Alice tells you, 'are you there'")
        .count();
    let delivered = usize::from(answer == "You tell Bob, 'are you there'");
    assert_eq!(
        heard,
        delivered,
        "Alice was told {answer:?}; Bob heard it {heard} times:\n{}",
        bob.transcript()
    );
    alice.sync().await?;
    let answers = alice.transcript().lines().filter(|l| is_answer(l)).count();
    assert_eq!(answers, 1, "one answer:\n{}", alice.transcript());
    Ok(())
}
