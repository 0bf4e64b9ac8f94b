//! Fault tests of the cross-shard player handoff: real Redis, real
//! `telos-world` processes, killed, paused and restarted mid-handoff, with
//! a [`Driver`] that recovers like the gate. Each checks the invariants
//! from what the player saw: every journal line the driver sent appears
//! exactly once, in order; the player ends up where the walk says; the
//! durable row is fenced by the newest epoch.

use std::time::Duration;

use anyhow::{Context, bail};
use telos_proto::v1::Redirect;
use telos_redis::store::{CharacterRow, Store};
use telos_testkit::RedisServer;
use telos_testkit::driver::Driver;
use telos_testkit::keys::TempKeys;
use telos_testkit::metrics::{sample, scrape};
use telos_testkit::process::{Proc, start_keyed_world};
use telos_testkit::redis::free_port;
use telos_testkit::world::opposite;
use telos_testkit::world::{path_to_zone, start_room, starter_zones, walk};
use telos_tls::Role;
use telos_world::game::from_state_json;
use telos_world::handoff::context::{PENDING_TTL, RPC_TIMEOUT};
use telos_world::handoff::fence::SETTLE_BOUND;
use telos_world::handoff::snapshot::handoff_token;
use telos_world::zone::WALK_RETRY_WINDOW;
use tokio::time::Instant;

const PASSWORD: &str = "correct horse";

/// What a refused handoff tells the player (source.rs `STAY`): every
/// refused move starts `You can't go that way` (CONTRACT.md).
const STAY: &str = "You can't go that way right now: the way ahead shimmers";

/// Readiness waits (a restarted shard's zones, a row written at the pending
/// TTL): generous against a loaded machine, well inside a test's budget.
const READY_WAIT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(20);

/// Two keyed shards over one Redis: `a` hosts the city, `b` the rest.
struct Cluster {
    redis: RedisServer,
    keys: TempKeys,
    a: Proc,
    b: Proc,
    /// `b`'s extra flags, reused when it restarts.
    extra_b: Vec<String>,
}

fn b_zones() -> Vec<String> {
    starter_zones()
        .into_iter()
        .filter(|z| z != "city")
        .collect()
}

impl Cluster {
    fn start(extra_a: &[&str], extra_b: &[&str]) -> anyhow::Result<Cluster> {
        let redis = RedisServer::start()?;
        let keys = TempKeys::generate()?;
        let owned = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let (extra_a, extra_b) = (owned(extra_a), owned(extra_b));
        let city = vec!["city".to_string()];
        let a = start_keyed_world("shard-a", &redis.url, &city, keys.path(), None, &extra_a)?;
        let b = start_keyed_world(
            "shard-b",
            &redis.url,
            &b_zones(),
            keys.path(),
            None,
            &extra_b,
        )?;
        Ok(Cluster {
            redis,
            keys,
            a,
            b,
            extra_b,
        })
    }

    /// SIGKILL `b` and start it again: same address, id and zones.
    fn restart_b(&mut self) -> anyhow::Result<()> {
        let addr = self.b.addr.clone();
        self.b.kill();
        self.b = start_keyed_world(
            "shard-b",
            &self.redis.url,
            &b_zones(),
            self.keys.path(),
            Some(&addr),
            &self.extra_b,
        )?;
        assert_eq!(self.b.addr, addr);
        Ok(())
    }

    fn addrs(&self) -> Vec<String> {
        vec![self.a.addr.clone(), self.b.addr.clone()]
    }

    async fn store(&self) -> anyhow::Result<Store> {
        Ok(Store::connect(&self.redis.url).await?)
    }

    /// Overwrite one field of a character row (`telos:char:<name>`).
    async fn set_row_field(&self, name: &str, field: &str, value: &str) -> anyhow::Result<()> {
        let client = redis::Client::open(self.redis.url.as_str())?;
        let mut conn = client.get_multiplexed_async_connection().await?;
        let _: i64 = redis::cmd("HSET")
            .arg(format!("telos:char:{}", name.to_ascii_lowercase()))
            .arg(field)
            .arg(value)
            .query_async(&mut conn)
            .await?;
        Ok(())
    }
}

