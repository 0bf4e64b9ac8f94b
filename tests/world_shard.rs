//! End to end, one shard at a time: a real `redis-server` and real
//! `telos-world` processes, driven over the `Play` service (no gate), plus
//! `telosctl` against them. The shards are keyed (mutual TLS, a gate's
//! certificate on every `Play` stream) but for the refusal test, which is
//! about the keyless dev mode.
//!
//! - walking between zones of one shard keeps input exactly once and in order;
//! - walking into a zone a keyless shard does not host is refused politely;
//! - SIGINT stops a shard cleanly (leases and registry entry released, state
//!   saved) and another shard picks the player up;
//! - `telosctl status --json`, `tier` and `keygen` as the CONTRACT states;
//! - bad world files and a missing `--shard-id` stop the shard at start.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use telos_proto::v1::server_frame::Frame;
use telos_redis::store::Store;
use telos_testkit::RedisServer;
use telos_testkit::cli::{
    EXIT_TIMEOUT, Finished, SIGINT, clean_command, run_to_exit, telosctl, wait_exit,
};
use telos_testkit::keys::TempKeys;
use telos_testkit::play::PlayStream;
use telos_testkit::process::{Proc, WorldOpts, start_world};
use telos_testkit::world::{
    copy_world, path_to_zone, start_room, starter_zones, walk, world_dir, zone_of,
};
use telos_tls::{Role, TlsKeys};
use telos_world::game::{Character, HUH, load_world, to_state_json};
use telos_world::handoff::source::KEYLESS;
use tokio::time::Instant;

const PASSWORD: &str = "correct horse";

/// How long a condition polled from the outside (registry heartbeat, lease
/// release) may take: several heartbeat periods (1 s) on a loaded machine.
const SETTLE: Duration = Duration::from_secs(15);
/// Poll period for those conditions.
const POLL: Duration = Duration::from_millis(100);
/// A clean SIGINT stop saves a handful of players and releases a few leases;
/// well under the shard's own 30 s deadline.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);

/// Keys for a keyed shard (mutual TLS, as every test here but the keyless
/// one runs), and the gate certificate a test's `Play` client presents.
fn keyed() -> anyhow::Result<(TempKeys, TlsKeys)> {
    let keys = TempKeys::generate()?;
    let tls = keys.tls(Role::Gate);
    Ok((keys, tls))
}

fn zone_refs(zones: &[String]) -> Vec<&str> {
    zones.iter().map(String::as_str).collect()
}

/// Wait for `Attached`, then for the room description that follows it.
async fn attached(s: &mut PlayStream) -> anyhow::Result<(u64, String)> {
    let got = s
        .until(|f| match f {
            Frame::Attached(a) => Some(Ok((a.ack_input_seq, a.shard_id.clone()))),
            Frame::Closed(c) => Some(Err(anyhow::anyhow!(
                "closed instead of attached: {}",
                c.reason
            ))),
            Frame::Redirect(r) => Some(Err(anyhow::anyhow!(
                "redirected to {} instead of attached",
                r.addr
            ))),
            _ => None,
        })
        .await??;
    s.until(|f| matches!(f, Frame::Output(_)).then_some(()))
        .await?;
    Ok(got)
}

/// Open a stream to `addr` (with mutual TLS when `tls` is given: a keyed
/// shard), log in (or create) and wait until attached.
async fn login(
    addr: &str,
    tls: Option<&TlsKeys>,
    name: &str,
    create: bool,
    conn_id: &str,
) -> anyhow::Result<PlayStream> {
    let mut s = PlayStream::open_with(addr, tls).await?;
    s.login(name, PASSWORD, create, conn_id).await?;
    attached(&mut s).await?;
    Ok(s)
}

