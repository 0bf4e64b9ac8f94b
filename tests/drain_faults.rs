//! Fault tests of the zone handoff (graceful drain) and of zone adoption:
//! real Redis, real keyed `telos-world` processes, signalled, killed and
//! fenced mid-flight, with [`Driver`]s that recover like the gate. Each test
//! checks the seed's promises from what the players and the directory saw:
//! where zones land, how the drain summary counts players, that a wedged or
//! orphaned player's journal survives exactly once, and that adoption never
//! leaks a zone or takes one it was not handed.

mod support;

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use support::rows::row_journal;
use telos_proto::v1::AdoptZoneRequest;
use telos_proto::v1::handoff_client::HandoffClient;
use telos_redis::directory::Directory;
use telos_redis::store::Store;
use telos_testkit::RedisServer;
use telos_testkit::cli::{SIGINT, SIGTERM, telosctl, wait_exit};
use telos_testkit::driver::Driver;
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{Proc, WorldOpts, start_keyed_world, start_world};
use telos_testkit::world::{WorldCopy, path_to_zone};
use telos_tls::Role;
use telos_tls::grpc::endpoint;
use tokio::task::JoinHandle;
use tokio::time::Instant;

const PASSWORD: &str = "correct horse";

/// Where every new character starts (`config/world/world.toml`).
const START: &str = "city:square";

/// Lease TTL for the tests that wait for leases to expire: the orphan loop
/// then re-serves a dead shard's zones within 2 s + one 2 s period.
const SHORT_LEASE_MS: u64 = 2000;

/// Waits for a log line or a directory state: generous against a loaded
/// machine, well inside each test's budget.
const WAIT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(20);

/// How long a SIGTERM'd shard may take to drain and exit.
const EXIT_WAIT: Duration = Duration::from_secs(30);

/// Run one test body under a hard time budget, so a hang fails the test
/// with a message instead of stalling the suite.
async fn bounded<F: Future<Output = anyhow::Result<()>>>(
    budget: Duration,
    body: F,
) -> anyhow::Result<()> {
    tokio::time::timeout(budget, body)
        .await
        .with_context(|| format!("test exceeded its {budget:?} budget"))?
}

/// Start one keyed shard hosting `zones` at boot, with `extra` flags.
fn shard(
    id: &str,
    redis_url: &str,
    zones: &[&str],
    keys: &Path,
    extra: &[&str],
) -> anyhow::Result<Proc> {
    start_keyed_world(id, redis_url, zones, keys, None, extra)
}

/// The drain summary's `(redirected, reclaimed, client_fault)`.
fn drain_summary(p: &Proc) -> anyhow::Result<(u64, u64, u64)> {
    let log = p.plain_log();
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains("drain summary: "))
        .with_context(|| format!("no drain summary in:\n{log}"))?;
    let count = |key: &str| -> anyhow::Result<u64> {
        let (_, rest) = line.split_once("drain summary: ").context("summary")?;
        rest.split(' ')
            .find_map(|w| w.strip_prefix(key))
            .with_context(|| format!("no {key} in {line}"))?
            .parse()
            .with_context(|| format!("{key} in {line}"))
    };
    Ok((
        count("redirected=")?,
        count("reclaimed=")?,
        count("client_fault=")?,
    ))
}

/// Wait for a process that was already signalled to exit.
fn exited(p: &mut Proc) -> anyhow::Result<std::process::ExitStatus> {
    tokio::task::block_in_place(|| wait_exit(p, EXIT_WAIT))
}

/// `telosctl status --json`.
fn status(redis_url: &str) -> anyhow::Result<serde_json::Value> {
    let out = telosctl(redis_url, &["status", "--json"])?;
    ensure!(out.success(), "telosctl status failed: {}", out.stderr);
    Ok(serde_json::from_str(&out.stdout)?)
}

/// `(owner, gen)` of `zone` as `telosctl status --json` reports it.
fn status_owner(status: &serde_json::Value, zone: &str) -> (Option<String>, u64) {
    let z = status["zones"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|z| z["id"] == zone)
        .unwrap_or_else(|| panic!("zone {zone} missing from {status}"));
    (
        z["owner"].as_str().map(str::to_string),
        z["gen"].as_u64().unwrap_or_default(),
    )
}

/// The live lease of `zone` read straight from Redis.
async fn owner(dir: &Directory, zone: &str) -> anyhow::Result<Option<(String, u64)>> {
    Ok(dir.zone_owner(zone).await?)
}

