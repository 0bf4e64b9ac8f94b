//! Fault tests of operator zone transfers (seed `transfers.md`: "stream" =
//! zone, "node" = shard): real Redis, real keyed `telos-world` processes,
//! paused (SIGSTOP), killed and restarted mid-transfer. Each checks what
//! the seed promises from what clients saw and what the directory holds:
//! logins mid-transfer park or are redirected and then get in, every step
//! resumes after a crash, completions are fenced by the generation the
//! source closed at, nothing waits forever, and `telosctl status` tells the
//! operator what is pending and why a transfer was cancelled.
//!
//! The source is paused with SIGSTOP *before* the proposal is written: the
//! proposal lands while it cannot run, which is "right after the record is
//! written" from the source's point of view, without racing its sub-ms
//! pub/sub reaction.

use std::time::Duration;

use anyhow::{Context, bail};
use telos_proto::v1::server_frame::Frame;
use telos_redis::directory::transfer::{Completion, Proposal};
use telos_redis::directory::{Claim, Directory, ShardInfo, ShardState};
use telos_testkit::RedisServer;
use telos_testkit::cli::telosctl;
use telos_testkit::driver::Driver;
use telos_testkit::keys::TempKeys;
use telos_testkit::metrics::{sample, scrape};
use telos_testkit::play::PlayStream;
use telos_testkit::process::{Proc, start_keyed_world};
use telos_testkit::redis::free_port;
use telos_testkit::world::starter_zones;
use telos_tls::{Role, TlsKeys};
use telos_world::runtime::moves::transfer::TRANSFER_POLL;
use telos_world::runtime::presence::PRESENCE_TTL;
use tokio::time::Instant;

const PASSWORD: &str = "correct horse";

/// What a login parked on the transfer target is told (world `play/route.rs`).
const SHIFT: &str = "The world shifts around you...";

/// Lease TTL of a source that a test pauses: 20 s, so a SIGSTOP of a few
/// seconds never fences its zone (80 % is trusted locally: 16 s) and the
/// target cannot complete on its own meanwhile (it waits for the lease to
/// expire), so the step under test is the only way forward.
const PAUSE_SAFE_LEASE_MS: &str = "20000";

/// Lease TTL of "the source never comes back" (the brief's 2 s).
const SHORT_LEASE: Duration = Duration::from_secs(2);

/// `TARGET_GONE_GRACE` of `runtime/moves/transfer.rs` (private there): how long
/// the source waits on a target missing from the registry before it
/// cancels.
const TARGET_GONE_GRACE: Duration = Duration::from_secs(10);

/// Slack on every documented bound: a 2-core machine running two of these
/// tests at once schedules late by up to a few seconds.
const SLACK: Duration = Duration::from_secs(4);

/// Readiness waits (shards registered, zones claimed, a transfer settled).
const READY_WAIT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(20);

/// `shard-a` hosts the city (the zone every test transfers), `shard-b`
/// every other zone, an optional `shard-c` nothing.
struct Cluster {
    redis: RedisServer,
    keys: TempKeys,
    dir: Directory,
    a: Proc,
    b: Proc,
    c: Option<Proc>,
    /// `a`'s extra flags, reused when it restarts.
    extra_a: Vec<String>,
}