async fn closed(s: &mut PlayStream) -> anyhow::Result<(String, bool)> {
    s.until(|f| match f {
        Frame::Closed(c) => Some((c.reason.clone(), c.r#final)),
        _ => None,
    })
    .await
}

/// `where: zone=<z> room=<r> shard=<s>` → (z, r, s).
fn where_fields(text: &str) -> (String, String, String) {
    let line = text
        .lines()
        .find(|l| l.starts_with("where: "))
        .unwrap_or_else(|| panic!("no where line in {text:?}"));
    let field = |name: &str| {
        line.split(' ')
            .find_map(|w| w.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in {line:?}"))
            .to_string()
    };
    (field("zone="), field("room="), field("shard="))
}

fn journal_listing(entries: &[String]) -> Vec<String> {
    entries
        .iter()
        .enumerate()
        .map(|(i, e)| format!("journal {}: {e}", i + 1))
        .chain(std::iter::once(format!("journal end {}", entries.len())))
        .collect()
}

async fn redis_conn(redis: &RedisServer) -> anyhow::Result<redis::aio::MultiplexedConnection> {
    Ok(redis::Client::open(redis.url.as_str())?
        .get_multiplexed_async_connection()
        .await?)
}

async fn key_exists(
    con: &mut redis::aio::MultiplexedConnection,
    key: &str,
) -> anyhow::Result<bool> {
    let n: u64 = redis::cmd("EXISTS").arg(key).query_async(con).await?;
    Ok(n == 1)
}

/// Poll `check` until it returns `Some`, failing after `SETTLE` with the
/// last thing it reported.
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Result<T, String>>>,
{
    let until = Instant::now() + SETTLE;
    loop {
        let last = match check().await? {
            Ok(t) => return Ok(t),
            Err(last) => last,
        };
        if Instant::now() > until {
            anyhow::bail!("{what}: not within {SETTLE:?}; last seen: {last}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The zone (other than the start room's) that is fewest steps away.
fn nearest_other_zone(start: &str) -> (String, Vec<String>) {
    starter_zones()
        .into_iter()
        .filter(|z| z != zone_of(start))
        .map(|z| {
            let path = path_to_zone(start, &z);
            (z, path)
        })
        .min_by_key(|(z, p)| (p.len(), z.clone()))
        .expect("the starter world has more than one zone")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn walking_into_a_sibling_zone_keeps_journal_lines_exactly_once_and_in_order()
-> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let (keys, tls) = keyed()?;
    let zones = starter_zones();
    let world =
        start_world(WorldOpts::new("w1", &redis.url, &zone_refs(&zones)).keyed(keys.path()))?;
    let start = start_room();
    let (target, path) = nearest_other_zone(&start);
    let (last, walk_in) = path.split_last().expect("a non-empty path");

    let mut s = login(&world.addr, Some(&tls), "Walker", true, "walk-1").await?;
    let mut seq = 0u64;
    let mut next = || {
        seq += 1;
        seq
    };
    let mut journal = Vec::new();
    for text in ["before 1", "before 2"] {
        assert_eq!(
            s.command(next(), &format!("journal {text}")).await?,
            "Noted.\n"
        );
        journal.push(text.to_string());
    }
    let (zone, room, _) = where_fields(&s.command(next(), "where").await?);
    assert_eq!(
        (zone.as_str(), room.as_str()),
        (zone_of(&start), start.as_str())
    );
    for dir in walk_in {
        let out = s.command(next(), dir).await?;
        assert!(!out.starts_with("You can't go that way"), "{dir}: {out}");
    }

    // The crossing, pipelined: the move and the lines behind it are all in
    // flight before anything is acknowledged.
    let move_seq = next();
    s.input(move_seq, last).await?;
    let mut last_seq = move_seq;
    for i in 1..=5 {
        let text = format!("during {i}");
        last_seq = next();
        s.input(last_seq, &format!("journal {text}")).await?;
        journal.push(text);
    }
    let mut crossing = String::new();
    loop {
        match s.next().await? {
            Some(Frame::Output(o)) => crossing.push_str(&o.text),
            Some(Frame::InputAck(a)) if a.seq >= last_seq => break,
            Some(Frame::Closed(c)) => panic!("closed while crossing: {}", c.reason),
            Some(_) => {}
            None => panic!("stream ended while crossing; transcript:\n{}", s.transcript),
        }
    }
    assert_eq!(
        crossing.matches("Noted.\n").count(),
        5,
        "every pipelined line applied once: {crossing}"
    );
    assert!(!crossing.contains("You can't go that way"), "{crossing}");

    let (zone, room, shard) = where_fields(&s.command(next(), "where").await?);
    assert_eq!(zone, target);
    assert_eq!(room, walk(&start, &path));
    assert_eq!(shard, "w1");

    assert_eq!(s.command(next(), "journal after 1").await?, "Noted.\n");
    journal.push("after 1".into());
    let listing = s.command(next(), "journal").await?;
    assert_eq!(
        listing.lines().map(str::to_string).collect::<Vec<_>>(),
        journal_listing(&journal)
    );

    // And it is what was saved: a fresh login resumes in the new zone.
    s.input(next(), "quit").await?;
    assert!(closed(&mut s).await?.1, "quit closes for good");
    let mut again = login(&world.addr, Some(&tls), "walker", false, "walk-2").await?;
    let (zone, _, _) = where_fields(&again.command(1, "where").await?);
    assert_eq!(zone, target);
    let listing = again.command(2, "journal").await?;
    assert_eq!(
        listing.lines().map(str::to_string).collect::<Vec<_>>(),
        journal_listing(&journal)
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn walking_into_a_zone_this_shard_does_not_host_is_refused_politely() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let start = start_room();
    let home = zone_of(&start).to_string();
    let world = start_world(WorldOpts::new("w1", &redis.url, &[home.as_str()]))?;
    // Any other zone will do; the nearest keeps the walk short. Every step
    // but the last must stay in the hosted zone.
    let (_, path) = nearest_other_zone(&start);
    let (last, walk_in) = path.split_last().expect("a non-empty path");
    for n in 0..=walk_in.len() {
        assert_eq!(zone_of(&walk(&start, &walk_in[..n])), home, "{path:?}");
    }

    let mut s = login(&world.addr, None, "Stayer", true, "stay-1").await?;
    let mut seq = 0u64;
    for step in walk_in {
        seq += 1;
        s.command(seq, step).await?;
    }
    seq += 1;
    let before = where_fields(&s.command(seq, "where").await?);
    // The refusal may come after the move's ack (a shard may first try to
    // hand the player off, and put them back when it cannot), so ask `where`
    // right behind the move and read everything up to that answer.
    seq += 1;
    s.input(seq, last).await?;
    seq += 1;
    let answer = s.command(seq, "where").await?;
    let (refusal, rest) = answer
        .split_once("where: ")
        .unwrap_or_else(|| panic!("no where line in {answer:?}"));
    let first = refusal.lines().next().unwrap_or_default();
    // A real exit is refused like any move (the line starts `You can't go
    // that way`), and says why: this shard has no keys, it never hands off.
    assert!(first != HUH.trim(), "{answer:?}");
    assert_eq!(first, KEYLESS, "{answer:?}");
    assert!(first.starts_with("You can't go that way: "), "{answer:?}");
    assert_eq!(
        before,
        where_fields(&format!("where: {rest}")),
        "the player stays where they were"
    );
    // Still playing normally.
    seq += 1;
    assert_eq!(s.command(seq, "journal still here").await?, "Noted.\n");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_saves_closes_releases_leases_and_leaves_the_registry() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let (keys, tls) = keyed()?;
    let zones = starter_zones();
    let mut world =
        start_world(WorldOpts::new("w1", &redis.url, &zone_refs(&zones)).keyed(keys.path()))?;
    let mut con = redis_conn(&redis).await?;

    let mut s = login(&world.addr, Some(&tls), "Sigrid", true, "sig-1").await?;
    let entries: Vec<String> = (1..=3).map(|i| format!("entry {i}")).collect();
    for (i, e) in entries.iter().enumerate() {
        assert_eq!(
            s.command(i as u64 + 1, &format!("journal {e}")).await?,
            "Noted.\n"
        );
    }
    // Everything is held before the stop: every lease and the registry entry.
    eventually("leases and registry entry present", || {
        let mut con = con.clone();
        let zones = zones.clone();
        async move {
            let mut missing = Vec::new();
            for z in &zones {
                let key = format!("telos:zone:{z}:lease");
                if !key_exists(&mut con, &key).await? {
                    missing.push(key);
                }
            }
            if !key_exists(&mut con, "telos:shard:w1").await? {
                missing.push("telos:shard:w1".into());
            }
            Ok(if missing.is_empty() {
                Ok(())
            } else {
                Err(format!("{missing:?}"))
            })
        }
    })
    .await?;

    // Read the `Closed` and let go of the stream, as a gate does before it
    // resumes the player elsewhere.
    world.signal(SIGINT);
    let (reason, is_final) = closed(&mut s).await?;
    assert!(
        !is_final,
        "a stop is not final: the gate resumes elsewhere ({reason})"
    );
    drop(s);
    let stopped = tokio::task::block_in_place(|| wait_exit(&mut world, STOP_TIMEOUT));
    let status = stopped.unwrap_or_else(|e| panic!("{e}; log:\n{}", world.log_text()));
    assert_eq!(
        status.code(),
        Some(0),
        "{status}; log:\n{}",
        world.log_text()
    );

    for z in &zones {
        let key = format!("telos:zone:{z}:lease");
        assert!(!key_exists(&mut con, &key).await?, "{key} was not released");
    }
    for key in ["telos:shard:w1", "telos:shard:w1:online"] {
        assert!(!key_exists(&mut con, key).await?, "{key} left behind");
    }
    let members: BTreeSet<String> = redis::cmd("SMEMBERS")
        .arg("telos:shards")
        .query_async(&mut con)
        .await?;
    assert!(!members.contains("w1"), "{members:?}");

    // Another shard on the same Redis serves the zones; the player comes
    // back with everything they wrote.
    let next =
        start_world(WorldOpts::new("w2", &redis.url, &zone_refs(&zones)).keyed(keys.path()))?;
    let mut again = login(&next.addr, Some(&tls), "sigrid", false, "sig-2").await?;
    let (_, _, shard) = where_fields(&again.command(1, "where").await?);
    assert_eq!(shard, "w2");
    let listing = again.command(2, "journal").await?;
    assert_eq!(
        listing.lines().map(str::to_string).collect::<Vec<_>>(),
        journal_listing(&entries)
    );
    Ok(())
}

/// A client that never closes its stream (a wedged gate, a half-open TCP
/// connection) must not hold a stopping shard up: SIGINT still exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_exits_even_when_a_client_keeps_its_stream_open() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let (keys, tls) = keyed()?;
    let zones = starter_zones();
    let mut world =
        start_world(WorldOpts::new("w1", &redis.url, &zone_refs(&zones)).keyed(keys.path()))?;
    let mut s = login(&world.addr, Some(&tls), "Holder", true, "hold-1").await?;
    assert_eq!(s.command(1, "journal held").await?, "Noted.\n");
    let stopped = tokio::task::block_in_place(|| world.stop_with(SIGINT, STOP_TIMEOUT));
    let status = stopped.unwrap_or_else(|e| panic!("{e}; log:\n{}", world.log_text()));
    assert_eq!(status.code(), Some(0), "{status}");
    let (_, is_final) = closed(&mut s).await?;
    assert!(!is_final);
    Ok(())
}

/// The first room of `zone` in the starter world.
fn first_room(zone: &str) -> anyhow::Result<String> {
    let def = load_world(&world_dir())?;
    Ok(def.zone(zone).expect("known zone").rooms[0].id.clone())
}

fn parse_status(out: &Finished) -> anyhow::Result<Value> {
    assert!(out.success(), "telosctl status failed: {}", out.stderr);
    assert_eq!(
        out.stdout.trim().lines().count(),
        1,
        "one JSON object: {}",
        out.stdout
    );
    Ok(serde_json::from_str(out.stdout.trim())?)
}

fn keys_of(v: &Value) -> BTreeSet<&str> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .map(String::as_str)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telosctl_status_json_shows_both_shards_their_zones_and_players() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let (keys, tls) = keyed()?;
    let start = start_room();
    let home = zone_of(&start).to_string();
    // Split: the start zone and every other remaining zone on s1, the rest on s2.
    let others: Vec<String> = starter_zones().into_iter().filter(|z| *z != home).collect();
    let mut a = vec![home.clone()];
    let mut b = Vec::new();
    for (i, z) in others.into_iter().enumerate() {
        if i % 2 == 0 { b.push(z) } else { a.push(z) }
    }
    let s1 = start_world(WorldOpts::new("s1", &redis.url, &zone_refs(&a)).keyed(keys.path()))?;
    let s2 = start_world(WorldOpts::new("s2", &redis.url, &zone_refs(&b)).keyed(keys.path()))?;

    // Two players in the start zone on s1; one saved in a zone of s2 logs in there.
    let _ann = login(&s1.addr, Some(&tls), "Ann", true, "ann").await?;
    let _ben = login(&s1.addr, Some(&tls), "Ben", true, "ben").await?;
    let away_room = first_room(&b[0])?;
    let store = Store::connect(&redis.url).await?;
    store
        .create_character(
            "Cyd",
            PASSWORD,
            &to_state_json(&Character::new("Cyd", &away_room)),
        )
        .await?;
    let mut cyd = login(&s2.addr, Some(&tls), "Cyd", false, "cyd").await?;
    let (zone, _, shard) = where_fields(&cyd.command(1, "where").await?);
    assert_eq!((zone.as_str(), shard.as_str()), (b[0].as_str(), "s2"));

    let expect_shard_players = BTreeMap::from([("s1".to_string(), 2u64), ("s2".to_string(), 1)]);
    let status = eventually("status shows both shards with their players", || {
        let url = redis.url.clone();
        let expect = expect_shard_players.clone();
        async move {
            let out = tokio::task::spawn_blocking(move || telosctl(&url, &["status", "--json"]))
                .await??;
            let v = parse_status(&out)?;
            let seen: BTreeMap<String, u64> = v["shards"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|s| {
                            (
                                s["id"].as_str().unwrap_or("?").to_string(),
                                s["players"].as_u64().unwrap_or(0),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            Ok(if seen == expect {
                Ok(v)
            } else {
                Err(out.stdout)
            })
        }
    })
    .await?;

    // Exact shape.
    assert_eq!(keys_of(&status), BTreeSet::from(["shards", "zones"]));
    let shards = status["shards"].as_array().expect("shards array");
    assert_eq!(shards.len(), 2, "{status}");
    for (shard, proc_) in shards.iter().zip([&s1, &s2]) {
        assert_eq!(
            keys_of(shard),
            BTreeSet::from(["id", "addr", "state", "players", "capacity"]),
            "{shard}"
        );
        assert_eq!(shard["addr"].as_str(), Some(proc_.addr.as_str()), "{shard}");
        assert_eq!(shard["state"], "live", "{shard}");
        assert!(shard["capacity"].as_u64().is_some_and(|c| c > 0), "{shard}");
    }
    assert_eq!(shards[0]["id"], "s1");
    assert_eq!(shards[1]["id"], "s2");

    let zones = status["zones"].as_array().expect("zones array");
    let owners: BTreeMap<&str, &str> = zones
        .iter()
        .map(|z| {
            assert_eq!(
                keys_of(z),
                BTreeSet::from(["id", "owner", "gen", "players", "transfer"]),
                "{z}"
            );
            assert!(z["gen"].as_u64().is_some_and(|g| g >= 1), "{z}");
            assert!(z["players"].is_u64(), "{z}");
            assert!(z["transfer"].is_null(), "{z}");
            (
                z["id"].as_str().expect("id"),
                z["owner"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    let expected_owners: BTreeMap<&str, &str> = a
        .iter()
        .map(|z| (z.as_str(), "s1"))
        .chain(b.iter().map(|z| (z.as_str(), "s2")))
        .collect();
    assert_eq!(owners, expected_owners);
    let shard_total: u64 = shards.iter().filter_map(|s| s["players"].as_u64()).sum();
    assert_eq!(shard_total, 3);
    Ok(())
}

/// Per-zone player counts in `status` add up to where the players are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telosctl_status_json_counts_players_per_zone() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let (keys, tls) = keyed()?;
    let start = start_room();
    let home = zone_of(&start).to_string();
    let zones = starter_zones();
    let world =
        start_world(WorldOpts::new("s1", &redis.url, &zone_refs(&zones)).keyed(keys.path()))?;
    let _ann = login(&world.addr, Some(&tls), "Ann", true, "ann").await?;
    let _ben = login(&world.addr, Some(&tls), "Ben", true, "ben").await?;
    let mut expected: BTreeMap<String, u64> = zones.iter().map(|z| (z.clone(), 0)).collect();
    expected.insert(home, 2);
    eventually("zone player counts", || {
        let url = redis.url.clone();
        let expected = expected.clone();
        async move {
            let out = tokio::task::spawn_blocking(move || telosctl(&url, &["status", "--json"]))
                .await??;
            let v = parse_status(&out)?;
            let seen: BTreeMap<String, u64> = v["zones"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|z| {
                            (
                                z["id"].as_str().unwrap_or("?").to_string(),
                                z["players"].as_u64().unwrap_or(0),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            Ok(if seen == expected {
                Ok(())
            } else {
                Err(out.stdout)
            })
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telosctl_tier_takes_effect_at_the_next_login_and_refuses_unknown_names()
-> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let (keys, tls) = keyed()?;
    let zones = starter_zones();
    let world =
        start_world(WorldOpts::new("w1", &redis.url, &zone_refs(&zones)).keyed(keys.path()))?;
    let mut s = login(&world.addr, Some(&tls), "Tess", true, "tess-1").await?;
    let score = s.command(1, "score").await?;
    assert!(score.lines().any(|l| l == "Tier: player"), "{score}");

    let url = redis.url.clone();
    let out =
        tokio::task::spawn_blocking(move || telosctl(&url, &["tier", "Tess", "admin"])).await??;
    assert!(out.success(), "{}", out.stderr);

    s.input(2, "quit").await?;
    closed(&mut s).await?;
    let mut s = login(&world.addr, Some(&tls), "tess", false, "tess-2").await?;
    let score = s.command(1, "score").await?;
    assert!(score.lines().any(|l| l == "Tier: admin"), "{score}");

    let url = redis.url.clone();
    let out =
        tokio::task::spawn_blocking(move || telosctl(&url, &["tier", "nobody", "admin"])).await??;
    assert!(!out.success(), "an unknown name is refused: {out:?}");
    assert!(out.stderr.contains("no such character"), "{}", out.stderr);
    assert_eq!(
        out.stderr.trim().lines().count(),
        1,
        "one clear line: {}",
        out.stderr
    );
    let url = redis.url.clone();
    let out =
        tokio::task::spawn_blocking(move || telosctl(&url, &["tier", "tess", "wizard"])).await??;
    assert!(!out.success(), "an unknown tier is refused: {out:?}");
    assert!(out.stderr.contains("wizard"), "{}", out.stderr);
    Ok(())
}

/// A login that takes over a session still online is a login too: it must
/// pick up a tier set meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telosctl_tier_applies_to_a_takeover_login() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let (keys, tls) = keyed()?;
    let zones = starter_zones();
    let world =
        start_world(WorldOpts::new("w1", &redis.url, &zone_refs(&zones)).keyed(keys.path()))?;
    let mut first = login(&world.addr, Some(&tls), "Tove", true, "tove-1").await?;
    assert_eq!(first.command(1, "journal kept").await?, "Noted.\n");
    let url = redis.url.clone();
    let out =
        tokio::task::spawn_blocking(move || telosctl(&url, &["tier", "tove", "builder"])).await??;
    assert!(out.success(), "{}", out.stderr);
    let mut second = login(&world.addr, Some(&tls), "tove", false, "tove-2").await?;
    assert!(closed(&mut first).await?.1, "the old session is taken over");
    let score = second.command(1, "score").await?;
    assert!(score.lines().any(|l| l == "Tier: builder"), "{score}");
    let listing = second.command(2, "journal").await?;
    assert!(listing.contains("journal 1: kept"), "{listing}");
    Ok(())
}

fn temp_dir(what: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "telos-shard-test-{what}-{}-{}",
        std::process::id(),
        telos_testkit::unique()
    ))
}

#[test]
fn telosctl_keygen_writes_the_keypairs_and_the_role_certificates_owner_only() -> anyhow::Result<()>
{
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir("keys");
    let keys = dir.join("keys");
    let out = telosctl(
        "redis://127.0.0.1:1/",
        &["keygen", keys.to_str().expect("utf-8 path")],
    )?;
    assert!(out.success(), "{}", out.stderr);
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&keys)? {
        let entry = entry?;
        let mode = entry.metadata()?.permissions().mode() & 0o777;
        files.push((entry.file_name().to_string_lossy().into_owned(), mode));
    }
    files.sort();
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    // The two keypairs and the CONTRACT's CA and role certificates, with
    // the CA's key (what `telosctl cert` issues more with).
    assert_eq!(
        names,
        [
            "ca.crt",
            "ca.key",
            "gate.crt",
            "gate.key",
            "handoff.key",
            "handoff.pub",
            "operator.crt",
            "operator.key",
            "shard.crt",
            "shard.key",
            "snapshot.key",
            "snapshot.pub",
        ],
        "{files:?}"
    );
    for (name, mode) in &files {
        assert_eq!(*mode, 0o600, "{name} is {mode:o}");
    }
    // A second run refuses to overwrite.
    let again = telosctl(
        "redis://127.0.0.1:1/",
        &["keygen", keys.to_str().expect("utf-8 path")],
    )?;
    assert!(!again.success(), "{again:?}");
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

/// Run `telos-world` on `world` expecting it to refuse to start.
fn refused_start(redis: &RedisServer, world: &Path) -> anyhow::Result<Finished> {
    let mut cmd = clean_command("telos-world");
    cmd.args([
        "--shard-id",
        "bad",
        "--grpc-listen",
        "127.0.0.1:0",
        "--redis-url",
    ])
    .arg(&redis.url)
    .arg("--world")
    .arg(world)
    .args(["--zones", "city"]);
    let out = run_to_exit("telos-world", cmd, EXIT_TIMEOUT)?;
    assert!(!out.success(), "started on a broken world: {out:?}");
    assert!(!out.stdout.contains("listening on"), "{}", out.stdout);
    Ok(out)
}

fn edit_zone(dir: &Path, zone: &str, edit: impl FnOnce(&mut Value)) -> anyhow::Result<PathBuf> {
    let file = dir.join(format!("{zone}.json"));
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&file)?)?;
    edit(&mut v);
    std::fs::write(&file, serde_json::to_string_pretty(&v)?)?;
    Ok(file)
}

#[test]
fn bad_world_files_stop_the_shard_at_start_naming_file_and_id() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let root = temp_dir("world");

    // Control: an untouched copy starts.
    let good = root.join("good");
    copy_world(&good)?;
    let mut cmd = clean_command("telos-world");
    cmd.env("RUST_LOG", "warn")
        .args([
            "--shard-id",
            "good",
            "--grpc-listen",
            "127.0.0.1:0",
            "--redis-url",
        ])
        .arg(&redis.url)
        .arg("--world")
        .arg(&good);
    let mut proc_ = Proc::spawn("world-good-copy", cmd)?;
    proc_.kill();

    // Bad JSON.
    let dir = root.join("json");
    copy_world(&dir)?;
    let file = dir.join("docks.json");
    let text = std::fs::read_to_string(&file)?;
    std::fs::write(&file, &text[..text.len() / 2])?;
    let out = refused_start(&redis, &dir)?;
    assert!(
        out.stderr.contains(&file.display().to_string()),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("bad JSON"), "{}", out.stderr);

    // An exit to a room that exists nowhere.
    let dir = root.join("exit");
    copy_world(&dir)?;
    let (room, missing) = ("city:west_gate", "forest:nowhere");
    let file = edit_zone(&dir, "city", |v| {
        let rooms = v["rooms"].as_array_mut().expect("rooms");
        let r = rooms.iter_mut().find(|r| r["id"] == room).expect("room");
        r["exits"]["west"] = Value::from(missing);
    })?;
    let out = refused_start(&redis, &dir)?;
    for needle in [
        file.display().to_string(),
        room.to_string(),
        missing.to_string(),
    ] {
        assert!(
            out.stderr.contains(&needle),
            "{needle} not in {}",
            out.stderr
        );
    }

    // A duplicate room id.
    let dir = root.join("dup");
    copy_world(&dir)?;
    let mut dup_id = String::new();
    let file = edit_zone(&dir, "forest", |v| {
        let rooms = v["rooms"].as_array_mut().expect("rooms");
        let copy = rooms[1].clone();
        dup_id = copy["id"].as_str().expect("id").to_string();
        rooms.push(copy);
    })?;
    let out = refused_start(&redis, &dir)?;
    for needle in [file.display().to_string(), dup_id.clone()] {
        assert!(
            out.stderr.contains(&needle),
            "{needle} not in {}",
            out.stderr
        );
    }
    assert!(out.stderr.contains("duplicate"), "{}", out.stderr);

    std::fs::remove_dir_all(&root)?;
    Ok(())
}

#[test]
fn a_missing_shard_id_exits_with_one_line_naming_it() -> anyhow::Result<()> {
    let mut cmd = clean_command("telos-world");
    cmd.args([
        "--grpc-listen",
        "127.0.0.1:0",
        "--redis-url",
        "redis://127.0.0.1:1/",
    ]);
    let out = run_to_exit("telos-world", cmd, EXIT_TIMEOUT)?;
    assert!(!out.success(), "{out:?}");
    let lines: Vec<&str> = out.stderr.trim().lines().collect();
    assert_eq!(lines.len(), 1, "one line: {}", out.stderr);
    assert!(lines[0].contains("--shard-id"), "{}", lines[0]);
    Ok(())
}

/// A `Play` stream that never sends its first frame (a client mid-connect,
/// a gate's probe) does not hold a stopping shard: before the fix its
/// session task waited for that frame for ever and SIGINT took the whole
/// 30 s task deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_play_stream_does_not_hold_a_stopping_shard() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let (keys, tls) = keyed()?;
    let mut shard =
        start_world(WorldOpts::new("shard-a", &redis.url, &["city"]).keyed(keys.path()))?;
    shard.wait_log("zone started zone=city", SETTLE).await?;
    let _silent = PlayStream::open_with(&shard.addr, Some(&tls)).await?;
    // Give the shard a moment to see the stream (its session task starts).
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Bounds the hang: far below the 30 s deadline the bug waited out.
    let status =
        tokio::task::block_in_place(|| shard.stop_with(libc::SIGINT, Duration::from_secs(10)))?;
    assert!(status.success(), "{status:?}\n{}", shard.plain_log());
    assert!(
        !shard
            .plain_log()
            .contains("background tasks did not finish"),
        "{}",
        shard.plain_log()
    );
    Ok(())
}
