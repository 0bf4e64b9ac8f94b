//! A paused shard replaced at the same address (issue 17): shard-a is
//! stopped (SIGSTOP) and a second `telos-world --shard-id shard-a` starts
//! behind the same advertised address (a service address, a proxy — here
//! a testkit [`Proxy`] that leads new connections to the new process).
//!
//! The gate watches the registry for shards that stopped heartbeating; the
//! replacement heartbeats under the same id *and* address, so the entry
//! never lapsed and the gate kept its players' links on the paused
//! process: their commands waited for the HTTP/2 keepalive (~20 s) or the
//! predecessor's SIGCONT. The registry entry now carries the process
//! incarnation: a newer one at an address the gate has links to makes
//! those links suspect, the probe finds the predecessor silent, and the
//! players resume on the replacement — answered within the lease TTL plus
//! 2 s (issue 17's rule, with slack for a loaded machine), every journal
//! line exactly once.

mod support;

use std::time::Duration;

use support::rows::wait_journal;
use telos_redis::store::Store;
use telos_testkit::RedisServer;
use telos_testkit::bot::Bot;
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{Proc, start_keyed_gate, start_keyed_world};
use telos_testkit::proxy::Proxy;
use telos_testkit::redis::free_port;
use tokio::time::Instant;

const PASSWORD: &str = "correct horse";
/// The shards' lease TTL (the default): the replacement serves city once
/// the paused predecessor's lease has lapsed.
const LEASE_TTL: Duration = Duration::from_secs(6);
/// The rule's margin, and slack on top for a loaded machine: a hang check.
const MARGIN: Duration = Duration::from_secs(2);
const SLACK: Duration = Duration::from_secs(4);
/// Bounds a broken build's waits, not a timing claim.
const SETTLE: Duration = Duration::from_secs(60);
const ZONES_A: [&str; 2] = ["city", "docks"];

/// SIGCONTs the paused process however the test ends.
struct Continue<'a>(&'a Proc);

impl Drop for Continue<'_> {
    fn drop(&mut self) {
        self.0.signal(libc::SIGCONT);
    }
}

fn world_a(redis: &str, keys: &TempKeys, listen: &str, front: &str) -> anyhow::Result<Proc> {
    start_keyed_world(
        "shard-a",
        redis,
        &ZONES_A,
        keys.path(),
        Some(listen),
        &["--advertise-addr", front],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn players_leave_a_paused_process_replaced_at_its_address() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let listen_1 = format!("127.0.0.1:{}", free_port());
    let front = Proxy::start("127.0.0.1:0", &listen_1, None).await?;
    let front_addr = front.addr.to_string();
    let mut first = world_a(&redis.url, &keys, &listen_1, &front_addr)?;
    let _b = start_keyed_world(
        "shard-b",
        &redis.url,
        &["forest", "hills", "keep", "marsh"],
        keys.path(),
        None,
        &[] as &[&str],
    )?;
    let gate = start_keyed_gate(&redis.url, keys.path(), &[])?;
    let store = Store::connect(&redis.url).await?;

    let mut ann = Bot::create_at(&gate.addr, "Ann", PASSWORD).await?;
    ann.set_timeout(SETTLE);
    let (zone, _, shard) = ann.where_().await?;
    assert_eq!((zone.as_str(), shard.as_str()), ("city", "shard-a"));
    let mut written = vec!["ann before".to_string()];
    ann.command("journal ann before").await?;
    wait_journal(&store, "Ann", &written, SETTLE).await?;

    // The first process stalls; a replacement starts behind its address.
    first.signal(libc::SIGSTOP);
    let cont = Continue(&first);
    let listen_2 = format!("127.0.0.1:{}", free_port());
    front.set_upstream(&listen_2);
    let _second = world_a(&redis.url, &keys, &listen_2, &front_addr)?;
    let replaced = Instant::now();

    let text = "ann during".to_string();
    let answer = ann.command(&format!("journal {text}")).await?;
    written.push(text);
    let took = replaced.elapsed();
    assert!(
        answer.contains("Noted."),
        "the journal line was not answered as noted: {answer:?}"
    );
    let bound = LEASE_TTL + MARGIN + SLACK;
    assert!(
        took <= bound,
        "answered {took:?} after the replacement started (bound {bound:?}): the gate kept the \
         player on the paused process"
    );
    let (zone, _, shard) = ann.where_().await?;
    assert_eq!((zone.as_str(), shard.as_str()), ("city", "shard-a"));

    // The first wakes up: superseded, it stops without writing.
    drop(cont);
    first.wait_log("superseded", SETTLE).await?;
    let status = first.stop_with(0, SETTLE)?;
    assert!(!status.success(), "a superseded process exits non-zero");
    let text = "ann after".to_string();
    ann.command(&format!("journal {text}")).await?;
    written.push(text);
    assert_eq!(ann.journal_list().await?, written);
    wait_journal(&store, "Ann", &written, SETTLE).await?;
    assert!(!ann.is_closed(), "the player's socket closed");
    Ok(())
}