fn owned(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn city() -> Vec<String> {
    vec!["city".to_string()]
}

fn b_zones() -> Vec<String> {
    starter_zones()
        .into_iter()
        .filter(|z| z != "city")
        .collect()
}

impl Cluster {
    /// Start `a` and `b` (and `c` when `extra_c` is given) and wait until
    /// every shard is registered and the city is served by `a`.
    async fn start(
        extra_a: &[&str],
        extra_b: &[&str],
        extra_c: Option<&[&str]>,
    ) -> anyhow::Result<Cluster> {
        let redis = RedisServer::start()?;
        let keys = TempKeys::generate()?;
        let extra_a = owned(extra_a);
        let a = start_keyed_world("shard-a", &redis.url, &city(), keys.path(), None, &extra_a)?;
        let b = start_keyed_world(
            "shard-b",
            &redis.url,
            &b_zones(),
            keys.path(),
            None,
            extra_b,
        )?;
        let c = match extra_c {
            Some(extra) => Some(start_keyed_world(
                "shard-c",
                &redis.url,
                &[] as &[&str],
                keys.path(),
                None,
                extra,
            )?),
            None => None,
        };
        let dir = Directory::connect(&redis.url).await?;
        let cluster = Cluster {
            redis,
            keys,
            dir,
            a,
            b,
            c,
            extra_a,
        };
        let shards = if cluster.c.is_some() { 3 } else { 2 };
        let dir = &cluster.dir;
        eventually(
            "every shard registered, the city on shard-a",
            READY_WAIT,
            || async move {
                let live = dir.shards().await?.len();
                let owner = dir.zone_owner("city").await?.map(|(o, _)| o);
                Ok((live == shards && owner.as_deref() == Some("shard-a")).then_some(()))
            },
        )
        .await?;
        Ok(cluster)
    }

    /// SIGKILL `a` (if still running) and start it again: same id, zones,
    /// address and flags.
    fn restart_a(&mut self) -> anyhow::Result<()> {
        let addr = self.a.addr.clone();
        self.a.kill();
        self.a = start_keyed_world(
            "shard-a",
            &self.redis.url,
            &city(),
            self.keys.path(),
            Some(&addr),
            &self.extra_a,
        )?;
        assert_eq!(self.a.addr, addr);
        Ok(())
    }

    fn addrs(&self) -> Vec<String> {
        vec![self.a.addr.clone(), self.b.addr.clone()]
    }

    /// The certificate a test's `Play` client presents to the keyed shards,
    /// as the gate does.
    fn gate_tls(&self) -> TlsKeys {
        self.keys.tls(Role::Gate)
    }

    /// `telosctl transfer <zone> --to <to>` (no wait): the operator's
    /// proposal, which must be recorded now.
    fn propose(&self, zone: &str, to: &str) -> anyhow::Result<()> {
        let out = tokio::task::block_in_place(|| {
            telosctl(&self.redis.url, &["transfer", zone, "--to", to])
        })?;
        anyhow::ensure!(
            out.success() && out.stdout.contains("recorded"),
            "{}{}",
            out.stdout,
            out.stderr
        );
        Ok(())
    }

    /// `telosctl status` (tables), or `status --json` parsed.
    fn status_text(&self) -> anyhow::Result<String> {
        let out = tokio::task::block_in_place(|| telosctl(&self.redis.url, &["status"]))?;
        anyhow::ensure!(out.success(), "{}", out.stderr);
        Ok(out.stdout)
    }

    fn status_json(&self) -> anyhow::Result<serde_json::Value> {
        let out = tokio::task::block_in_place(|| telosctl(&self.redis.url, &["status", "--json"]))?;
        anyhow::ensure!(out.success(), "{}", out.stderr);
        Ok(serde_json::from_str(&out.stdout)?)
    }

    /// `status --json`'s row of `zone`.
    fn zone_status(&self, zone: &str) -> anyhow::Result<serde_json::Value> {
        let v = self.status_json()?;
        v["zones"]
            .as_array()
            .and_then(|zs| zs.iter().find(|z| z["id"] == zone).cloned())
            .with_context(|| format!("no zone {zone} in {v}"))
    }

    /// Until no transfer of `zone` is pending and `to` holds its lease;
    /// returns the generation. On failure the error carries the shards'
    /// logs (an `Err` return, unlike a panic, does not keep them).
    async fn settled_on(&self, zone: &str, to: &str, within: Duration) -> anyhow::Result<u64> {
        let dir = &self.dir;
        eventually(&format!("{zone} settled on {to}"), within, || async move {
            let pending = dir.transfer(zone).await?;
            Ok(match dir.zone_owner(zone).await? {
                Some((owner, generation)) if pending.is_none() && owner == to => Some(generation),
                _ => None,
            })
        })
        .await
        .with_context(|| self.logs())
    }

    /// Every shard's log, for a failure message.
    fn logs(&self) -> String {
        let mut out = String::new();
        for p in [Some(&self.a), Some(&self.b), self.c.as_ref()]
            .into_iter()
            .flatten()
        {
            out += &format!("--- {}:\n{}\n", p.addr, p.log_text());
        }
        out
    }

    /// Create `name` (in the start room, the city) and log it out again,
    /// waiting until no shard lists it online: a fresh login of it then
    /// finds its zone through routing, not through a stale online entry.
    async fn create_offline(&self, name: &str) -> anyhow::Result<()> {
        let mut d =
            Driver::login_with(&self.a.addr, Some(&self.gate_tls()), name, PASSWORD, true).await?;
        // Offline only once the quit closed the session (its save landed):
        // a session still closing would list the name online for a moment
        // after the list below was read, sending the test's logins to it.
        let reason = d.quit().await?;
        anyhow::ensure!(reason.contains("Goodbye"), "{reason}");
        let dir = &self.dir;
        eventually(&format!("{name} offline"), READY_WAIT, || async move {
            let online = dir.online().await?;
            Ok((!online.iter().any(|p| p.name.eq_ignore_ascii_case(name))).then_some(()))
        })
        .await
    }
}

/// Poll `probe` every [`POLL`] until it yields a value, failing after
/// `within` with `what`.
async fn eventually<T, F, Fut>(what: &str, within: Duration, mut probe: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    let until = Instant::now() + within;
    loop {
        if let Some(v) = probe().await? {
            return Ok(v);
        }
        if Instant::now() >= until {
            bail!("{what}: not within {within:?}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// A player in the city, logged in at `a`, that journals and can resume
/// at either shard (like a gate); `sent` is every journal entry acked.
async fn journaling_player(c: &Cluster, name: &str) -> anyhow::Result<(Driver, Vec<String>)> {
    let mut d = Driver::login_with(&c.a.addr, Some(&c.gate_tls()), name, PASSWORD, true).await?;
    d.set_shards(c.addrs());
    let mut sent = Vec::new();
    journal(&mut d, &mut sent, "before", 5).await?;
    Ok((d, sent))
}

async fn journal(
    d: &mut Driver,
    sent: &mut Vec<String>,
    tag: &str,
    n: usize,
) -> anyhow::Result<()> {
    for i in 0..n {
        let line = format!("{} {tag} {i}", d.name);
        d.command(&format!("journal {line}")).await?;
        sent.push(line);
    }
    Ok(())
}

/// After the transfer: the player journals again (resuming wherever the
/// city is served now), is in the city on `shard`, and its journal is
/// exactly what it sent, in order.
async fn check_player(d: &mut Driver, mut sent: Vec<String>, shard: &str) -> anyhow::Result<()> {
    journal(d, &mut sent, "after", 3).await?;
    let (zone, _, on) = d.where_().await?;
    assert_eq!((zone.as_str(), on.as_str()), ("city", shard), "{}", d.name);
    assert_eq!(d.journal().await?, sent, "{}: journal exact", d.name);
    Ok(())
}

/// Read `stream` until `Attached`, failing on `Closed`.
async fn attached(stream: &mut PlayStream) -> anyhow::Result<telos_proto::v1::Attached> {
    stream
        .until(|f| match f {
            Frame::Attached(a) => Some(Ok(a.clone())),
            Frame::Closed(c) => Some(Err(anyhow::anyhow!("closed: {}", c.reason))),
            Frame::Redirect(r) => Some(Err(anyhow::anyhow!("redirected to {}", r.addr))),
            _ => None,
        })
        .await?
}

/// 1. A fresh login for a player of the zone, while the transfer is
/// pending (source paused before it could close), goes to the target,
/// parks there with the "world shifts" line instead of failing, and gets
/// in on the target once the source resumes and completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_login_mid_transfer_parks_on_the_target_then_gets_in() -> anyhow::Result<()> {
    let c = Cluster::start(&["--lease-ttl-ms", PAUSE_SAFE_LEASE_MS], &[], None).await?;
    c.create_offline("Parker").await?;

    c.a.signal(libc::SIGSTOP);
    c.propose("city", "shard-b")?;
    let mut s = PlayStream::open_with(&c.b.addr, Some(&c.gate_tls())).await?;
    s.login("Parker", PASSWORD, false, "conn-parker").await?;
    s.until_output(SHIFT).await?;
    // Parked, not refused: the source is still paused, the record pending.
    assert!(c.dir.transfer("city").await?.is_some());
    c.a.signal(libc::SIGCONT);

    let a = attached(&mut s).await?;
    assert_eq!(a.shard_id, "shard-b");
    c.settled_on("city", "shard-b", READY_WAIT).await?;
    let text = s.command(1, "where").await?;
    assert!(
        text.contains("zone=city") && text.contains("shard=shard-b"),
        "{text}"
    );
    assert_eq!(s.transcript.matches(SHIFT).count(), 1, "told once");
    Ok(())
}

/// 2. A login that lands on a third shard mid-transfer is answered with a
/// redirect to the target (the seed's "conflict, retried against the
/// target"), parks there and gets in; the player ends on the target.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_on_a_third_shard_mid_transfer_is_sent_to_the_target() -> anyhow::Result<()> {
    let metrics_b = format!("127.0.0.1:{}", free_port());
    let c = Cluster::start(
        &["--lease-ttl-ms", PAUSE_SAFE_LEASE_MS],
        &["--metrics-listen", &metrics_b],
        Some(&[]),
    )
    .await?;
    let shard_c = c.c.as_ref().expect("shard-c").addr.clone();
    c.create_offline("Roamer").await?;
    let parked = |text: &str| sample(text, "telos_parked_opens_total");
    let parked_before = parked(&scrape(&metrics_b).await?);

    c.a.signal(libc::SIGSTOP);
    c.propose("city", "shard-b")?;
    let tls = c.gate_tls();
    let login = tokio::spawn(async move {
        let mut d = Driver::login_with(&shard_c, Some(&tls), "Roamer", PASSWORD, false).await?;
        let place = d.where_().await?;
        anyhow::Ok((d, place))
    });
    // The login followed c's redirect to b and parked there: now let the
    // source close the zone.
    eventually("the login parked on shard-b", READY_WAIT, || {
        let m = metrics_b.clone();
        async move { Ok((parked(&scrape(&m).await?) > parked_before).then_some(())) }
    })
    .await?;
    c.a.signal(libc::SIGCONT);

    let (d, (zone, _, on)) = login.await??;
    assert_eq!((zone.as_str(), on.as_str()), ("city", "shard-b"));
    assert_eq!(d.redirects, 1, "one hop: c -> b");
    assert!(d.transcript.contains(SHIFT), "{}", d.transcript);
    c.settled_on("city", "shard-b", READY_WAIT).await?;
    Ok(())
}

/// 3. The source crashes after the record is written, before it completes
/// (paused first so it cannot complete, then SIGKILLed), and restarts with
/// the same id, zones and address: it finds the record and its previous
/// incarnation's lease, waits for that lease to lapse (it never takes over
/// a predecessor's live lease) and completes. The zone ends on the target
/// and every player's journal is exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_crash_before_completion_resumes_at_its_restart() -> anyhow::Result<()> {
    let mut c = Cluster::start(&["--lease-ttl-ms", PAUSE_SAFE_LEASE_MS], &[], None).await?;
    let mut players = Vec::new();
    for name in ["Crasha", "Crashb", "Crashc"] {
        players.push(journaling_player(&c, name).await?);
    }
    let (_, closed_gen) = c.dir.zone_owner("city").await?.context("city owner")?;

    c.a.signal(libc::SIGSTOP);
    c.propose("city", "shard-b")?;
    c.restart_a()?; // SIGKILL (a stopped process dies too), then start again
    // The restarted process holds a fencing token of its own (issue 17,
    // defect 2): it never releases its predecessor's live lease (that one
    // may only be paused), so it completes once that lease has lapsed.
    let lease = Duration::from_millis(PAUSE_SAFE_LEASE_MS.parse()?);
    let generation = c.settled_on("city", "shard-b", lease + READY_WAIT).await?;
    assert_eq!(
        generation,
        closed_gen + 1,
        "completed at the closed generation"
    );
    // The restarted source completed it (the target cannot: the source is
    // live and its old lease had not expired).
    assert!(
        c.a.log_text().contains("transfer completed"),
        "{}",
        c.a.log_text()
    );
    for (mut d, sent) in players {
        check_player(&mut d, sent, "shard-b").await?;
        assert!(d.resumes >= 1, "{}: the crash broke its stream", d.name);
    }
    let row = c.zone_status("city")?;
    assert_eq!(row["owner"], "shard-b", "{row}");
    assert!(row["transfer"].is_null(), "{row}");
    Ok(())
}

/// 4. The source crashes after its completion landed (it never learned the
/// answer) and restarts: the completion it proposes again — same zone,
/// same source, same closed generation — is answered `NoRecord` and
/// changes nothing; the restarted source does not take the zone back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_completion_after_a_crash_is_harmless() -> anyhow::Result<()> {
    let mut c = Cluster::start(&[], &[], None).await?;
    let (_, closed_gen) = c.dir.zone_owner("city").await?.context("city owner")?;
    let out = tokio::task::block_in_place(|| {
        telosctl(
            &c.redis.url,
            &["transfer", "city", "--to", "shard-b", "--wait", "20"],
        )
    })?;
    assert!(out.success(), "{}{}", out.stdout, out.stderr);
    let after = c.dir.zone_owner("city").await?;
    assert_eq!(after, Some(("shard-b".to_string(), closed_gen + 1)));

    c.restart_a()?;
    let ttl = Duration::from_secs(6);
    for _ in 0..2 {
        let dup = c
            .dir
            .complete_transfer("city", "shard-a", closed_gen, ttl)
            .await?;
        assert_eq!(dup, Completion::NoRecord);
    }
    assert_eq!(c.dir.zone_owner("city").await?, after);
    assert_eq!(c.dir.zone_generation("city").await?, closed_gen + 1);
    assert_eq!(c.dir.transfer("city").await?, None);
    // The restarted source's boot loop finds the city held by b and leaves
    // it: a player logging in at a is sent to b.
    let mut d =
        Driver::login_with(&c.a.addr, Some(&c.gate_tls()), "Stayer", PASSWORD, true).await?;
    let (zone, _, on) = d.where_().await?;
    assert_eq!((zone.as_str(), on.as_str()), ("city", "shard-b"));
    assert_eq!(c.dir.zone_owner("city").await?, after);
    Ok(())
}

/// 5. Against real Redis, no shards: a completion is fenced by the exact
/// generation the source closed at. Before the close it is `StillOpen`;
/// at an older generation `Stale`, from another source `WrongSource`,
/// each leaving the record pending and the zone closed; at the right
/// generation `Completed` (the zone re-pointed at the next generation, the
/// record gone); once more, `NoRecord`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_completion_is_rejected_and_the_exact_one_lands() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let dir = Directory::connect(&redis.url).await?;
    let ttl = Duration::from_secs(6);
    dir.register_zones(&["city".to_string()]).await?;
    let target = ShardInfo {
        id: "dst".into(),
        addr: "127.0.0.1:1".into(),
        state: ShardState::Live,
        players: 0,
        capacity: 10,
        handoff_version: 1,
        incarnation: 0,
    };
    dir.heartbeat(&target, Duration::from_secs(60)).await?;
    // An earlier owner's claim and close, so "gen - 1" is a real close.
    let Claim::Acquired { r#gen: old } = dir.claim_zone("city", "src", ttl).await? else {
        bail!("claim refused");
    };
    assert!(dir.release_zone("city", "src", old).await?);
    let Claim::Acquired { r#gen: closed } = dir.claim_zone("city", "src", ttl).await? else {
        bail!("claim refused");
    };
    assert_eq!(closed, old + 1);
    assert_eq!(
        dir.propose_transfer(
            "city",
            "dst",
            telos_redis::directory::events::Cause::Operator
        )
        .await?,
        Ok(Proposal::Recorded { from: "src".into() })
    );

    let complete = |from: &'static str, generation: u64| {
        let dir = dir.clone();
        async move { dir.complete_transfer("city", from, generation, ttl).await }
    };
    assert_eq!(complete("src", closed).await?, Completion::StillOpen);
    assert!(dir.release_zone("city", "src", closed).await?, "the close");
    assert_eq!(
        complete("src", closed - 1).await?,
        Completion::Stale { current: closed }
    );
    assert_eq!(complete("dst", closed).await?, Completion::WrongSource);
    let pending = dir.transfer("city").await?.context("still pending")?;
    assert_eq!((pending.from.as_str(), pending.to.as_str()), ("src", "dst"));
    assert_eq!(dir.zone_owner("city").await?, None, "still closed");
    assert_eq!(dir.zone_generation("city").await?, closed);

    assert_eq!(
        complete("src", closed).await?,
        Completion::Completed { r#gen: closed + 1 }
    );
    assert_eq!(
        dir.zone_owner("city").await?,
        Some(("dst".to_string(), closed + 1))
    );
    assert_eq!(dir.transfer("city").await?, None);
    assert!(dir.transfers().await?.is_empty());
    assert_eq!(complete("src", closed).await?, Completion::NoRecord);
    assert_eq!(
        dir.zone_owner("city").await?,
        Some(("dst".to_string(), closed + 1))
    );
    Ok(())
}

