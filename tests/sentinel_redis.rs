//! Telos's Redis clients behind Sentinel (issue 22), against real
//! `redis-server`s and `redis-sentinel`s on loopback (a primary, one
//! replica, three Sentinels: [`SentinelCluster`]):
//!
//! - the clients follow a failover (the primary SIGKILLed) within seconds,
//!   every lease keeps its owner and generation, every acknowledged save is
//!   on the new primary, and the old primary comes back as a replica;
//! - fenced writes count only once a replica has them: with the replica
//!   paused (lagging) a claim, a renew and a save fail after the `WAIT`
//!   bound, and when the primary dies nothing that was acknowledged is
//!   missing from the promoted replica;
//! - a primary cut off from its replica (what the minority side of a
//!   partition sees) acknowledges no fenced write: a shard on its side
//!   cannot renew and must fence.

use std::time::Duration;

use telos_redis::directory::durable::is_not_replicated;
use telos_redis::directory::{Claim, Directory, DirectoryError};
use telos_redis::store::{SaveOutcome, Store, StoreError};
use telos_testkit::process::blocking;
use telos_testkit::redis::free_port;
use telos_testkit::sentinel::{SentinelCluster, role};
use tokio::time::Instant;

const TTL: Duration = Duration::from_secs(30);
/// Bounds a broken build (a failover that never happens); not a claim.
const FAILOVER_WAIT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(20);

/// Runs `op` until it succeeds or `within` passes; the time it took.
async fn until_ok<T, E: std::fmt::Debug, F, Fut>(within: Duration, mut op: F) -> (T, Duration)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let start = Instant::now();
    loop {
        match op().await {
            Ok(v) => return (v, start.elapsed()),
            Err(e) => assert!(
                start.elapsed() < within,
                "still failing after {within:?}: {e:?}"
            ),
        }
        tokio::time::sleep(POLL).await;
    }
}

fn not_replicated_dir(e: &DirectoryError) -> bool {
    matches!(e, DirectoryError::Redis(r) if is_not_replicated(r))
}

