//! The soak's overlap mode transfers a zone that is between owners
//! (issue 17; overlap seed 749446916: `transfer city` 0.4 s after a Redis
//! restart, refused by telosctl — "zone has no live owner to transfer
//! from" — and counted as a failed fault step). A transfer moves a zone
//! from its owner, so the driver waits (bounded) for the zone to have a
//! live one (listed in the registry), as an operator would, rather than
//! move it from an owner that is gone or fail.
//!
//! Made exact: the zone's owner is paused past the lease TTL, so when the
//! transfer comes (after the driver's 5 s warm-up) the zone's owner no
//! longer heartbeats, until its lease lapses and a peer adopts the zone.
//! (The soak's case — no lease at all after a Redis restart — is not made
//! here: peers adopt an unleased zone within a second, so it cannot be
//! hit on purpose; the rule is the same: move a zone only from a live
//! owner.)

use std::time::Duration;

use telos_testkit::soak::clock::Clock;
use telos_testkit::soak::cluster::Cluster;
use telos_testkit::soak::config::{FaultKind, Mode};
use telos_testkit::soak::faults::Driver;
use telos_testkit::soak::probe::Probe;
use telos_testkit::soak::schedule::{Planned, Schedule};
use tokio::time::Instant;

/// Past the lease TTL (6 s) and a peer's adoption.
const PAUSE: Duration = Duration::from_secs(14);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transfer_of_a_zone_between_owners_waits_for_its_new_owner() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut cluster = tokio::task::block_in_place(|| Cluster::start(dir.path(), 3, "info", false))?;
    let shards: Vec<String> = cluster.shards.iter().map(|s| s.id.clone()).collect();
    let probe = Probe::connect(&cluster.probe_url(), cluster.zones.clone(), shards).await?;
    let zone_pick = cluster
        .zones
        .iter()
        .position(|z| z == "city")
        .expect("city is a starter zone") as u32;
    let owner = probe.view().await?.owners["city"]
        .clone()
        .expect("city is leased");
    let i = cluster.shard_index(&owner).expect("a shard of the cluster");
    let pid = cluster.shard_pid(i).expect("running");
    // SAFETY: kill(2) on a child of this test.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    // Woken once its zones are adopted, so the cluster is healthy again.
    let wake = tokio::spawn(async move {
        tokio::time::sleep(PAUSE).await;
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGCONT) };
    });

    let schedule = Schedule {
        faults: vec![Planned {
            id: 1,
            calm_before: Duration::ZERO,
            kind: FaultKind::Transfer,
            pick: 0,
            zone_pick,
            hold: Duration::ZERO,
            follow: false,
        }],
    };
    let mut driver = Driver {
        cluster: &mut cluster,
        probe: &probe,
        clock: Clock::start(),
        mode: Mode::Overlap,
        last_zone: None,
    };
    let records = driver
        .run(&schedule, Instant::now() + Duration::from_secs(120))
        .await;
    wake.await?;
    assert_eq!(records.len(), 1, "{records:?}");
    let rec = &records[0];
    assert!(
        rec.problems.is_empty(),
        "the transfer of a zone between owners failed: {:?}",
        rec.problems
    );
    assert!(rec.target.starts_with("city "), "{}", rec.target);
    assert!(
        !rec.target.starts_with(&format!("city {owner}->")),
        "moved from its dead owner: {}",
        rec.target
    );
    Ok(())
}