/// 6a. The source dies mid-transfer and never comes back: once its
/// registry entry and its lease have expired the target completes the
/// transfer itself, within max(lease TTL, presence TTL) + one poll. The
/// target serves the zone, the players resume there with exact journals,
/// and `status` shows no pending transfer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_that_never_returns_is_completed_by_the_target() -> anyhow::Result<()> {
    let lease = SHORT_LEASE.as_millis().to_string();
    let c = Cluster::start(
        &["--lease-ttl-ms", &lease],
        &["--lease-ttl-ms", &lease],
        None,
    )
    .await?;
    let mut players = Vec::new();
    for name in ["Lefta", "Leftb"] {
        players.push(journaling_player(&c, name).await?);
    }
    let (_, closed_gen) = c.dir.zone_owner("city").await?.context("city owner")?;

    // The last moment the source could have heartbeated or renewed.
    let stopped = Instant::now();
    c.a.signal(libc::SIGSTOP);
    c.propose("city", "shard-b")?;
    c.a.signal(libc::SIGKILL);
    let bound = SHORT_LEASE.max(PRESENCE_TTL) + TRANSFER_POLL;
    let generation = c.settled_on("city", "shard-b", bound + SLACK).await?;
    let took = stopped.elapsed();
    eprintln!("the target completed {took:?} after the source stopped (bound {bound:?})");
    assert_eq!(generation, closed_gen + 1);
    assert!(c.b.log_text().contains("transfer source is gone"));

    let row = c.zone_status("city")?;
    assert_eq!(row["owner"], "shard-b", "{row}");
    assert!(row["transfer"].is_null(), "{row}");
    for (mut d, sent) in players {
        check_player(&mut d, sent, "shard-b").await?;
    }
    Ok(())
}