async fn row(store: &Store, name: &str) -> anyhow::Result<CharacterRow> {
    store
        .load(&name.to_ascii_lowercase())
        .await?
        .with_context(|| format!("no row for {name}"))
}

/// The journal entries of a durable row.
fn row_journal(row: &CharacterRow) -> anyhow::Result<Vec<String>> {
    Ok(from_state_json(&row.state_json)?
        .journal
        .into_iter()
        .collect())
}

/// Log in at `a`, give the driver both shards to resume at, and walk up to
/// the forest boundary. Returns the driver and the crossing direction.
async fn to_the_boundary(c: &Cluster, name: &str) -> anyhow::Result<(Driver, String)> {
    let mut p = Driver::login_with(
        &c.a.addr,
        Some(&c.keys.tls(Role::Gate)),
        name,
        PASSWORD,
        true,
    )
    .await?;
    p.set_shards(c.addrs());
    let route = path_to_zone(&start_room(), "forest");
    let (last, approach) = route.split_last().context("a route")?;
    for dir in approach {
        p.command(dir).await?;
    }
    Ok((p, last.clone()))
}

/// Journal lines pipelined (sent without waiting); returns the last seq.
async fn journal_lines(
    p: &mut Driver,
    tag: &str,
    n: usize,
    expected: &mut Vec<String>,
) -> anyhow::Result<u64> {
    let mut seq = 0;
    for i in 0..n {
        let line = format!("{tag} {i}");
        seq = p.send(&format!("journal {line}")).await?;
        expected.push(line);
    }
    Ok(seq)
}

