//! Reachability is part of the lease (issue 30): a shard cut off from the
//! gate (and its peers) but not from Redis renewed its leases for the
//! whole cut, and its players heard nothing for as long as it lasted
//! (15.1 s of silence for a 15 s cut). Now the gate, which reaches the
//! other shard, marks the cut one unreachable in Redis; its renewals are
//! refused, its zones fence and go to the peer, and its players resume
//! there.
//!
//! Through the soak's cluster (every shard behind a link proxy that tells
//! the gate's connections from the peers'): a player in `city` (served by
//! shard-a) types `look`; shard-a is cut from the gate — and from its
//! peer, or not — for far longer than the bound; the `look` is answered
//! within cut detection + lease TTL + 2 s, `city` is then served by
//! shard-b, shard-a fenced the zone before shard-b claimed it (from the
//! logs), and once healed shard-a takes zones again.

use std::time::Duration;

use telos_testkit::bot::Bot;
use telos_testkit::proxy::LinkMode;
use telos_testkit::soak::cluster::Cluster;
use telos_testkit::soak::config::{CUT_DETECTION, LEASE_TTL};
use tokio::time::Instant;

/// The zone of the start room, served by shard-a (the soak's round robin
/// gives shard-a the first starter zone).
const ZONE: &str = "city";
/// The bound: cut detection + lease TTL + 2 s.
fn bound() -> Duration {
    CUT_DETECTION + LEASE_TTL + Duration::from_secs(2)
}
/// How long the cut lasts: far past the bound, so an answer within it
/// cannot be the heal's.
fn cut_for() -> Duration {
    bound() * 2
}

#[derive(Clone, Copy, Debug)]
enum Cut {
    /// The gate's link and the peers' links: the shard reaches Redis only.
    GateAndPeers,
    /// Only the gate's link.
    Gate,
}

/// The soak's (and this test's) detection bound is the sum of the real
/// constants it names: a watch period and a probe's timeout (the look that
/// finds the cut), the mark's bound, and one more round (the report that
/// crosses the bound). A change to any of them must move the bound.
#[test]
fn cut_detection_is_the_gate_s_rounds_and_the_mark_s_bound() {
    let round = telos_gate::liveness::WATCH_PERIOD + telos_gate::probe::PROBE_TIMEOUT;
    assert_eq!(
        CUT_DETECTION,
        round + telos_redis::directory::reach::REACH_BOUND + round
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_cut_from_the_gate_and_its_peers_gives_its_zones_up() -> anyhow::Result<()> {
    cut_and_heal(Cut::GateAndPeers).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_cut_from_the_gate_only_gives_its_zones_up() -> anyhow::Result<()> {
    cut_and_heal(Cut::Gate).await
}

async fn cut_and_heal(cut: Cut) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let cluster = tokio::task::block_in_place(|| Cluster::start(dir.path(), 2, "info", false))?;
    anyhow::ensure!(
        owner(&cluster, ZONE)? == "shard-a",
        "city starts on shard-a"
    );
    let mut bot = Bot::create_at(&cluster.gate_addr, "Cutoff", "correct horse").await?;
    bot.set_timeout(cut_for() * 2);
    bot.command("look").await?;

    let (a, b) = (&cluster.shards[0], &cluster.shards[1]);
    a.front.set_for("gate", LinkMode::Blackhole);
    if let Cut::GateAndPeers = cut {
        a.front.set_for(&b.id, LinkMode::Blackhole);
        b.front.set_for(&a.id, LinkMode::Blackhole);
    }
    let cut_at = Instant::now();
    let look = bot
        .command("look")
        .await
        .map_err(|e| e.context(logs(&cluster)))?;
    let answered_in = cut_at.elapsed();
    eprintln!(
        "{cut:?}: `look` answered {answered_in:?} into a {:?} cut: {look:?}",
        cut_for()
    );
    anyhow::ensure!(look.contains("Market Square"), "look: {look:?}");
    assert!(
        answered_in < bound(),
        "{cut:?}: `look` answered after {answered_in:?}, the bound is {:?} (the cut lasts {:?})\nshard-a:\n{}",
        bound(),
        cut_for(),
        cluster.shard_log(0)
    );
    assert_eq!(owner(&cluster, ZONE)?, "shard-b", "{cut:?}: city moved");
    let log_a = cluster.shard_log(0);
    assert!(
        log_a.contains("giving every zone up"),
        "{cut:?}: shard-a never said it was cut off:\n{log_a}"
    );
    fenced_before_claimed(&log_a, &cluster.shard_log(1))?;
    assert_eq!(state(&cluster, "shard-a")?, "cut_off");

    tokio::time::sleep_until(cut_at + cut_for()).await;
    a.front.heal();
    b.front.heal();
    let healed = Instant::now();
    while state(&cluster, "shard-a")? != "live" {
        anyhow::ensure!(
            healed.elapsed() < bound(),
            "shard-a not live again after the heal:\n{}",
            cluster.shard_log(0)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        cluster
            .shard_log(0)
            .contains("the gates reach this shard again")
    );
    bot.command("look").await?;
    Ok(())
}

/// Every process's log, for a failure's message.
fn logs(cluster: &Cluster) -> String {
    format!(
        "gate:\n{}\nshard-a:\n{}\nshard-b:\n{}",
        cluster.gate_log(),
        cluster.shard_log(0),
        cluster.shard_log(1)
    )
}

/// Never two writers: shard-a's fence of the zone is logged before
/// shard-b's claim of it (both logs carry the same machine's clock).
fn fenced_before_claimed(log_a: &str, log_b: &str) -> anyhow::Result<()> {
    let fenced = stamp_of(log_a, |l| l.contains("zone fenced") && names_zone(l))
        .ok_or_else(|| anyhow::anyhow!("shard-a never fenced {ZONE}:\n{log_a}"))?;
    let claimed = stamp_of(log_b, |l| {
        l.contains("claimed an orphaned zone") && names_zone(l)
    })
    .ok_or_else(|| anyhow::anyhow!("shard-b never claimed {ZONE}:\n{log_b}"))?;
    anyhow::ensure!(
        fenced <= claimed,
        "shard-b claimed {ZONE} at {claimed} before shard-a fenced it at {fenced}"
    );
    Ok(())
}

/// Whether a log line names [`ZONE`] (as `zone=city` or `zone="city"`).
fn names_zone(line: &str) -> bool {
    line.contains(&format!("zone={ZONE} ")) || line.contains(&format!("zone=\"{ZONE}\""))
}

/// The timestamp (first word, RFC 3339 UTC: ordered as text) of the first
/// line `which` picks.
fn stamp_of(log: &str, which: impl Fn(&str) -> bool) -> Option<String> {
    log.lines()
        .find(|l| which(l))
        .and_then(|l| l.split_whitespace().next())
        .map(str::to_string)
}

fn owner(cluster: &Cluster, zone: &str) -> anyhow::Result<String> {
    let status = tokio::task::block_in_place(|| cluster.status())?;
    Ok(status
        .zones
        .iter()
        .find(|z| z.id == zone)
        .and_then(|z| z.owner.clone())
        .unwrap_or_default())
}

fn state(cluster: &Cluster, shard: &str) -> anyhow::Result<String> {
    let status = tokio::task::block_in_place(|| cluster.status())?;
    Ok(status
        .shards
        .iter()
        .find(|s| s.id == shard)
        .map(|s| s.state.clone())
        .unwrap_or_default())
}