/// 6b. The target dies before the source got to close: the source waits
/// out the target's absence from the registry for `TARGET_GONE_GRACE`,
/// then cancels with a reason that `telosctl status` shows; the zone stays
/// on the source and keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_target_is_cancelled_with_a_reason() -> anyhow::Result<()> {
    let mut c = Cluster::start(&["--lease-ttl-ms", PAUSE_SAFE_LEASE_MS], &[], None).await?;
    let (_, generation) = c.dir.zone_owner("city").await?.context("city owner")?;

    c.a.signal(libc::SIGSTOP);
    c.propose("city", "shard-b")?;
    c.b.kill();
    let dir = &c.dir;
    eventually("shard-b gone from the registry", PRESENCE_TTL + SLACK, || async move {
        Ok((!dir.shards().await?.iter().any(|s| s.id == "shard-b")).then_some(()))
    })
    .await?;
    let resumed = Instant::now();
    c.a.signal(libc::SIGCONT);
    eventually(
        "the transfer cancelled",
        TARGET_GONE_GRACE + TRANSFER_POLL + SLACK,
        || async move { Ok(dir.transfer("city").await?.is_none().then_some(())) },
    )
    .await?;
    let took = resumed.elapsed();
    assert!(took >= TARGET_GONE_GRACE, "cancelled after {took:?}");

    let reason = "target shard shard-b is gone";
    let text = c.status_text()?;
    assert!(text.contains(&format!("cancelled: {reason}")), "{text}");
    let row = c.zone_status("city")?;
    assert_eq!(row["transfer_cancelled"], reason, "{row}");
    assert!(row["transfer"].is_null(), "{row}");
    // Never left the source: same owner, same generation, still playable.
    assert_eq!(row["owner"], "shard-a", "{row}");
    assert_eq!(row["gen"], generation, "{row}");
    let mut d =
        Driver::login_with(&c.a.addr, Some(&c.gate_tls()), "Keeper", PASSWORD, true).await?;
    let (zone, _, on) = d.where_().await?;
    assert_eq!((zone.as_str(), on.as_str()), ("city", "shard-a"));
    Ok(())
}

