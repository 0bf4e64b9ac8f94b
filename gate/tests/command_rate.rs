//! One player's commands are held to a rate: a burst goes at once, the
//! rest wait their turn in the gate (and the socket), in order, none lost,
//! and the player is told once per flood.

mod support;

use std::time::{Duration, Instant};

use support::*;
use telos_gate::notices::command_throttled;

const BURST: u32 = 10;
const PER_SEC: u32 = 20;
const LINES: u64 = 50;

async fn flooder() -> (
    Player,
    FakeSession,
    FakeShard,
    tokio_util::sync::CancellationToken,
) {
    let mut cfg = test_config();
    cfg.edge.command_burst = BURST;
    cfg.edge.commands_per_sec = PER_SEC;
    let mut shard = FakeShard::start().await;
    let (gate, stop) = start_gate(cfg, &[&shard.addr]).await;
    let mut p = Player::connect(gate).await;
    p.expect("connect <name> <password>").await;
    p.send("connect Flooder hunter2222\r\n").await;
    let (s, _) = accept_login(&mut shard, "Flooder", "c").await;
    p.expect("Welcome, Flooder").await;
    (p, s, shard, stop)
}

#[tokio::test]
async fn a_flood_of_commands_waits_its_turn_in_order_and_loses_nothing() {
    let (mut p, mut s, _shard, _stop) = flooder().await;
    let flood: String = (1..=LINES).map(|i| format!("journal {i}\r\n")).collect();
    let started = Instant::now();
    p.send(&flood).await;
    for i in 1..=LINES {
        let (n, line) = s.input().await;
        assert_eq!((n, line.as_str()), (i, format!("journal {i}").as_str()));
        s.input_ack(n).await;
        s.durable_ack(n).await;
    }
    // A lower bound, so a busy machine cannot fail it: the lines past the
    // burst came no faster than the rate.
    let floor = Duration::from_secs_f64((LINES - u64::from(BURST)) as f64 / f64::from(PER_SEC));
    assert!(
        started.elapsed() >= floor.mul_f64(0.9),
        "{LINES} commands in {:?}: the rate was not held",
        started.elapsed()
    );
    let notice = as_shown(&command_throttled(PER_SEC));
    p.expect(&notice).await;
    // Told once for the whole flood, and nothing else was said.
    s.output("done\n").await;
    let rest = p.expect("done").await;
    assert!(!rest.contains(&notice), "told twice: {rest:?}");
}

#[tokio::test]
async fn a_player_within_the_rate_is_never_told_and_never_waits() {
    let (mut p, mut s, _shard, _stop) = flooder().await;
    // The burst, then one a tick below the rate: nothing is held.
    for i in 1..=u64::from(BURST) + 5 {
        p.send(&format!("look {i}\r\n")).await;
        let (n, _) = s.input().await;
        assert_eq!(n, i);
        s.input_ack(n).await;
        s.durable_ack(n).await;
        if i >= u64::from(BURST) {
            tokio::time::sleep(Duration::from_millis(2000 / u64::from(PER_SEC))).await;
        }
    }
    s.output("done\n").await;
    let text = p.expect("done").await;
    assert!(!text.contains("*** You are sending"), "{text:?}");
}