/// Poll until `zone`'s lease is held by a shard in `by`; returns it.
async fn wait_owner(
    dir: &Directory,
    zone: &str,
    by: &[&str],
    within: Duration,
) -> anyhow::Result<(String, u64)> {
    let until = Instant::now() + within;
    loop {
        let now = owner(dir, zone).await?;
        if let Some((o, g)) = &now
            && by.contains(&o.as_str())
        {
            return Ok((o.clone(), *g));
        }
        if Instant::now() > until {
            bail!("{zone} not owned by any of {by:?} within {within:?}: {now:?}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Wait until every shard in `ids` has a live registry entry: a drain
/// only hands zones to peers it can see there, and a shard's first
/// heartbeat may land just after its readiness line.
async fn wait_registered(redis_url: &str, ids: &[&str]) -> anyhow::Result<()> {
    let dir = Directory::connect(redis_url).await?;
    let until = Instant::now() + WAIT;
    loop {
        let live = dir.shards().await?;
        if ids.iter().all(|id| live.iter().any(|s| s.id == *id)) {
            return Ok(());
        }
        ensure!(
            Instant::now() < until,
            "not all of {ids:?} registered: {live:?}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// Walk a driver from the start room into `zone` (no-op for the city).
async fn walk_into(d: &mut Driver, zone: &str) -> anyhow::Result<()> {
    if zone != "city" {
        for dir in path_to_zone(START, zone) {
            d.command(&dir).await?;
        }
    }
    Ok(())
}

/// Journal lines pipelined behind each other; returns the last seq.
async fn journal_lines(
    d: &mut Driver,
    tag: &str,
    n: usize,
    sent: &mut Vec<String>,
) -> anyhow::Result<u64> {
    let mut seq = 0;
    for i in 0..n {
        let line = format!("{tag} {i}");
        seq = d.send(&format!("journal {line}")).await?;
        sent.push(line);
    }
    Ok(seq)
}

/// What a journaling bot hands back: its driver, every line it sent, and
/// the longest gap between two acknowledged lines (the outage it felt).
struct BotRun {
    driver: Driver,
    sent: Vec<String>,
    longest_gap: Duration,
}

/// Journal a numbered line every 20 ms until `stop`, like a busy player.
fn journal_bot(mut d: Driver, stop: Arc<AtomicBool>) -> JoinHandle<anyhow::Result<BotRun>> {
    tokio::spawn(async move {
        let mut sent = Vec::new();
        let mut longest_gap = Duration::ZERO;
        let mut last = Instant::now();
        let mut n = 0;
        while !stop.load(Ordering::Relaxed) {
            let line = format!("{} line {n}", d.name);
            d.command(&format!("journal {line}"))
                .await
                .with_context(|| format!("{} journaling line {n}", d.name))?;
            sent.push(line);
            longest_gap = longest_gap.max(last.elapsed());
            last = Instant::now();
            n += 1;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(BotRun {
            driver: d,
            sent,
            longest_gap,
        })
    })
}

/// A `Handoff` client of the shard at `addr`, presenting shard `as_shard`'s
/// certificate (the service is served to no other, and a request naming a
/// source speaks for the caller's own shard only).
async fn handoff_client(
    addr: &str,
    keys: &TempKeys,
    as_shard: &str,
) -> anyhow::Result<HandoffClient<tonic::transport::Channel>> {
    let channel = endpoint(addr, Some(&keys.shard_tls(as_shard)))?
        .connect()
        .await?;
    Ok(HandoffClient::new(channel))
}

/// 1. Two shards drained at the same moment share two small peers: the
/// directory's reservations make the second drainer see the first one's
/// in-flight players, so the zones split by headroom instead of piling
/// onto the peer that looked emptiest to both.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_drains_split_over_peers_by_reservation() -> anyhow::Result<()> {
    bounded(Duration::from_secs(120), async {
        let redis = RedisServer::start()?;
        let keys = TempKeys::generate()?;
        // 4 drained zones x 3 players = 12 players onto two peers of
        // capacity 8: neither can take everything, each can take two zones.
        const PER_ZONE: usize = 3;
        const PEER_CAPACITY: u64 = 8;
        let cap = PEER_CAPACITY.to_string();
        // The drainers are full (capacity = the players they host), so
        // neither ever looks like a target to the other: SIGTERMs a few ms
        // apart may reach them in either order.
        let full = (2 * PER_ZONE).to_string();
        // The placement is this test's premise: the rebalancer would even
        // out full drainers and empty peers before the SIGTERMs.
        let deadline = [
            "--drain-deadline",
            "15",
            "--capacity",
            &full,
            "--rebalance",
            "off",
        ];
        let mut a = shard(
            "shard-a",
            &redis.url,
            &["city", "docks"],
            keys.path(),
            &deadline,
        )?;
        let mut b = shard(
            "shard-b",
            &redis.url,
            &["forest", "hills"],
            keys.path(),
            &deadline,
        )?;
        let c = shard(
            "shard-c",
            &redis.url,
            &["keep"],
            keys.path(),
            &["--capacity", &cap, "--rebalance", "off"],
        )?;
        let d = shard(
            "shard-d",
            &redis.url,
            &["marsh"],
            keys.path(),
            &["--capacity", &cap, "--rebalance", "off"],
        )?;
        let addrs = vec![
            a.addr.clone(),
            b.addr.clone(),
            c.addr.clone(),
            d.addr.clone(),
        ];
        let drained = ["city", "docks", "forest", "hills"];
        let home = |z: &str| {
            if z == "city" || z == "docks" {
                "shard-a"
            } else {
                "shard-b"
            }
        };

        let stop = Arc::new(AtomicBool::new(false));
        let mut bots = Vec::new();
        for (i, zone) in drained.iter().flat_map(|z| [*z; PER_ZONE]).enumerate() {
            let name = format!("Split{}", (b'a' + i as u8) as char);
            let mut p =
                Driver::login_with(&a.addr, Some(&keys.tls(Role::Gate)), &name, PASSWORD, true)
                    .await?;
            p.set_shards(addrs.clone());
            walk_into(&mut p, zone).await?;
            let (z, _, s) = p.where_().await?;
            assert_eq!((z.as_str(), s.as_str()), (zone, home(zone)), "{name}");
            bots.push((zone, journal_bot(p, stop.clone())));
        }
        // Both drainers' registry entries show them full before the SIGTERMs.
        let dir = Directory::connect(&redis.url).await?;
        let until = Instant::now() + WAIT;
        while !dir.shards().await?.iter().all(|s| {
            !["shard-a", "shard-b"].contains(&s.id.as_str()) || s.players == 2 * PER_ZONE as u64
        }) {
            ensure!(
                Instant::now() < until,
                "registry: {:?}",
                dir.shards().await?
            );
            tokio::time::sleep(POLL).await;
        }

        wait_registered(&redis.url, &["shard-c", "shard-d"]).await?;
        // SIGTERM both drainers back to back (microseconds apart).
        a.signal(SIGTERM);
        b.signal(SIGTERM);
        let started = Instant::now();
        let (sa, sb) = (exited(&mut a)?, exited(&mut b)?);
        let drained_in = started.elapsed();
        assert!(sa.success(), "shard-a exits 0: {sa:?}\n{}", a.plain_log());
        assert!(sb.success(), "shard-b exits 0: {sb:?}\n{}", b.plain_log());
        let n = (2 * PER_ZONE) as u64;
        assert_eq!(drain_summary(&a)?, (n, 0, 0), "shard-a summary");
        assert_eq!(drain_summary(&b)?, (n, 0, 0), "shard-b summary");
        for p in [&a, &b] {
            let log = p.plain_log();
            assert!(
                !log.contains("over the soft ceiling"),
                "capacity sufficed; nothing was admitted over it:\n{log}"
            );
        }

        // Where the zones landed: two per peer, and each peer's players
        // within its capacity.
        let st = status(&redis.url)?;
        let mut per_peer: std::collections::BTreeMap<String, Vec<&str>> = Default::default();
        for zone in drained {
            let (o, _) = status_owner(&st, zone);
            let o = o.with_context(|| format!("{zone} has no owner after the drain: {st}"))?;
            assert!(o == "shard-c" || o == "shard-d", "{zone} landed on {o}");
            per_peer.entry(o).or_default().push(zone);
        }
        eprintln!("zones landed: {per_peer:?} (both drains done in {drained_in:?})");
        let handovers: Vec<String> = [&a, &b]
            .iter()
            .flat_map(|p| {
                p.plain_log()
                    .lines()
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .filter(|l| l.contains("handoverZoneTo") || l.contains("draining zones"))
            .collect();
        assert_eq!(
            per_peer.values().map(Vec::len).collect::<Vec<_>>(),
            vec![2, 2],
            "the reservations split the four zones over both peers: {per_peer:?}\n{}",
            handovers.join("\n")
        );
        for (peer, zones) in &per_peer {
            let players = (zones.len() * PER_ZONE) as u64;
            assert!(players <= PEER_CAPACITY, "{peer} got {players} players");
        }
        // Clean drains retired their holds.
        for peer in ["shard-c", "shard-d"] {
            let holds = dir.drain_reservations(peer).await?;
            assert!(
                holds
                    .iter()
                    .all(|(drainer, _, _)| drainer != "shard-a" && drainer != "shard-b"),
                "{peer} still carries a drainer's hold: {holds:?}"
            );
        }

        // Every player was redirected in place to its zone's new owner,
        // and every journal line it sent applied exactly once.
        tokio::time::sleep(Duration::from_millis(300)).await;
        stop.store(true, Ordering::Relaxed);
        for (zone, bot) in bots {
            let BotRun {
                driver: mut p,
                sent,
                ..
            } = bot.await??;
            let (z, _, s) = p.where_().await?;
            let (o, _) = status_owner(&st, zone);
            assert_eq!(
                (z.as_str(), Some(s)),
                (zone, o),
                "{} after the drain",
                p.name
            );
            assert_eq!(p.resumes, 0, "{}: redirected, never dropped", p.name);
            assert_eq!(p.journal().await?, sent, "{}: journal exact", p.name);
        }
        drop((c, d));
        Ok(())
    })
    .await
}

/// 2. A player whose gate stopped reading is not handed off during a
/// drain: the drain counts it `client_fault` (the others are redirected),
/// flushes it durably at the deadline, and it logs back in with its
/// journal intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn wedged_client_is_a_client_fault_flushed_and_resumable() -> anyhow::Result<()> {
    bounded(Duration::from_secs(120), async {
        // A stopped reader is reclaimed by the first ordinary tick after its
        // out channel overflows; the drain must begin before that tick. A
        // long tick on the drained shard gives the flood + SIGTERM a window
        // of several seconds, and the flood starts right after a tick.
        const TICK: Duration = Duration::from_secs(6);
        let redis = RedisServer::start()?;
        let keys = TempKeys::generate()?;
        let tick_ms = TICK.as_millis().to_string();
        // The flood below must reach Wedge: no chat limit on this shard.
        let a_extra = [
            "--drain-deadline",
            "2",
            "--tick-ms",
            &tick_ms,
            "--save-interval-ms",
            "200",
            "--chat-burst-bytes",
            "4000000000",
            "--chat-bytes-per-sec",
            "4000000000",
        ];
        let mut a = shard("shard-a", &redis.url, &["city"], keys.path(), &a_extra)?;
        let rest = ["docks", "forest", "hills", "keep", "marsh"];
        let b = shard("shard-b", &redis.url, &rest, keys.path(), &[])?;
        a.wait_log("zone started zone=city", WAIT).await?;
        let zone_started = Instant::now();
        let store = Store::connect(&redis.url).await?;

        // The wedged player writes its journal and sees it durable.
        let mut wedged = Driver::login_with(
            &a.addr,
            Some(&keys.tls(Role::Gate)),
            "Wedge",
            PASSWORD,
            true,
        )
        .await?;
        let mut lines = Vec::new();
        let seq = journal_lines(&mut wedged, "wedge", 3, &mut lines).await?;
        wedged.wait_ack(seq).await?;
        wedged.wait_durable(seq).await?;
        // Another player elsewhere in the city, and a talker beside Wedge.
        let mut other = Driver::login_with(
            &a.addr,
            Some(&keys.tls(Role::Gate)),
            "Other",
            PASSWORD,
            true,
        )
        .await?;
        other.set_shards(vec![a.addr.clone(), b.addr.clone()]);
        other.command("north").await?;
        let mut talker = Driver::login_with(
            &a.addr,
            Some(&keys.tls(Role::Gate)),
            "Talker",
            PASSWORD,
            true,
        )
        .await?;
        talker.set_shards(vec![a.addr.clone(), b.addr.clone()]);

        wait_registered(&redis.url, &["shard-b"]).await?;
        // From here on Wedge's stream is never read again. Start the flood
        // just after one of the zone's ticks (it ticks at start + k*TICK).
        let phase = zone_started.elapsed().as_millis() % TICK.as_millis();
        if !(300..=1500).contains(&phase) {
            let next = TICK.as_millis() - phase + 300;
            tokio::time::sleep(Duration::from_millis(next as u64)).await;
        }
        let flood_started = Instant::now();
        // Wedge's own answers fill its stream: others' chatter never does
        // (issue 30: it is bounded per recipient and never takes the last
        // quarter of a stream), its own answers are what a client that
        // stops reading leaves unread. Each say's echo is one ~4 KB frame:
        // 1800 of them overrun the HTTP/2 windows (2 MB client stream
        // window, 400 KB server send buffer) and then the 512-frame out
        // channel, with a wide margin.
        let text = "x".repeat(4000);
        let mut said = 0;
        let mut last = 0;
        while said < 1800 {
            last = wedged.send(&format!("say {text}")).await?;
            said += 1;
        }
        // Applied (its row's watermark, saved every 200 ms, says so).
        while store
            .load("wedge")
            .await?
            .is_none_or(|row| row.applied_seq < last)
        {
            ensure!(
                flood_started.elapsed() < TICK,
                "Wedge's flood was not applied within a tick"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let flood = flood_started.elapsed();
        a.signal(SIGTERM);
        eprintln!("flood of {said} says took {flood:?}");
        ensure!(
            flood < TICK - Duration::from_millis(2000),
            "the flood ({flood:?}) outran the tick window; the test cannot tell a \
             drain from an ordinary reclaim"
        );

        // Talker and Other are redirected; Wedge stays until the deadline.
        a.wait_log("draining: fanning players off in place", WAIT)
            .await?;
        let (_, _, s) = talker.where_().await?;
        assert_eq!(s, "shard-b");
        let (z, _, s) = other.where_().await?;
        assert_eq!((z.as_str(), s.as_str()), ("city", "shard-b"));
        a.wait_log("drain summary", WAIT).await?;
        let log = a.plain_log();
        assert!(
            !log.contains("out channel full: reclaiming a wedged session"),
            "Wedge was reclaimed by an ordinary tick before the drain began:\n{log}"
        );
        assert!(
            log.contains("drain deadline: client-fault straggler"),
            "Wedge held the drain to its deadline:\n{log}"
        );
        assert_eq!(drain_summary(&a)?, (2, 0, 1), "summary");
        // The stream Wedge never reads again does not hold the shard up.
        let st = exited(&mut a)?;
        assert!(
            st.success(),
            "drained shard exits 0: {st:?}\n{}",
            a.plain_log()
        );

        drop(wedged);
        // Flushed: the durable row has every line Wedge sent.
        assert_eq!(row_journal(&store, "Wedge").await?, lines);
        // And Wedge logs back in, where the city is served now.
        let mut back = Driver::login_with(
            &b.addr,
            Some(&keys.tls(Role::Gate)),
            "Wedge",
            PASSWORD,
            false,
        )
        .await?;
        let (z, _, s) = back.where_().await?;
        assert_eq!((z.as_str(), s.as_str()), ("city", "shard-b"));
        assert_eq!(back.journal().await?, lines);
        Ok(())
    })
    .await
}

/// 3. AdoptZone naming anyone but the zone's live owner at its live
/// generation is refused before any state is built.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adopt_zone_naming_a_non_owner_is_refused_without_state() -> anyhow::Result<()> {
    bounded(Duration::from_secs(60), async {
        let redis = RedisServer::start()?;
        let keys = TempKeys::generate()?;
        let a = shard("shard-a", &redis.url, &["city"], keys.path(), &[])?;
        let rest = ["docks", "forest", "hills", "keep", "marsh"];
        let b = shard("shard-b", &redis.url, &rest, keys.path(), &[])?;
        let dir = Directory::connect(&redis.url).await?;
        let (o, generation) = wait_owner(&dir, "city", &["shard-a"], WAIT).await?;
        assert_eq!(o, "shard-a");

        for (from, generation, why) in [
            ("shard-x", generation, "a shard that is not the owner"),
            ("shard-b", generation, "the adopter itself"),
            ("shard-a", generation + 1, "a generation ahead"),
            ("shard-a", generation - 1, "a generation behind"),
        ] {
            // From the shard it names: the owner check refuses it, not the
            // certificate's.
            let mut client = handoff_client(&b.addr, &keys, from).await?;
            let refused = client
                .adopt_zone(AdoptZoneRequest {
                    zone_id: "city".into(),
                    from_shard_id: from.into(),
                    generation,
                    handoff_version: telos_world::handoff::HANDOFF_VERSION,
                })
                .await
                .expect_err(why);
            assert_eq!(
                refused.code(),
                tonic::Code::FailedPrecondition,
                "{why}: {refused:?}"
            );
        }

        // Nothing moved and nothing was built on b.
        let st = status(&redis.url)?;
        assert_eq!(
            status_owner(&st, "city"),
            (Some("shard-a".into()), generation)
        );
        let routed = dir.shard_for_zone("city").await?.context("city unserved")?;
        assert_eq!(routed.id, "shard-a");
        // A login at b is sent on to a: b does not think it hosts the city.
        let mut p = Driver::login_with(
            &b.addr,
            Some(&keys.tls(Role::Gate)),
            "Asker",
            PASSWORD,
            true,
        )
        .await?;
        let (z, _, s) = p.where_().await?;
        assert_eq!((z.as_str(), s.as_str()), ("city", "shard-a"));
        let log = b.plain_log();
        assert!(!log.contains("zone adopted"), "b built the city:\n{log}");
        assert!(
            !log.contains("zone started zone=city"),
            "b ran the city:\n{log}"
        );
        assert_eq!(
            owner(&dir, "city").await?,
            Some(("shard-a".into(), generation))
        );
        drop(a);
        Ok(())
    })
    .await
}

/// 4a. The source never flips after AdoptZone (it stays alive and keeps
/// renewing): the adopter un-adopts at its deadline and the zone stays
/// served by its owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adoption_never_flipped_is_torn_down_and_the_owner_keeps_serving() -> anyhow::Result<()> {
    bounded(Duration::from_secs(60), async {
        let redis = RedisServer::start()?;
        let keys = TempKeys::generate()?;
        let a = shard("shard-a", &redis.url, &["city"], keys.path(), &[])?;
        let rest = ["docks", "forest", "hills", "keep", "marsh"];
        let b = shard(
            "shard-b",
            &redis.url,
            &rest,
            keys.path(),
            &["--drain-deadline", "3"],
        )?;
        let dir = Directory::connect(&redis.url).await?;
        let (_, generation) = wait_owner(&dir, "city", &["shard-a"], WAIT).await?;

        let mut client = handoff_client(&b.addr, &keys, "shard-a").await?;
        let adopted_at = Instant::now();
        client
            .adopt_zone(AdoptZoneRequest {
                zone_id: "city".into(),
                from_shard_id: "shard-a".into(),
                generation,
                handoff_version: telos_world::handoff::HANDOFF_VERSION,
            })
            .await
            .context("AdoptZone naming the live owner")?;
        b.wait_log("zone adopted; awaiting the flip", WAIT).await?;
        b.wait_log("adoption never confirmed: un-adopted", WAIT)
            .await?;
        let torn_down_in = adopted_at.elapsed();
        eprintln!("un-adopted {torn_down_in:?} after AdoptZone (deadline 3 s)");
        assert!(
            torn_down_in >= Duration::from_secs(3) && torn_down_in < Duration::from_secs(8),
            "un-adopted at its deadline: {torn_down_in:?}"
        );
        let log = b.plain_log();
        assert!(log.contains("unconfirmed adoption torn down"), "{log}");
        assert!(!log.contains("adoption confirmed"), "{log}");
        // The owner never stopped owning it.
        assert_eq!(
            owner(&dir, "city").await?,
            Some(("shard-a".into(), generation))
        );

        // A player walks from b's forest into the city: b no longer hosts
        // it, so the walk hands the player to a.
        let mut p = Driver::login_with(
            &a.addr,
            Some(&keys.tls(Role::Gate)),
            "Walker",
            PASSWORD,
            true,
        )
        .await?;
        p.set_shards(vec![a.addr.clone(), b.addr.clone()]);
        for step in &path_to_zone(START, "forest") {
            p.command(step).await?;
        }
        let (_, room, s) = p.where_().await?;
        assert_eq!(s, "shard-b");
        for step in &path_to_zone(&room, "city") {
            p.command(step).await?;
        }
        let (z, _, s) = p.where_().await?;
        assert_eq!(
            (z.as_str(), s.as_str()),
            ("city", "shard-a"),
            "{}",
            p.transcript
        );
        Ok(())
    })
    .await
}

/// 4b. The source dies after AdoptZone, before the flip: the zone is not
/// lost — once the dead owner's lease expires the adopter's confirm loop
/// (or a peer's orphan loop) claims it, and players are served there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_killed_after_adopt_zone_does_not_lose_the_zone() -> anyhow::Result<()> {
    bounded(Duration::from_secs(60), async {
        let redis = RedisServer::start()?;
        let keys = TempKeys::generate()?;
        let ttl = SHORT_LEASE_MS.to_string();
        let mut a = shard("shard-a", &redis.url, &["city"], keys.path(), &["--lease-ttl-ms", &ttl])?;
        let rest = ["docks", "forest", "hills", "keep", "marsh"];
        let b_extra = ["--drain-deadline", "3", "--lease-ttl-ms", &ttl];
        let b = shard("shard-b", &redis.url, &rest, keys.path(), &b_extra)?;
        let dir = Directory::connect(&redis.url).await?;
        let (_, generation) = wait_owner(&dir, "city", &["shard-a"], WAIT).await?;
        let store = Store::connect(&redis.url).await?;

        // A player in the city, with lines in flight when a dies.
        let mut p = Driver::login_with(&a.addr, Some(&keys.tls(Role::Gate)), "Stayer", PASSWORD, true).await?;
        p.set_shards(vec![a.addr.clone(), b.addr.clone()]);
        let mut sent = Vec::new();
        let seq = journal_lines(&mut p, "before", 3, &mut sent).await?;
        p.wait_ack(seq).await?;

        let mut client = handoff_client(&b.addr, &keys, "shard-a").await?;
        client
            .adopt_zone(AdoptZoneRequest {
                zone_id: "city".into(),
                from_shard_id: "shard-a".into(),
                generation,
                handoff_version: telos_world::handoff::HANDOFF_VERSION,
            })
            .await
            .context("AdoptZone naming the live owner")?;
        a.kill();
        let killed = Instant::now();
        journal_lines(&mut p, "during", 3, &mut sent).await?;

        let (o, g) = wait_owner(&dir, "city", &["shard-b"], WAIT).await?;
        let claimed_in = killed.elapsed();
        assert!(g > generation, "a newer generation: {g} > {generation}");
        let log = b.plain_log();
        eprintln!(
            "city claimed by {o} {claimed_in:?} after the source died (lease TTL {SHORT_LEASE_MS} ms); \
             confirmed by claim: {}",
            log.contains("adoption confirmed: the flip landed")
        );
        assert!(!log.contains("adoption kept"), "{log}");

        // The player in the city resumes there and loses nothing.
        let seq = journal_lines(&mut p, "after", 2, &mut sent).await?;
        p.wait_ack(seq).await?;
        let served_in = killed.elapsed();
        let (z, _, s) = p.where_().await?;
        assert_eq!((z.as_str(), s.as_str()), ("city", "shard-b"));
        assert!(p.resumes >= 1);
        assert_eq!(p.journal().await?, sent, "journal exact");
        p.wait_durable(seq).await?;
        assert_eq!(row_journal(&store, "Stayer").await?, sent);
        // And a brand-new player starts in the city, on b.
        let mut q = Driver::login_with(&b.addr, Some(&keys.tls(Role::Gate)), "Newcomer", PASSWORD, true).await?;
        let (z, room, s) = q.where_().await?;
        assert_eq!((z.as_str(), room.as_str(), s.as_str()), ("city", START, "shard-b"));
        eprintln!("the city's player was served again {served_in:?} after the kill");
        assert!(
            served_in < Duration::from_secs(12),
            "served again within lease TTL + the adoption deadline + slack: {served_in:?}"
        );
        Ok(())
    })
    .await
}

/// 5. A shard dies (SIGKILL) while its players journal: its zones are
/// served again by the peers within lease TTL + one orphan-loop period,
/// and every player resumes with every line applied exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killed_shard_zones_are_reserved_and_players_resume_exactly_once() -> anyhow::Result<()> {
    bounded(Duration::from_secs(120), async {
        let redis = RedisServer::start()?;
        let keys = TempKeys::generate()?;
        let ttl = SHORT_LEASE_MS.to_string();
        let short = ["--lease-ttl-ms", ttl.as_str()];
        let mut a = shard(
            "shard-a",
            &redis.url,
            &["city", "docks"],
            keys.path(),
            &short,
        )?;
        let b = shard(
            "shard-b",
            &redis.url,
            &["forest", "hills"],
            keys.path(),
            &short,
        )?;
        let c = shard(
            "shard-c",
            &redis.url,
            &["keep", "marsh"],
            keys.path(),
            &short,
        )?;
        let addrs = vec![a.addr.clone(), b.addr.clone(), c.addr.clone()];
        let dir = Directory::connect(&redis.url).await?;

        let stop = Arc::new(AtomicBool::new(false));
        let mut bots = Vec::new();
        for (i, zone) in ["city", "docks", "city", "docks", "city", "docks"]
            .into_iter()
            .enumerate()
        {
            let name = format!("Orphan{}", (b'a' + i as u8) as char);
            let mut p =
                Driver::login_with(&a.addr, Some(&keys.tls(Role::Gate)), &name, PASSWORD, true)
                    .await?;
            p.set_shards(addrs.clone());
            walk_into(&mut p, zone).await?;
            assert_eq!(p.where_().await?.2, "shard-a");
            bots.push((zone, p));
        }
        // Durably in their zones first: a walk the crash un-does is replayed
        // by the driver and may then meet a zone not yet served again (the
        // line applies once, with a different outcome), which would blur
        // where each player must end up.
        for (_, p) in &mut bots {
            p.wait_durable(p.next_seq - 1).await?;
        }
        let bots: Vec<_> = bots
            .into_iter()
            .map(|(zone, p)| (zone, journal_bot(p, stop.clone())))
            .collect();
        tokio::time::sleep(Duration::from_millis(500)).await;
        a.kill();
        let killed = Instant::now();

        // Documented bound: lease TTL + one orphan-loop period (the peers'
        // lease TTL), 4 s here, and 1 s of scheduling slack.
        let bound = Duration::from_millis(2 * SHORT_LEASE_MS) + Duration::from_secs(1);
        let mut served = Vec::new();
        for zone in ["city", "docks"] {
            let (o, _) = wait_owner(&dir, zone, &["shard-b", "shard-c"], WAIT).await?;
            served.push((zone, o, killed.elapsed()));
        }
        eprintln!("orphaned zones served again: {served:?}");
        for (zone, _, t) in &served {
            assert!(t < &bound, "{zone} re-served after {t:?} (bound {bound:?})");
        }

        // Let every bot journal past the outage, then check them.
        tokio::time::sleep(Duration::from_secs(1)).await;
        stop.store(true, Ordering::Relaxed);
        let mut gaps = Vec::new();
        for (zone, bot) in bots {
            let BotRun {
                driver: mut p,
                sent,
                longest_gap,
            } = bot.await??;
            let (z, _, s) = p.where_().await?;
            let (o, _) = owner(&dir, zone).await?.context("owned")?;
            assert_eq!((z.as_str(), s), (zone, o), "{}", p.name);
            assert!(p.resumes >= 1, "{} resumed", p.name);
            assert_eq!(p.journal().await?, sent, "{}: journal exact", p.name);
            gaps.push(longest_gap);
        }
        let worst = gaps.iter().max().copied().unwrap_or_default();
        eprintln!("longest pause a player felt: {worst:?}");
        drop((b, c));
        Ok(())
    })
    .await
}

/// 6. An unexpected lease loss takes the fence path, never a drain: the
/// shard's players are closed non-final and resume, and the log says
/// "fenced", not "draining".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_loss_fences_without_draining() -> anyhow::Result<()> {
    bounded(Duration::from_secs(60), async {
        let redis = RedisServer::start()?;
        let keys = TempKeys::generate()?;
        let ttl = SHORT_LEASE_MS.to_string();
        let short = ["--lease-ttl-ms", ttl.as_str()];
        let a = shard("shard-a", &redis.url, &["city"], keys.path(), &short)?;
        let rest = ["docks", "forest", "hills", "keep", "marsh"];
        let b = shard("shard-b", &redis.url, &rest, keys.path(), &short)?;
        let dir = Directory::connect(&redis.url).await?;
        let (_, generation) = wait_owner(&dir, "city", &["shard-a"], WAIT).await?;

        let mut p = Driver::login_with(
            &a.addr,
            Some(&keys.tls(Role::Gate)),
            "Fenced",
            PASSWORD,
            true,
        )
        .await?;
        p.set_shards(vec![a.addr.clone(), b.addr.clone()]);
        let mut sent = Vec::new();
        let seq = journal_lines(&mut p, "before", 3, &mut sent).await?;
        p.wait_ack(seq).await?;

        // Someone else's name on a's live lease.
        let client = redis::Client::open(redis.url.as_str())?;
        let mut conn = client.get_multiplexed_async_connection().await?;
        let _: i64 = redis::cmd("HSET")
            .arg("telos:zone:city:lease")
            .arg("owner")
            .arg("shard-x")
            .query_async(&mut conn)
            .await?;
        let stolen = Instant::now();
        a.wait_log("zone fenced: lease lost", WAIT).await?;
        eprintln!(
            "fenced {:?} after the lease was overwritten",
            stolen.elapsed()
        );

        // The player was closed non-final and resumes once the zone is
        // served again; nothing it sent is lost or doubled.
        let seq = journal_lines(&mut p, "after", 3, &mut sent).await?;
        p.wait_ack(seq).await?;
        eprintln!(
            "player served again {:?} after the overwrite",
            stolen.elapsed()
        );
        assert!(
            p.resumes >= 1,
            "closed non-final, resumed: {}",
            p.transcript
        );
        assert!(p.transcript.contains("The world fades around you"));
        let (z, _, _) = p.where_().await?;
        assert_eq!(z, "city");
        assert_eq!(p.journal().await?, sent, "journal exact");
        let (_, g) = owner(&dir, "city").await?.context("city served")?;
        assert!(g > generation, "re-claimed at a newer generation");

        let log = a.plain_log();
        assert!(log.contains("fenced"), "{log}");
        assert!(!log.contains("draining"), "a fence is not a drain:\n{log}");
        assert!(!log.contains("drain summary"), "{log}");
        Ok(())
    })
    .await
}

/// Start a keyed shard on a copy of the starter world in which `zone` is
/// instanced: a peer of a heterogeneous rollout that cannot adopt `zone`
/// (AdoptZone refuses it as an unknown zone) but takes every other.
fn shard_without(
    id: &str,
    redis_url: &str,
    zones: &[&str],
    keys: &Path,
    zone: &str,
    extra: &[&str],
) -> anyhow::Result<(Proc, WorldCopy)> {
    let world = WorldCopy::new()?;
    let path = world.path().join(format!("{zone}.json"));
    let mut def: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
    def["instanced"] = serde_json::Value::Bool(true);
    std::fs::write(&path, serde_json::to_string_pretty(&def)?)?;
    let mut opts = WorldOpts::new(id, redis_url, zones).keyed(keys);
    opts.world = world.path().to_path_buf();
    opts.extra.extend(extra.iter().map(|s| s.to_string()));
    Ok((start_world(opts)?, world))
}

/// 7. A target that refuses AdoptZone (here: a peer of a heterogeneous
/// rollout whose world cannot run the zone) gets its reservation back at
/// once: the drain moves on to the next peer, and the refusing peer is not
/// left carrying a phantom hold for the whole reservation TTL (which would
/// hide its headroom from every other drain meanwhile).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_adopt_zone_gives_its_reservation_back() -> anyhow::Result<()> {
    bounded(Duration::from_secs(60), async {
        let redis = RedisServer::start()?;
        let keys = TempKeys::generate()?;
        // c has the most headroom, so the selector tries it first; it
        // cannot run the docks. d can.
        let mut a = shard("shard-a", &redis.url, &["docks"], keys.path(), &[])?;
        let (c, _world) = shard_without(
            "shard-c",
            &redis.url,
            &["forest", "hills"],
            keys.path(),
            "docks",
            &["--capacity", "5000"],
        )?;
        let d = shard(
            "shard-d",
            &redis.url,
            &["city", "keep", "marsh"],
            keys.path(),
            &[],
        )?;
        let addrs = vec![a.addr.clone(), c.addr.clone(), d.addr.clone()];
        let mut players = Vec::new();
        for name in ["Dockone", "Docktwo"] {
            let mut p =
                Driver::login_with(&d.addr, Some(&keys.tls(Role::Gate)), name, PASSWORD, true)
                    .await?;
            p.set_shards(addrs.clone());
            walk_into(&mut p, "docks").await?;
            assert_eq!(p.where_().await?.2, "shard-a");
            players.push(p);
        }

        wait_registered(&redis.url, &["shard-c", "shard-d"]).await?;
        a.signal(SIGTERM);
        let st = exited(&mut a)?;
        assert!(st.success(), "{st:?}\n{}", a.plain_log());
        let log = a.plain_log();
        assert!(
            log.contains("AdoptZone refused; trying another peer"),
            "c was tried first and refused:\n{log}"
        );
        assert_eq!(drain_summary(&a)?, (2, 0, 0));
        assert!(!log.contains("already gone at retire"), "{log}");
        let dir = Directory::connect(&redis.url).await?;
        assert_eq!(
            owner(&dir, "docks").await?.map(|(o, _)| o).as_deref(),
            Some("shard-d")
        );
        for peer in ["shard-c", "shard-d"] {
            let holds = dir.drain_reservations(peer).await?;
            assert!(
                holds.iter().all(|(drainer, _, _)| drainer != "shard-a"),
                "{peer} still carries shard-a's hold after its drain: {holds:?}"
            );
        }
        for p in &mut players {
            let (z, _, s) = p.where_().await?;
            assert_eq!((z.as_str(), s.as_str()), ("docks", "shard-d"), "{}", p.name);
            assert_eq!(p.resumes, 0, "{}: redirected, never dropped", p.name);
        }
        drop(c);
        Ok(())
    })
    .await
}

/// 8. A zone this shard adopted (and confirmed) is released on a clean
/// stop exactly like a boot zone: SIGINT gives every lease back at once, so
/// peers need not wait out the TTL to serve the zone again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adopted_zone_lease_is_released_on_a_clean_stop() -> anyhow::Result<()> {
    bounded(Duration::from_secs(60), async {
        let redis = RedisServer::start()?;
        let keys = TempKeys::generate()?;
        let mut a = shard("shard-a", &redis.url, &["city"], keys.path(), &[])?;
        let rest = ["docks", "forest", "hills", "keep", "marsh"];
        let mut b = shard("shard-b", &redis.url, &rest, keys.path(), &[])?;
        let dir = Directory::connect(&redis.url).await?;
        wait_owner(&dir, "city", &["shard-a"], WAIT).await?;
        // The city moves to b by a drain of a, and b confirms it.
        wait_registered(&redis.url, &["shard-b"]).await?;
        a.signal(SIGTERM);
        assert!(exited(&mut a)?.success(), "{}", a.plain_log());
        b.wait_log("adoption confirmed: the flip landed", WAIT)
            .await?;
        wait_owner(&dir, "city", &["shard-b"], WAIT).await?;

        let st = b.stop_with(SIGINT, EXIT_WAIT)?;
        assert!(st.success(), "{st:?}\n{}", b.plain_log());
        for zone in ["forest", "city"] {
            assert_eq!(
                owner(&dir, zone).await?,
                None,
                "{zone}'s lease was given back at the clean stop:\n{}",
                b.plain_log()
            );
        }
        Ok(())
    })
    .await
}

/// 9. The orphan loop's documented bound when the peers are equally
/// loaded (here: idle): a dead shard's zones are served again within its
/// lease TTL + one orphan-loop period.
///
/// Regression: the orphan loop once reserved holds on behalf of the peer it
/// picked; with equal loads each shard then saw the other as less loaded,
/// every period, and the second orphan was never claimed. Placement is now
/// a read-only view every shard computes alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphaned_zones_of_idle_peers_are_served_within_ttl_plus_one_period() -> anyhow::Result<()>
{
    bounded(Duration::from_secs(60), async {
        let redis = RedisServer::start()?;
        let keys = TempKeys::generate()?;
        // The dead shard keeps the default 6 s lease TTL, so its registry
        // entry (3 s presence) is gone before its leases expire and it is
        // never itself picked to take its own zones. The peers' 2 s lease
        // TTL is their orphan-loop period.
        const DEAD_LEASE: Duration = Duration::from_secs(6);
        let ttl = SHORT_LEASE_MS.to_string();
        let short = ["--lease-ttl-ms", ttl.as_str()];
        let mut a = shard("shard-a", &redis.url, &["city", "docks"], keys.path(), &[])?;
        let _b = shard(
            "shard-b",
            &redis.url,
            &["forest", "hills"],
            keys.path(),
            &short,
        )?;
        let _c = shard(
            "shard-c",
            &redis.url,
            &["keep", "marsh"],
            keys.path(),
            &short,
        )?;
        let dir = Directory::connect(&redis.url).await?;
        for zone in ["city", "docks"] {
            wait_owner(&dir, zone, &["shard-a"], WAIT).await?;
        }
        a.kill();
        let killed = Instant::now();
        // Lease TTL + one period, and 1 s of scheduling slack.
        let bound = DEAD_LEASE + Duration::from_millis(SHORT_LEASE_MS) + Duration::from_secs(1);
        for zone in ["city", "docks"] {
            let left = bound.saturating_sub(killed.elapsed());
            let (o, _) = match wait_owner(&dir, zone, &["shard-b", "shard-c"], left).await {
                Ok(owned) => owned,
                Err(e) => bail!(
                    "{e:#} ({:?} after its owner died); holds on b: {:?}, on c: {:?}",
                    killed.elapsed(),
                    dir.drain_reservations("shard-b").await?,
                    dir.drain_reservations("shard-c").await?,
                ),
            };
            eprintln!("{zone} served by {o} after {:?}", killed.elapsed());
        }
        Ok(())
    })
    .await
}

/// 10. SIGTERM lands on a shard moments after it answered AdoptZone, before
/// its confirm loop observed the source's flip: its drain waits for the
/// flip and hands the zone on like its own, instead of dropping the zone
/// (and the players the source is already redirecting to it) and leaving
/// it to the orphan loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_hands_on_a_zone_adopted_just_before_the_sigterm() -> anyhow::Result<()> {
    bounded(Duration::from_secs(60), async {
        let redis = RedisServer::start()?;
        let keys = TempKeys::generate()?;
        // a has no headroom (as a draining source would not be a
        // candidate), so b's drain hands the city on to c.
        let a = shard(
            "shard-a",
            &redis.url,
            &["city"],
            keys.path(),
            &["--capacity", "1"],
        )?;
        let mut b = shard(
            "shard-b",
            &redis.url,
            &["forest", "hills"],
            keys.path(),
            &[],
        )?;
        let rest = ["docks", "keep", "marsh"];
        let c = shard("shard-c", &redis.url, &rest, keys.path(), &[])?;
        let dir = Directory::connect(&redis.url).await?;
        let (_, generation) = wait_owner(&dir, "city", &["shard-a"], WAIT).await?;

        wait_registered(&redis.url, &["shard-a", "shard-c"]).await?;
        // b adopts the city as a's drain would make it, then is told to
        // drain before the flip has landed.
        handoff_client(&b.addr, &keys, "shard-a")
            .await?
            .adopt_zone(AdoptZoneRequest {
                zone_id: "city".into(),
                from_shard_id: "shard-a".into(),
                generation,
                handoff_version: telos_world::handoff::HANDOFF_VERSION,
            })
            .await
            .context("AdoptZone naming the live owner")?;
        b.signal(SIGTERM);
        b.wait_log("draining zones=", WAIT).await?;
        // The source's flip lands now (done here, exactly as its drain does).
        let flipped = dir
            .flip_zone(
                "city",
                "shard-a",
                generation,
                ("shard-b", telos_redis::directory::events::Cause::Drain),
                Duration::from_secs(6),
            )
            .await?;
        ensure!(flipped.is_some(), "the flip landed");

        let st = exited(&mut b)?;
        assert!(st.success(), "{st:?}\n{}", b.plain_log());
        let log = b.plain_log();
        assert!(!log.contains("zone city is not hosted here"), "{log}");
        assert!(
            log.contains("lease flipped; fanning players off zone=\"city\" to_shard=shard-c"),
            "b handed the city on:\n{log}"
        );
        // Served by c the moment b is gone, not after an orphan-loop round.
        assert_eq!(
            owner(&dir, "city").await?.map(|(o, _)| o).as_deref(),
            Some("shard-c")
        );
        let mut p =
            Driver::login_with(&c.addr, Some(&keys.tls(Role::Gate)), "Late", PASSWORD, true)
                .await?;
        let (z, _, s) = p.where_().await?;
        assert_eq!((z.as_str(), s.as_str()), ("city", "shard-c"));
        drop(a);
        Ok(())
    })
    .await
}