/// The room the crossing leads into.
fn forest_entry() -> String {
    let start = start_room();
    walk(&start, &path_to_zone(&start, "forest"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destination_killed_between_prepare_and_attach_loses_nothing() -> anyhow::Result<()> {
    let mut c = Cluster::start(&[], &[])?;
    let store = c.store().await?;
    // Cross with journal lines pipelined behind the move: they are frozen
    // on a and dropped when it redirects; only the driver still has them.
    let (mut p, mut expected, _, redirect) = up_to_the_redirect(&c, "Remy", 3).await?;
    assert_eq!(redirect.addr, c.b.addr);
    let first_epoch = row(&store, "Remy").await?.owner_epoch;
    assert_eq!(redirect.token, handoff_token("remy", first_epoch));

    // b dies holding the pending player; it comes back empty-handed.
    c.restart_b()?;
    // Ready when its forest actor runs again (the lease is re-claimed).
    c.b.wait_log("zone started zone=forest", READY_WAIT).await?;

    // The attach is refused (no pending record): the driver resumes, a
    // puts the player back from the durable row, the replayed move hands
    // the player off again, to the restarted b.
    p.follow_redirect(&redirect).await?;
    let (zone, room, shard) = p.where_().await?;
    assert_eq!(
        (zone.as_str(), room.as_str(), shard.as_str()),
        ("forest", forest_entry().as_str(), "shard-b"),
        "transcript:\n{}",
        p.transcript
    );
    assert!(p.resumes >= 1, "the lost arrival was resumed");
    c.b.wait_log("attach refused", READY_WAIT).await?;
    let seq = journal_lines(&mut p, "recovered", 2, &mut expected).await?;
    p.wait_ack(seq).await?;
    assert_eq!(p.journal().await?, expected);
    p.wait_durable(seq).await?;

    // At its pending TTL, a's frozen snapshot of the first attempt is
    // fenced out by the newer epochs: it never overwrites the row.
    c.a.wait_log(
        "frozen snapshot not saved: a newer owner already wrote",
        READY_WAIT,
    )
    .await?;
    let r = row(&store, "Remy").await?;
    assert!(r.owner_epoch > first_epoch, "{r:?}");
    assert_eq!(row_journal(&r)?, expected);
    assert_eq!(p.journal().await?, expected);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destination_down_past_the_pending_ttl_resumes_from_the_saved_snapshot()
-> anyhow::Result<()> {
    let mut c = Cluster::start(&[], &[])?;
    let store = c.store().await?;
    let (mut p, mut expected, move_seq, redirect) = up_to_the_redirect(&c, "Rook", 3).await?;
    let epoch = row(&store, "Rook").await?.owner_epoch;
    c.b.kill();

    // No Commit ever reaches a: at the TTL it saves the frozen snapshot,
    // the move applied, under the epoch it minted (the newest).
    let until = Instant::now() + READY_WAIT;
    loop {
        let r = row(&store, "Rook").await?;
        if r.applied_seq == move_seq && r.conn_id == p.conn_id {
            assert_eq!(r.owner_epoch, epoch);
            break;
        }
        if Instant::now() > until {
            bail!("the frozen snapshot was never saved: {r:?}");
        }
        tokio::time::sleep(POLL).await;
    }
    c.a.wait_log("no Commit within the pending TTL", READY_WAIT)
        .await?;

    // b comes back; the late attach finds nothing pending, the driver
    // resumes from the saved snapshot (in the forest, acked to the move)
    // and replays the lines that were frozen behind the move.
    c.restart_b()?;
    c.b.wait_log("zone started zone=forest", READY_WAIT).await?;
    p.follow_redirect(&redirect).await?;
    assert!(p.resumes >= 1);
    let (zone, room, shard) = p.where_().await?;
    assert_eq!(
        (zone.as_str(), room.as_str(), shard.as_str()),
        ("forest", forest_entry().as_str(), "shard-b")
    );
    let seq = journal_lines(&mut p, "recovered", 2, &mut expected).await?;
    p.wait_ack(seq).await?;
    assert_eq!(p.journal().await?, expected);
    p.wait_durable(seq).await?;
    assert_eq!(row_journal(&row(&store, "Rook").await?)?, expected);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_killed_after_the_redirect_activates_under_a_newer_epoch() -> anyhow::Result<()> {
    let mut c = Cluster::start(&[], &[])?;
    let store = c.store().await?;
    let (mut p, mut expected, move_seq, redirect) = up_to_the_redirect(&c, "Sage", 3).await?;
    // The handoff minted the snapshot's epoch: the token is derived from it.
    let snapshot_epoch = row(&store, "Sage").await?.owner_epoch;
    assert_eq!(redirect.token, handoff_token("sage", snapshot_epoch));

    // a dies before the destination's Commit can reach it.
    c.a.kill();
    let ack = p.follow_redirect(&redirect).await?;
    assert_eq!(ack, move_seq, "b resumes right after the move line");
    assert_eq!(p.resumes, 0, "a plain attach, no resume");
    c.b.wait_log("activating under a newer epoch", READY_WAIT)
        .await?;
    let (zone, room, shard) = p.where_().await?;
    assert_eq!(
        (zone.as_str(), room.as_str(), shard.as_str()),
        ("forest", forest_entry().as_str(), "shard-b")
    );
    let seq = journal_lines(&mut p, "on b", 2, &mut expected).await?;
    p.wait_ack(seq).await?;
    assert_eq!(p.journal().await?, expected);

    // b fenced a out before its first write, and writes under the newer epoch.
    let r = row(&store, "Sage").await?;
    assert!(
        r.owner_epoch > snapshot_epoch,
        "owner_epoch {} after a snapshot at {snapshot_epoch}",
        r.owner_epoch
    );
    p.wait_durable(seq).await?;
    let r = row(&store, "Sage").await?;
    assert!(r.owner_epoch > snapshot_epoch);
    assert_eq!(row_journal(&r)?, expected);
    Ok(())
}

/// Log in, journal three lines, walk to the boundary and cross with `after`
/// journal lines pipelined behind the move (frozen on the source, dropped
/// when it redirects: only the driver still has them). Returns the driver,
/// the lines journaled, the move's seq and the source's `Redirect`, not
/// followed yet.
async fn up_to_the_redirect(
    c: &Cluster,
    name: &str,
    after: usize,
) -> anyhow::Result<(Driver, Vec<String>, u64, Redirect)> {
    let mut expected = Vec::new();
    let (mut p, last) = to_the_boundary(c, name).await?;
    let seq = journal_lines(&mut p, "before", 3, &mut expected).await?;
    p.wait_ack(seq).await?;
    let move_seq = p.send(&last).await?;
    journal_lines(&mut p, "after", after, &mut expected).await?;
    let redirect = p.until_redirect().await?;
    Ok((p, expected, move_seq, redirect))
}

/// Lets a stopped process run again however the test ends.
struct Continue<'a>(&'a Proc);

impl Drop for Continue<'_> {
    fn drop(&mut self) {
        self.0.signal(libc::SIGCONT);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_source_holds_the_destinations_writes_and_answers() -> anyhow::Result<()> {
    let c = Cluster::start(&[], &[])?;
    let store = c.store().await?;
    let (mut p, mut expected, move_seq, redirect) = up_to_the_redirect(&c, "Hale", 0).await?;
    let snapshot_epoch = row(&store, "Hale").await?.owner_epoch;

    // a hangs before the destination's Commit reaches it: the Commit goes
    // unanswered for its whole RPC bound.
    c.a.signal(libc::SIGSTOP);
    let _continue = Continue(&c.a);
    let attached_at = Instant::now();
    let ack = p.follow_redirect(&redirect).await?;
    assert_eq!(ack, move_seq, "b resumes right after the move line");

    // b applies these lines while a is still stopped, but answers none of
    // them yet: an answer leaves once its line is durable (output commit),
    // and b writes nothing while the Commit is unresolved — the row is
    // still the source's, at the snapshot's epoch.
    let seq = journal_lines(&mut p, "held", 3, &mut expected).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let r = row(&store, "Hale").await?;
    assert_eq!(r.owner_epoch, snapshot_epoch);
    assert!(
        !row_journal(&r)?.iter().any(|l| l.starts_with("held")),
        "a held session wrote its row: {:?}",
        row_journal(&r)?
    );

    // The Commit's bound passes: b mints a newer epoch, commits, and only
    // then answers.
    p.wait_ack(seq).await?;
    assert!(
        attached_at.elapsed() >= RPC_TIMEOUT,
        "answered after {:?}: before the Commit resolved",
        attached_at.elapsed()
    );
    assert!(
        c.b.plain_log().contains("activating under a newer epoch"),
        "answered before b activated its own epoch"
    );
    p.wait_durable(seq).await?;
    let (zone, _, shard) = p.where_().await?;
    assert_eq!((zone.as_str(), shard.as_str()), ("forest", "shard-b"));
    let r = row(&store, "Hale").await?;
    assert!(r.owner_epoch > snapshot_epoch);
    assert_eq!(row_journal(&r)?, expected);

    // a runs again; its late view of the handoff changes nothing.
    drop(_continue);
    let seq = journal_lines(&mut p, "after", 2, &mut expected).await?;
    p.wait_durable(seq).await?;
    assert_eq!(p.journal().await?, expected);
    assert_eq!(p.resumes, 0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quit_that_cannot_be_saved_while_held_is_replayed_not_dropped() -> anyhow::Result<()> {
    // A long lease, so the store's pause can never cost a zone its lease.
    let ttl = ["--lease-ttl-ms", "20000"];
    let c = Cluster::start(&ttl, &ttl)?;
    let store = c.store().await?;
    // A bystander already in the forest, on b.
    let (mut other, cross) = to_the_boundary(&c, "Otto").await?;
    other.command(&cross).await?;
    let (zone, _, shard) = other.where_().await?;
    assert_eq!((zone.as_str(), shard.as_str()), ("forest", "shard-b"));
    let (mut p, mut expected, _, redirect) = up_to_the_redirect(&c, "Quin", 0).await?;

    // The source hangs, so the Commit goes unanswered; the store stops
    // answering too, so the destination can neither mint its own epoch nor
    // commit: the session stays held past the settle bound.
    c.a.signal(libc::SIGSTOP);
    let _continue = Continue(&c.a);
    p.follow_redirect(&redirect).await?;
    p.set_shards(vec![c.b.addr.clone()]);
    c.redis.pause()?;
    let paused = Paused(&c.redis);
    let seq = journal_lines(&mut p, "held", 2, &mut expected).await?;
    let quit = p.send("quit").await?;

    // Nothing is answered while nothing can be committed (output commit):
    // no answer a crash could take back, the quit's `Goodbye.` included.
    let waited = tokio::time::timeout(SETTLE_BOUND + Duration::from_secs(1), p.wait_ack(seq)).await;
    assert!(waited.is_err(), "answered while nothing could be committed");
    assert!(p.durable < seq, "durable while the store was paused");
    drop(paused);
    drop(_continue);
    // The quit is applied once, after every line before it, and saved;
    // only then the final close.
    let ended = p.wait_durable(quit + 1).await.unwrap_err();
    assert!(format!("{ended:#}").contains("Goodbye"), "{ended:#}");
    let r = row(&store, "Quin").await?;
    assert_eq!(
        row_journal(&r)?,
        expected,
        "every line durable exactly once"
    );
    assert!(r.quit_by(&r.conn_id), "the quit is on the row: {r:?}");
    // The bystander in the zone plays on.
    let (zone, _, _) = other.where_().await?;
    assert_eq!(zone, "forest");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_store_at_claim_refuses_the_handoff_and_the_player_stays() -> anyhow::Result<()>
{
    let c = Cluster::start(&[], &[])?;
    let store = c.store().await?;
    let mut expected = Vec::new();
    let (mut p, last) = to_the_boundary(&c, "Tove").await?;
    let seq = journal_lines(&mut p, "before", 2, &mut expected).await?;
    p.wait_ack(seq).await?;
    let (_, before, _) = p.where_().await?;
    let epoch = row(&store, "Tove").await?.owner_epoch;

    // HINCRBY owner_epoch fails: ClaimCharacter errors, not a miss.
    c.set_row_field("Tove", "owner_epoch", "not-a-number")
        .await?;
    let move_seq = p.send(&last).await?;
    let seq = journal_lines(&mut p, "stayed", 2, &mut expected).await?;
    c.a.wait_log(
        "ShardForZone + ClaimCharacter failed: refusing the handoff",
        READY_WAIT,
    )
    .await?;
    // A damaged row cannot be committed: its player's answers wait for it
    // (the zone commits without it, see the bystander tests), and come once
    // it is repaired.
    c.set_row_field("Tove", "owner_epoch", &epoch.to_string())
        .await?;
    let text = p.wait_ack(move_seq).await?;
    stayed(&c, &mut p, &text, seq, &before, "").await?;

    // Repaired: the same step crosses.
    crosses_and_saves(&mut p, &last, &mut expected, &store, "Tove").await
}

/// The move was refused at the claim: the player heard why, stays in the
/// city where they were, on a, and was never redirected. `context` is
/// added to the location's assertion message.
async fn stayed(
    c: &Cluster,
    p: &mut Driver,
    move_text: &str,
    seq: u64,
    before: &str,
    context: &str,
) -> anyhow::Result<()> {
    assert!(move_text.contains(STAY), "{move_text:?}");
    c.a.wait_log(
        "ShardForZone + ClaimCharacter failed: refusing the handoff",
        READY_WAIT,
    )
    .await?;
    p.wait_ack(seq).await?;
    let (zone, room, shard) = p.where_().await?;
    assert_eq!(
        (zone.as_str(), room.as_str(), shard.as_str()),
        ("city", before, "shard-a"),
        "{context}"
    );
    assert_eq!(p.redirects, 0);
    Ok(())
}

/// The same step again crosses to b; lines journaled there are applied
/// and saved exactly once, without a resume.
async fn crosses_and_saves(
    p: &mut Driver,
    last: &str,
    expected: &mut Vec<String>,
    store: &Store,
    name: &str,
) -> anyhow::Result<()> {
    p.command(last).await?;
    let (zone, _, shard) = p.where_().await?;
    assert_eq!((zone.as_str(), shard.as_str()), ("forest", "shard-b"));
    let seq = journal_lines(p, "crossed", 2, expected).await?;
    p.wait_ack(seq).await?;
    assert_eq!(&p.journal().await?, expected);
    assert_eq!(p.resumes, 0);
    p.wait_durable(seq).await?;
    assert_eq!(&row_journal(&row(store, name).await?)?, expected);
    Ok(())
}

/// Resumes a paused Redis however the test ends.
struct Paused<'a>(&'a RedisServer);

impl Drop for Paused<'_> {
    fn drop(&mut self) {
        let _ = self.0.resume();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_redis_at_the_move_refuses_the_handoff_and_the_player_stays()
-> anyhow::Result<()> {
    // A long lease, so the pause can never cost a zone its lease.
    let ttl = ["--lease-ttl-ms", "20000"];
    let c = Cluster::start(&ttl, &ttl)?;
    let store = c.store().await?;
    let mut expected = Vec::new();
    let (mut p, last) = to_the_boundary(&c, "Umi").await?;
    let seq = journal_lines(&mut p, "before", 2, &mut expected).await?;
    p.wait_ack(seq).await?;
    let (_, before, _) = p.where_().await?;

    // Paused just before the move line goes out, so Redis is unreachable
    // when the move is applied, whatever the scheduling.
    c.redis.pause()?;
    let paused = Paused(&c.redis);
    let paused_at = Instant::now();
    let move_seq = p.send(&last).await?;
    let seq = journal_lines(&mut p, "stayed", 2, &mut expected).await?;
    // The move is refused while Redis is paused; its answer waits for
    // Redis (output commit: the refusal's line must be durable first).
    c.a.wait_log(
        "ShardForZone + ClaimCharacter failed: refusing the handoff",
        READY_WAIT,
    )
    .await?;
    // Paused past the walk's retry window, so the move is refused for good.
    tokio::time::sleep(WALK_RETRY_WINDOW + Duration::from_secs(1)).await;
    drop(paused);
    let text = p.wait_ack(move_seq).await?;
    let pause = paused_at.elapsed();
    let context = format!("paused for {pause:?}");
    stayed(&c, &mut p, &text, seq, &before, &context).await?;

    // Redis is back: the same step crosses.
    crosses_and_saves(&mut p, &last, &mut expected, &store, "Umi").await
}

/// The handoff counters and pause histogram of one shard.
#[derive(Debug, PartialEq)]
struct HandoffMetrics {
    prepared: f64,
    committed: f64,
    refused: f64,
    expired: f64,
    pauses: f64,
}

async fn handoff_metrics(addr: &str) -> anyhow::Result<HandoffMetrics> {
    let text = scrape(addr).await?;
    let outcome = |o: &str| sample(&text, &format!("telos_handoffs_total{{outcome=\"{o}\"}}"));
    Ok(HandoffMetrics {
        prepared: outcome("prepared"),
        committed: outcome("committed"),
        refused: outcome("refused"),
        expired: outcome("expired"),
        pauses: sample(&text, "telos_handoff_pause_seconds_count"),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handoff_metrics_count_every_crossing_on_its_source() -> anyhow::Result<()> {
    const N: usize = 3;
    let (ma, mb) = (
        format!("127.0.0.1:{}", free_port()),
        format!("127.0.0.1:{}", free_port()),
    );
    let c = Cluster::start(&["--metrics-listen", &ma], &["--metrics-listen", &mb])?;
    let (mut p, last) = to_the_boundary(&c, "Vale").await?;
    let before = [handoff_metrics(&ma).await?, handoff_metrics(&mb).await?];
    for round in 0..N {
        p.command(&last).await?;
        let (zone, _, shard) = p.where_().await?;
        assert_eq!((zone.as_str(), shard.as_str()), ("forest", "shard-b"));
        p.command(opposite(&last)).await?;
        let (zone, _, shard) = p.where_().await?;
        assert_eq!(
            (zone.as_str(), shard.as_str()),
            ("city", "shard-a"),
            "round {round}"
        );
    }
    assert_eq!(p.redirects, 2 * N);
    let after = [handoff_metrics(&ma).await?, handoff_metrics(&mb).await?];
    // Each shard was the source of N crossings (a: into the forest, b: back).
    let n = N as f64;
    for (shard, (b, a)) in ["shard-a", "shard-b"].iter().zip(before.iter().zip(&after)) {
        let moved = HandoffMetrics {
            prepared: a.prepared - b.prepared,
            committed: a.committed - b.committed,
            refused: a.refused - b.refused,
            expired: a.expired - b.expired,
            pauses: a.pauses - b.pauses,
        };
        let want = HandoffMetrics {
            prepared: n,
            committed: n,
            refused: 0.0,
            expired: 0.0,
            pauses: n,
        };
        assert_eq!(moved, want, "{shard}: before {b:?}, after {a:?}");
        assert_eq!(a.pauses, n, "{shard}: one pause per crossing, ever");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prepared_handoff_nobody_attaches_to_is_saved_at_the_pending_ttl() -> anyhow::Result<()> {
    let c = Cluster::start(&[], &[])?;
    let store = c.store().await?;
    let (p, expected, move_seq, redirect) = up_to_the_redirect(&c, "Wren", 0).await?;
    let prepared_at = Instant::now();
    let epoch = row(&store, "Wren").await?.owner_epoch;
    assert_eq!(redirect.token, handoff_token("wren", epoch));
    let conn_id = p.conn_id.clone();
    // The gate vanishes: nobody ever attaches.
    drop(p);

    // At the TTL the holders of the newest epoch (a's frozen snapshot, b's
    // pending record: the same snapshot) save it; the row then carries the
    // move line's watermark.
    let until = Instant::now() + READY_WAIT;
    let saved = loop {
        let r = row(&store, "Wren").await?;
        if r.applied_seq == move_seq && r.conn_id == conn_id {
            break r;
        }
        if Instant::now() > until {
            bail!("the prepared handoff was never saved: {r:?}");
        }
        tokio::time::sleep(POLL).await;
    };
    assert!(
        prepared_at.elapsed() >= PENDING_TTL - Duration::from_secs(1),
        "saved after {:?}, before the pending TTL",
        prepared_at.elapsed()
    );
    assert_eq!(saved.owner_epoch, epoch, "saved under the snapshot's epoch");
    c.a.wait_log("no Commit within the pending TTL", READY_WAIT)
        .await?;
    c.b.wait_log("pending handoff expired", READY_WAIT).await?;
    assert_eq!(row_journal(&saved)?, expected);

    // A fresh login finds the player where the move took them.
    let mut q = Driver::login_with(
        &c.a.addr,
        Some(&c.keys.tls(Role::Gate)),
        "Wren",
        PASSWORD,
        false,
    )
    .await?;
    let (zone, room, shard) = q.where_().await?;
    assert_eq!(
        (zone.as_str(), room.as_str(), shard.as_str()),
        ("forest", forest_entry().as_str(), "shard-b")
    );
    assert_eq!(q.journal().await?, expected);
    Ok(())
}