/// 7. `telosctl status` shows a pending transfer, its pair and its age,
/// and the age grows while it stays pending; once it completes the row
/// shows the new owner and no transfer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_a_pending_transfer_and_its_growing_age() -> anyhow::Result<()> {
    let c = Cluster::start(&["--lease-ttl-ms", PAUSE_SAFE_LEASE_MS], &[], None).await?;
    c.a.signal(libc::SIGSTOP);
    c.propose("city", "shard-b")?;

    let first = c.zone_status("city")?;
    let t = &first["transfer"];
    assert_eq!(
        (&t["from"], &t["to"]),
        (&"shard-a".into(), &"shard-b".into())
    );
    let age = t["age_s"].as_f64().context("age_s")?;
    assert!((0.0..5.0).contains(&age), "{first}");
    let later = eventually("age_s grew by a second", READY_WAIT, || async {
        let row = c.zone_status("city")?;
        let now = row["transfer"]["age_s"].as_f64().context("age_s")?;
        Ok((now >= age + 1.0).then_some(now))
    })
    .await?;
    assert!(later > age);
    let text = c.status_text()?;
    let line = text
        .lines()
        .find(|l| l.starts_with("city "))
        .with_context(|| text.clone())?;
    assert!(line.contains("shard-a -> shard-b (pending"), "{line}");

    c.a.signal(libc::SIGCONT);
    c.settled_on("city", "shard-b", READY_WAIT).await?;
    let row = c.zone_status("city")?;
    assert_eq!(row["owner"], "shard-b", "{row}");
    assert!(row["transfer"].is_null(), "{row}");
    Ok(())
}