fn not_replicated_store(e: &StoreError) -> bool {
    matches!(e, StoreError::Redis(r) if is_not_replicated(r))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_follow_a_failover_and_lose_nothing_acknowledged() -> anyhow::Result<()> {
    let mut cluster = blocking(SentinelCluster::start)?;
    let dir = Directory::connect(cluster.url()).await?;
    let store = Store::connect(cluster.url()).await?;
    let mut changes = dir.primary_changes();

    let mut held = Vec::new();
    for zone in ["z1", "z2", "z3"] {
        let Claim::Acquired { r#gen } = dir.claim_zone(zone, "shard-a", TTL).await? else {
            anyhow::bail!("{zone} not acquired");
        };
        held.push((zone, r#gen));
    }
    store.create_character("Ada", "pw", b"{}").await?;
    let claimed = store.claim_character("Ada").await?;
    let mut version = claimed.row.state_version;
    for n in 0..5u64 {
        let state = format!("{{\"n\":{n}}}");
        let SaveOutcome::Saved { version: v } = store
            .save("Ada", claimed.epoch, version, state.as_bytes(), "c1", n)
            .await?
        else {
            anyhow::bail!("save {n} refused");
        };
        version = v;
    }

    let old = cluster.primary_port()?;
    blocking(|| cluster.node(old).map(|n| n.kill()))?;
    let killed = Instant::now();
    let new = blocking(|| cluster.wait_for_failover(old, FAILOVER_WAIT))?;
    let promoted = killed.elapsed();

    // The new primary has no replica yet: no fenced write counts (none may
    // be lost to the next failover). The old primary comes back and is made
    // a replica of the new one; then writing resumes.
    let renew = dir.renew_zone("z1", "shard-a", held[0].1, TTL).await;
    assert!(renew.as_ref().is_err_and(not_replicated_dir), "{renew:?}");
    // Restarted as it was (it believes it is the primary): Sentinel turns it
    // into a replica of the new primary (after ~10 s: Sentinel's fixed
    // periods).
    blocking(|| cluster.node(old).and_then(|n| n.restart()))?;
    let restarted = Instant::now();
    // The directory follows: a renew at the same generation succeeds on the
    // new primary (the lease was replicated before the claim counted).
    let (renewed, _) = until_ok(FAILOVER_WAIT, || {
        dir.renew_zone("z1", "shard-a", held[0].1, TTL)
    })
    .await;
    assert!(
        renewed,
        "z1's lease at its generation is on the new primary"
    );
    let resumed = restarted.elapsed();
    blocking(|| cluster.wait_replica_of(old, new, FAILOVER_WAIT))?;
    assert_eq!(blocking(|| role(old))?, "slave");
    for (zone, generation) in &held {
        assert_eq!(
            dir.zone_owner(zone).await?,
            Some(("shard-a".to_owned(), *generation)),
            "{zone}: owner and generation unchanged across the failover"
        );
    }
    let row = store.load("Ada").await?.expect("the row");
    assert_eq!(
        row.state_version, version,
        "every acknowledged save is there"
    );
    assert_eq!(row.state_json, b"{\"n\":4}");
    assert_eq!(row.owner_epoch, claimed.epoch);
    // Another shard finds z1 held at its generation; the counter is not
    // behind any acknowledged generation.
    assert_eq!(
        dir.claim_zone("z1", "shard-b", TTL).await?,
        Claim::Held {
            owner: "shard-a".into(),
            r#gen: held[0].1
        }
    );
    for (zone, generation) in &held {
        assert!(dir.zone_generation(zone).await? >= *generation);
    }
    assert!(
        changes.has_changed()? && *changes.borrow_and_update() >= 1,
        "the directory reports the primary change"
    );
    eprintln!(
        "failover: promoted {promoted:?} after the SIGKILL; the old primary restarted as it \
         was: fenced writes acknowledged again {resumed:?} later (Sentinel converting it)"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_replica_lagging_nothing_unreplicated_is_acknowledged() -> anyhow::Result<()> {
    let mut cluster = blocking(SentinelCluster::start)?;
    let dir = Directory::connect(cluster.url()).await?;
    let store = Store::connect(cluster.url()).await?;
    let Claim::Acquired { r#gen } = dir.claim_zone("held", "shard-a", TTL).await? else {
        anyhow::bail!("not acquired");
    };
    store.create_character("Bea", "pw", b"{}").await?;
    let claimed = store.claim_character("Bea").await?;
    let SaveOutcome::Saved { version } = store
        .save(
            "Bea",
            claimed.epoch,
            claimed.row.state_version,
            b"{\"n\":1}",
            "c1",
            1,
        )
        .await?
    else {
        anyhow::bail!("refused");
    };

    let old = cluster.primary_port()?;
    let replica = cluster
        .node_ports()
        .into_iter()
        .find(|p| *p != old)
        .expect("a replica");
    cluster.node(replica)?.pause()?;
    // Every fenced write now fails: no replica acknowledges it.
    let sent = Instant::now();
    let claim = dir.claim_zone("fresh", "shard-a", TTL).await;
    assert!(
        claim.as_ref().is_err_and(not_replicated_dir),
        "a claim no replica has is not acquired: {claim:?}"
    );
    assert!(sent.elapsed() < Duration::from_secs(3), "bounded by WAIT");
    let renew = dir.renew_zone("held", "shard-a", r#gen, TTL).await;
    assert!(renew.as_ref().is_err_and(not_replicated_dir), "{renew:?}");
    let save = store
        .save("Bea", claimed.epoch, version, b"{\"n\":2}", "c1", 2)
        .await;
    assert!(save.as_ref().is_err_and(not_replicated_store), "{save:?}");
    // Reads and unfenced writes still go on (the WAIT is on its own link).
    assert!(store.load("Bea").await?.is_some());

    // The primary dies while the replica lags; the replica comes back and
    // is promoted without the unacknowledged writes.
    blocking(|| cluster.node(old).map(|n| n.kill()))?;
    cluster.node(replica)?.resume()?;
    let new = blocking(|| cluster.wait_for_failover(old, FAILOVER_WAIT))?;
    assert_eq!(new, replica);
    // A replica again, so fenced writes can count again.
    blocking(|| cluster.node(old).and_then(|n| n.restart_as_replica_of(new)))?;
    blocking(|| cluster.wait_replica_of(old, new, FAILOVER_WAIT))?;
    let (owner, _) = until_ok(FAILOVER_WAIT, || dir.zone_owner("held")).await;
    assert_eq!(
        owner,
        Some(("shard-a".to_owned(), r#gen)),
        "acknowledged claim kept"
    );
    let row = store.load("Bea").await?.expect("the row");
    assert!(
        row.state_version >= version,
        "the acknowledged save is there (version {} < {version})",
        row.state_version
    );
    // The generation counter never goes back below an acknowledged one,
    // and fenced writes count again.
    assert!(dir.zone_generation("held").await? >= r#gen);
    let (renewed, _) = until_ok(FAILOVER_WAIT, || {
        dir.renew_zone("held", "shard-a", r#gen, TTL)
    })
    .await;
    assert!(renewed);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_cut_off_from_its_replica_acknowledges_no_fenced_write() -> anyhow::Result<()> {
    let cluster = blocking(SentinelCluster::start)?;
    let dir = Directory::connect(cluster.url()).await?;
    let Claim::Acquired { r#gen } = dir.claim_zone("isolated", "shard-a", TTL).await? else {
        anyhow::bail!("not acquired");
    };
    assert!(dir.renew_zone("isolated", "shard-a", r#gen, TTL).await?);
    // The replica follows an address where nothing listens: the primary is
    // alone, as on the minority side of a partition (the Sentinels still
    // see it, so no failover happens; the shard still reaches it).
    let primary = cluster.primary_port()?;
    let replica = cluster
        .node_ports()
        .into_iter()
        .find(|p| *p != primary)
        .expect("a replica");
    let client = redis::Client::open(format!("redis://127.0.0.1:{replica}/"))?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(free_port())
        .query_async::<()>(&mut conn)
        .await?;
    let renew = dir.renew_zone("isolated", "shard-a", r#gen, TTL).await;
    assert!(
        renew.as_ref().is_err_and(not_replicated_dir),
        "an isolated primary's renew is not acknowledged: {renew:?}"
    );
    let claim = dir.claim_zone("another", "shard-a", TTL).await;
    assert!(claim.as_ref().is_err_and(not_replicated_dir), "{claim:?}");
    // Reads still work: only fenced writes wait for a replica.
    assert!(dir.zone_owner("isolated").await?.is_some());
    Ok(())
}

/// What `WAIT` adds to a save: the same saves through the Sentinel target
/// (script + `WAIT 1` on the fence connection) and through a direct URL to
/// the same primary (no `WAIT`). Printed with `--nocapture`; asserts only
/// that every save landed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_latency_wait_adds_to_a_save() -> anyhow::Result<()> {
    const SAVES: usize = 200;
    let cluster = blocking(SentinelCluster::start)?;
    let direct_url = format!("redis://127.0.0.1:{}/", cluster.primary_port()?);
    let mut report = Vec::new();
    for (label, url) in [("sentinel+WAIT", cluster.url()), ("direct", direct_url)] {
        let store = Store::connect(url.as_str()).await?;
        let name = format!("Lat{}", label.len());
        store.create_character(&name, "pw", b"{}").await?;
        let claimed = store.claim_character(&name).await?;
        let mut version = claimed.row.state_version;
        let mut took = Vec::with_capacity(SAVES);
        for n in 0..SAVES as u64 {
            let sent = Instant::now();
            let SaveOutcome::Saved { version: v } = store
                .save(&name, claimed.epoch, version, b"{}", "c1", n)
                .await?
            else {
                anyhow::bail!("{label}: save {n} refused");
            };
            took.push(sent.elapsed());
            version = v;
        }
        took.sort();
        report.push(format!(
            "{label}: p50 {:?} p99 {:?} max {:?}",
            took[SAVES / 2],
            took[SAVES * 99 / 100],
            took[SAVES - 1]
        ));
    }
    eprintln!("save latency over {SAVES} saves: {}", report.join("; "));
    Ok(())
}

/// `telosctl` reads the cluster through a Sentinel URL as through a direct
/// one, and with no Sentinel answering fails at once in one line naming
/// the URL. (Its fail-fast reachability check asked for a direct client
/// and refused every `redis+sentinel://` URL: "names its primary through
/// Sentinel: ask it first".)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telosctl_finds_the_primary_through_sentinel() -> anyhow::Result<()> {
    let cluster = blocking(SentinelCluster::start)?;
    let url = cluster.url();
    for args in [&["status", "--json"][..], &["rebalance", "--plan"]] {
        let out = blocking(|| telos_testkit::cli::telosctl(&url, args))?;
        assert!(out.success(), "telosctl {args:?}: {}", out.stderr);
    }
    let nobody = format!(
        "redis+sentinel://127.0.0.1:{},127.0.0.1:{}/telos",
        free_port(),
        free_port()
    );
    let started = Instant::now();
    let out = blocking(|| telos_testkit::cli::telosctl(&nobody, &["status"]))?;
    assert!(!out.success());
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {:?}", out.stderr);
    assert!(lines[0].contains("no Redis answers"), "{}", lines[0]);
    assert!(started.elapsed() < Duration::from_secs(5));
    Ok(())
}

/// The documented Sentinel ACL (issue 30): the Telos user may look the
/// primary up and nothing else. Set on three real Sentinels (and the data
/// nodes' own line on the data nodes), a Telos client finds the primary
/// and claims a lease through them, and the same password is refused
/// `SENTINEL SET` and `SENTINEL REMOVE`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_sentinel_acl_finds_the_primary_and_nothing_more() -> anyhow::Result<()> {
    const PASSWORD: &str = "sentinel-acl-test";
    let cluster = blocking(SentinelCluster::start)?;
    let on = |port: u16, line: String| -> anyhow::Result<()> {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
        let mut conn = client.get_connection()?;
        let args: Vec<&str> = line.split(' ').collect();
        let mut cmd = redis::cmd(args[0]);
        cmd.arg(&args[1..]);
        let () = cmd.query(&mut conn)?;
        Ok(())
    };
    for port in cluster.node_ports() {
        blocking(|| on(port, telos_redis::acl::setuser_line("telos", PASSWORD)))?;
    }
    for port in cluster.sentinel_ports() {
        blocking(|| {
            on(
                port,
                telos_redis::acl::sentinel_setuser_line("telos", PASSWORD),
            )
        })?;
    }
    let url = cluster.url().replacen(
        "redis+sentinel://",
        &format!("redis+sentinel://telos:{PASSWORD}@"),
        1,
    );
    let dir = Directory::connect(url.as_str()).await?;
    let claim = dir.claim_zone("forest", "shard-a", TTL).await?;
    assert!(matches!(claim, Claim::Acquired { .. }), "{claim:?}");

    let port = cluster.sentinel_ports()[0];
    let refused = blocking(|| {
        let client = redis::Client::open(format!("redis://telos:{PASSWORD}@127.0.0.1:{port}/"))?;
        let mut conn = client.get_connection()?;
        let masters: redis::Value = redis::cmd("SENTINEL").arg("MASTERS").query(&mut conn)?;
        anyhow::ensure!(matches!(masters, redis::Value::Array(ref m) if !m.is_empty()));
        let set = redis::cmd("SENTINEL")
            .arg(&["SET", "telos", "down-after-milliseconds", "1"][..])
            .query::<()>(&mut conn);
        let remove = redis::cmd("SENTINEL")
            .arg(&["REMOVE", "telos"][..])
            .query::<()>(&mut conn);
        anyhow::Ok([set, remove])
    })?;
    for r in refused {
        let e = r.expect_err("refused");
        assert!(e.to_string().contains("no permissions"), "{e}");
    }
    Ok(())
}
