//! # transfer: how long a zone is unavailable while it moves
//!
//! `scripts/bench transfer` (or `cargo bench -p telos --bench transfer`
//! after `cargo build --release --workspace --bins`: the shards are the
//! release binaries next to this bench's executable).
//!
//! One run starts a private `redis-server` and two keyed `telos-world`s:
//! `shard-a` boots the city, `shard-b` every other zone. The city is then
//! transferred back and forth between them, each transfer proposed
//! in-process through the same directory script `telosctl transfer` runs,
//! in two cases:
//!
//! - **quiet**: nobody in the city;
//! - **busy**: [`BUSY_PLAYERS`] players in the city, each a `Driver` (the
//!   tests' minimal gate: follows redirects, resumes, replays) journaling
//!   one line every [`PACE`], one line in flight.
//!
//! Per transfer:
//!
//! - **propose → complete**: from sending the proposal to the completion
//!   landing (the record gone, seen through the transfer pub/sub channel).
//! - **probe**: right after the proposal returns, a probe character resumes
//!   on the target over a pre-opened `Play` stream (`Resume` is one
//!   credential check; no Argon2). *parked → open*: from the first "The
//!   world shifts around you..." (its open parked) to its `Attached` — the
//!   unavailability window a client sees; *propose → open*: from the
//!   proposal to `Attached` (covers a probe that arrived before the target
//!   had pre-built the zone, which waits unannounced).
//! - **busy only**: each player's longest command round trip overlapping
//!   the transfer (its stall).
//!
//! - **floor items**: quiet again, each on a fresh cluster whose city
//!   opens from a saved zone state of [`ITEM_CASES`] floor items (spread
//!   over its rooms, at most 100 a room): what flushing the zone state on
//!   close and loading it on open adds to a transfer (issue 19), next to
//!   the quiet case of the same run (the city's own few items). A room
//!   keeps at most `MAX_FLOOR_ITEMS` (100: the game's bound, so no player
//!   grows a room without end; a load drops the rest), so the starter
//!   city's 17 rooms hold 1 700: a case with more runs on a copy of the
//!   world whose city has storerooms added below the square, enough for
//!   all its items.
//!
//! Baseline, same run and same load: the probe resumed on the zone's owner
//! with the zone already open, [`BASELINE_PER_TRANSFER`] times between
//! transfers. The probe logs out before every measurement (and the bench
//! waits until no shard lists it online), so each resume is a fresh entry.
//!
//! `TELOS_BENCH_REPS` overrides the number of transfers per case;
//! `TELOS_BENCH_BUSY=0` skips the busy case.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use telos_proto::v1::server_frame::Frame;
use telos_redis::directory::Directory;
use telos_redis::directory::key_names;
use telos_redis::directory::transfer::Proposal;
use telos_testkit::RedisServer;
use telos_testkit::driver::Driver;
use telos_testkit::keys::TempKeys;
use telos_testkit::play::PlayStream;
use telos_testkit::process::{Proc, WorldOpts, start_keyed_world, start_world};
use telos_testkit::world::{WorldCopy, WorldMap, starter_zones};
use telos_tls::{Role, TlsKeys};
use tokio::sync::{Semaphore, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_stream::StreamExt;

use telos_testkit::stats::nearest_rank;

/// The zone that moves.
const ZONE: &str = "city";
/// Transfers per case (half each way); `TELOS_BENCH_REPS` overrides.
const QUIET_REPS: usize = 20;
const BUSY_REPS: usize = 10;
/// Players in the busy case.
const BUSY_PLAYERS: usize = 100;
/// Each busy player sends its next journal line this long after the
/// previous one was acknowledged: 10 lines/s each, 1000 lines/s in all.
const PACE: Duration = Duration::from_millis(100);
/// Baseline resumes between two transfers.
const BASELINE_PER_TRANSFER: usize = 5;
/// Logins at a time while creating characters: each is an Argon2 hash
/// (19 MiB and a core) in the world.
const CREATE_PARALLELISM: usize = 2;
const PASSWORD: &str = "bench-password";
/// What a parked open is told (world `play/route.rs`).
const SHIFT: &str = "The world shifts around you...";
/// Bounds that turn a hang into an error, far above any real latency.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(60);
const OFFLINE_TIMEOUT: Duration = Duration::from_secs(10);
/// Poll period while waiting for the probe's online entry to appear or go
/// (the list is published 50 ms after a roster change).
const OFFLINE_POLL: Duration = Duration::from_millis(5);

fn main() -> anyhow::Result<()> {
    let reps = std::env::var("TELOS_BENCH_REPS")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .filter(|n| *n > 0);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(run(reps.unwrap_or(QUIET_REPS), reps.unwrap_or(BUSY_REPS)));
    runtime.shutdown_timeout(Duration::from_secs(2));
    result
}

/// Both shards, the directory, and the probe.
struct Bench {
    redis: RedisServer,
    _keys: TempKeys,
    /// The gate certificate every `Play` stream presents to the keyed
    /// shards.
    tls: TlsKeys,
    dir: Directory,
    shards: [Proc; 2],
    probe: Probe,
    /// The world the shards run when it is not the starter world.
    _world: Option<WorldCopy>,
}

const SHARD_IDS: [&str; 2] = ["shard-a", "shard-b"];

/// Floor items in the city's saved state, one quiet case each.
const ITEM_CASES: [usize; 3] = [10, 1_000, 10_000];
/// `MAX_FLOOR_ITEMS`: a room keeps at most this many (the rest are dropped
/// on load).
const PER_ROOM: usize = 100;

async fn run(quiet_reps: usize, busy_reps: usize) -> anyhow::Result<()> {
    let mut bench = start(0).await?;
    println!(
        "zone transfer of `{ZONE}` between two release telos-world shards (each way in turn); redis {}",
        bench.redis.url
    );
    println!(
        "probe: Resume on a pre-opened Play stream; baseline: the same resume with the zone already open"
    );
    println!();

    let quiet = run_case(&mut bench, quiet_reps, &[]).await?;
    print_case(
        &format!("quiet: 0 players in {ZONE}, {quiet_reps} transfers"),
        &quiet,
    );

    // TELOS_BENCH_BUSY=0: the quiet and floor-item cases only (the busy
    // case creates its players first, an Argon2 hash each).
    if std::env::var("TELOS_BENCH_BUSY").as_deref() != Ok("0") {
        let players = start_players(&bench, BUSY_PLAYERS).await?;
        let busy = run_case(&mut bench, busy_reps, &players.trips).await;
        let stopped = players.stop().await;
        let busy = busy?;
        print_case(
            &format!(
                "busy: {BUSY_PLAYERS} players in {ZONE} journaling one line per {} ms each, {busy_reps} transfers",
                PACE.as_millis()
            ),
            &busy,
        );
        stopped?;
    }
    drop(bench);
    for n in ITEM_CASES {
        let mut bench = start(n).await?;
        let case = run_case(&mut bench, quiet_reps, &[]).await?;
        let carried = floor_items(&bench).await?;
        print_case(
            &format!(
                "floor items: {carried} in {ZONE}'s saved state ({n} asked), 0 players, {quiet_reps} transfers"
            ),
            &case,
        );
    }
    println!();
    println!(
        "propose -> complete: the proposal sent until the completion landed (record gone; transfer channel)."
    );
    println!(
        "parked -> open: the probe's first \"{SHIFT}\" until its Attached (the client-visible window); n = transfers whose probe parked."
    );
    println!(
        "propose -> probe open: the proposal sent until the probe (resumed right after it) was Attached on the target."
    );
    println!(
        "player stall: each player's longest command round trip overlapping a transfer (per player per transfer)."
    );
    Ok(())
}

/// The world for a case of `items` floor items: the starter world when
/// its city's rooms hold them, else a copy whose city has enough
/// storerooms added (a chain down from the square).
fn world_for(items: usize) -> anyhow::Result<Option<WorldCopy>> {
    let rooms = WorldMap::starter().rooms_in(ZONE).len();
    let missing = items.div_ceil(PER_ROOM).saturating_sub(rooms);
    if missing == 0 {
        return Ok(None);
    }
    let copy = WorldCopy::new()?;
    let file = copy.path().join(format!("{ZONE}.json"));
    let mut city: serde_json::Value = serde_json::from_slice(&std::fs::read(&file)?)?;
    let rooms = city["rooms"].as_array_mut().context("city rooms")?;
    let square = rooms
        .iter_mut()
        .find(|r| r["id"] == "city:square")
        .context("city:square")?;
    square["exits"]["down"] = "city:store_1".into();
    for i in 1..=missing {
        let mut exits = serde_json::json!({ "up": if i == 1 { "city:square".to_string() } else { format!("city:store_{}", i - 1) } });
        if i < missing {
            exits["down"] = format!("city:store_{}", i + 1).into();
        }
        rooms.push(serde_json::json!({
            "id": format!("city:store_{i}"),
            "name": format!("Storeroom {i}"),
            "description": "Shelves of bread, floor to ceiling.",
            "exits": exits,
        }));
    }
    std::fs::write(&file, serde_json::to_vec_pretty(&city)?)?;
    Ok(Some(copy))
}

/// The city's saved state as a first open reads it: `n` bread loaves on
/// the floors of `world`'s city, at most [`PER_ROOM`] a room.
async fn seed_items(url: &str, n: usize, world: Option<&WorldCopy>) -> anyhow::Result<()> {
    let map = match world {
        Some(w) => WorldMap::load(w.path())?,
        None => WorldMap::starter(),
    };
    let mut floors = serde_json::Map::new();
    let mut left = n;
    for room in map.rooms_in(ZONE) {
        let here = left.min(PER_ROOM);
        let items: Vec<serde_json::Value> = (0..here)
            .map(|_| serde_json::json!({"id": "city:bread", "name": "a loaf of bread", "keywords": ["bread", "loaf"]}))
            .collect();
        floors.insert(room.to_string(), items.into());
        left -= here;
    }
    let state = serde_json::to_vec(&serde_json::json!({ "floors": floors }))?;
    let mut conn = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    let _: () = redis::cmd("HSET")
        .arg(format!("telos:zone:{ZONE}:state"))
        .arg("state")
        .arg(state)
        .arg("gen")
        .arg(0)
        .query_async(&mut conn)
        .await?;
    Ok(())
}

/// Floor items in the city's saved state now (it has moved at least once:
/// the close saved what the open loaded).
async fn floor_items(bench: &Bench) -> anyhow::Result<usize> {
    let store = telos_redis::store::Store::connect(&bench.redis.url).await?;
    // Each room's floor is a keyed part of the saved state.
    let parts = store.zone_state_parts(ZONE).await?;
    Ok(parts
        .iter()
        .filter(|(k, _)| k.starts_with("floor:"))
        .filter_map(|(_, v)| serde_json::from_slice::<Vec<serde_json::Value>>(v).ok())
        .map(|items| items.len())
        .sum())
}

/// Redis, the city's saved state with `items` floor items when not 0, and
/// both shards, ready.
async fn start(items: usize) -> anyhow::Result<Bench> {
    let redis = RedisServer::start()?;
    let world = world_for(items)?;
    if items > 0 {
        seed_items(&redis.url, items, world.as_ref()).await?;
    }
    let keys = TempKeys::generate()?;
    let others: Vec<String> = starter_zones().into_iter().filter(|z| z != ZONE).collect();
    let others: Vec<&str> = others.iter().map(String::as_str).collect();
    // The bench moves the city away from its home: the rebalancer would
    // move it back in the middle of a case.
    let no_flags = ["--rebalance", "off"];
    let shard = |id: &str, zones: &[&str]| match &world {
        None => start_keyed_world(id, &redis.url, zones, keys.path(), None, &no_flags),
        Some(w) => {
            let mut o = WorldOpts::new(id, &redis.url, zones).keyed(keys.path());
            o.world = w.path().to_path_buf();
            o.extra.extend(no_flags.iter().map(|f| f.to_string()));
            start_world(o)
        }
    };
    let a = shard(SHARD_IDS[0], &[ZONE])?;
    let b = shard(SHARD_IDS[1], &others)?;
    let dir = Directory::connect(&redis.url).await?;
    let until = Instant::now() + SETTLE_TIMEOUT;
    loop {
        let live = dir.shards().await?.len();
        let owner = dir.zone_owner(ZONE).await?.map(|(o, _)| o);
        if live == 2 && owner.as_deref() == Some(SHARD_IDS[0]) {
            break;
        }
        if Instant::now() > until {
            bail!("shards never became ready");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let tls = keys.tls(Role::Gate);
    let probe = Probe::create(&a.addr, &tls, &dir).await?;
    Ok(Bench {
        redis,
        _keys: keys,
        tls,
        dir,
        shards: [a, b],
        probe,
        _world: world,
    })
}

/// The character whose resumes measure "is the zone open".
struct Probe {
    name: String,
    conn_id: String,
    credential: String,
}

impl Probe {
    async fn create(addr: &str, tls: &TlsKeys, dir: &Directory) -> anyhow::Result<Probe> {
        let mut probe = Probe {
            name: "Probe".into(),
            conn_id: "bench-probe".into(),
            credential: String::new(),
        };
        let mut s = PlayStream::open_with(addr, Some(tls)).await?;
        s.login(&probe.name, PASSWORD, true, &probe.conn_id).await?;
        let attached = s
            .until(|f| match f {
                Frame::Attached(a) => Some(Ok(a.clone())),
                Frame::Closed(c) => Some(Err(anyhow::anyhow!("probe: {}", c.reason))),
                _ => None,
            })
            .await??;
        probe.credential = attached.credential;
        probe.leave(s, dir).await?;
        Ok(probe)
    }

    /// Resume on a pre-opened stream: (first parked line, `Attached`).
    async fn resume(&self, s: &mut PlayStream) -> anyhow::Result<(Option<Instant>, Instant)> {
        s.resume(&self.name, &self.conn_id, &self.credential)
            .await?;
        let mut parked = None;
        loop {
            match s.next().await? {
                Some(Frame::Output(o)) if o.text.contains(SHIFT) => {
                    parked.get_or_insert_with(Instant::now);
                }
                Some(Frame::Attached(_)) => return Ok((parked, Instant::now())),
                Some(Frame::Closed(c)) => bail!("probe closed: {}", c.reason),
                Some(Frame::Redirect(r)) => bail!("probe redirected to {}", r.addr),
                Some(_) => {}
                None => bail!("probe stream ended"),
            }
        }
    }

    /// Log out: wait until the shard lists the probe online, drop the
    /// stream, wait until no shard lists it. Both waits matter: the list is
    /// published 50 ms after a roster change, so a probe dropped at once
    /// could be listed *after* it left, and the next resume elsewhere would
    /// be redirected to that stale entry.
    async fn leave(&self, s: PlayStream, dir: &Directory) -> anyhow::Result<()> {
        self.wait_listed(dir, true).await?;
        drop(s);
        self.wait_listed(dir, false).await
    }

    /// Until the online list shows the probe (`listed`) or does not.
    async fn wait_listed(&self, dir: &Directory, listed: bool) -> anyhow::Result<()> {
        let until = Instant::now() + OFFLINE_TIMEOUT;
        loop {
            let online = dir.online().await?;
            let shown = online
                .iter()
                .any(|p| p.name.eq_ignore_ascii_case(&self.name));
            if shown == listed {
                return Ok(());
            }
            if Instant::now() > until {
                bail!("the probe's online entry never became listed={listed}");
            }
            tokio::time::sleep(OFFLINE_POLL).await;
        }
    }
}

/// One command round trip of a busy player: (sent, acknowledged).
type Trip = (Instant, Instant);

/// The busy players: their tasks, stop flag and round trips.
struct Players {
    stop: Arc<AtomicBool>,
    tasks: Vec<JoinHandle<anyhow::Result<()>>>,
    trips: Vec<Arc<Mutex<Vec<Trip>>>>,
}

impl Players {
    async fn stop(self) -> anyhow::Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            t.await??;
        }
        Ok(())
    }
}

/// `name("Busy", 0)` = "Busyaa": valid names (letters only) below 676.
fn name(prefix: &str, i: usize) -> String {
    let letter = |n: usize| char::from(b'a' + (n % 26) as u8);
    format!("{prefix}{}{}", letter(i / 26), letter(i))
}

/// Create `n` characters in the zone (on its current owner) and start them
/// journaling.
async fn start_players(bench: &Bench, n: usize) -> anyhow::Result<Players> {
    let owner = owner_index(&bench.dir).await?;
    let addr = bench.shards[owner].addr.clone();
    let addrs: Vec<String> = bench.shards.iter().map(|s| s.addr.clone()).collect();
    let limit = Arc::new(Semaphore::new(CREATE_PARALLELISM));
    let logins: Vec<_> = (0..n)
        .map(|i| {
            let (addr, addrs, limit) = (addr.clone(), addrs.clone(), limit.clone());
            let tls = bench.tls.clone();
            tokio::spawn(async move {
                let _permit = limit.acquire_owned().await?;
                let mut d =
                    Driver::login_with(&addr, Some(&tls), &name("Busy", i), PASSWORD, true).await?;
                d.set_shards(addrs);
                anyhow::Ok(d)
            })
        })
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let mut players = Players {
        stop: stop.clone(),
        tasks: Vec::new(),
        trips: Vec::new(),
    };
    for login in logins {
        let mut d = login.await??;
        let trips = Arc::new(Mutex::new(Vec::new()));
        players.trips.push(trips.clone());
        let stop = stop.clone();
        players.tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let sent = Instant::now();
                d.command(&format!("journal {n}"))
                    .await
                    .with_context(|| format!("{} line {n}", d.name))?;
                trips.lock().expect("trips").push((sent, Instant::now()));
                n += 1;
                tokio::time::sleep(PACE).await;
            }
            anyhow::Ok(())
        }));
    }
    Ok(players)
}

/// Which of `SHARD_IDS` holds the zone's lease.
async fn owner_index(dir: &Directory) -> anyhow::Result<usize> {
    let owner = dir.zone_owner(ZONE).await?.context("zone unowned")?.0;
    SHARD_IDS
        .iter()
        .position(|s| *s == owner)
        .with_context(|| format!("unknown owner {owner}"))
}

/// The samples of one case, in ms.
#[derive(Default)]
struct Case {
    complete: Vec<f64>,
    parked_open: Vec<f64>,
    propose_open: Vec<f64>,
    baseline: Vec<f64>,
    stall: Vec<f64>,
    worst_stall: Vec<f64>,
    reps: usize,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn run_case(
    bench: &mut Bench,
    reps: usize,
    players: &[Arc<Mutex<Vec<Trip>>>],
) -> anyhow::Result<Case> {
    let mut case = Case {
        reps,
        ..Case::default()
    };
    for _ in 0..reps {
        let from = owner_index(&bench.dir).await?;
        let to = 1 - from;
        for _ in 0..BASELINE_PER_TRANSFER {
            let mut s = PlayStream::open_with(&bench.shards[from].addr, Some(&bench.tls)).await?;
            let t0 = Instant::now();
            let (_, open) = bench.probe.resume(&mut s).await?;
            case.baseline.push(ms(open - t0));
            bench.probe.leave(s, &bench.dir).await?;
        }

        let completed = watch_completion(&bench.redis.url, &bench.dir).await?;
        let mut s = PlayStream::open_with(&bench.shards[to].addr, Some(&bench.tls)).await?;
        let t0 = Instant::now();
        match bench
            .dir
            .propose_transfer(
                ZONE,
                SHARD_IDS[to],
                telos_redis::directory::events::Cause::Operator,
            )
            .await?
        {
            Ok(Proposal::Recorded { .. }) => {}
            other => bail!("proposal not recorded: {other:?}"),
        }
        let (parked, open) = bench.probe.resume(&mut s).await?;
        let done = tokio::time::timeout(SETTLE_TIMEOUT, completed)
            .await
            .context("no completion")??;
        case.complete.push(ms(done - t0));
        case.propose_open.push(ms(open - t0));
        if let Some(p) = parked {
            case.parked_open.push(ms(open - p));
        }
        bench.probe.leave(s, &bench.dir).await?;
        if owner_index(&bench.dir).await? != to {
            bail!("the zone did not end on {}", SHARD_IDS[to]);
        }
        if !players.is_empty() {
            let stalls = settle(players, t0, done).await?;
            let worst = stalls.iter().copied().fold(0.0, f64::max);
            case.stall.extend(stalls);
            case.worst_stall.push(worst);
        }
    }
    Ok(case)
}

/// Subscribe to the transfer channel now; resolves with the instant the
/// pending record of the zone is seen gone after a message.
async fn watch_completion(
    url: &str,
    dir: &Directory,
) -> anyhow::Result<oneshot::Receiver<Instant>> {
    let client = redis::Client::open(url)?;
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.subscribe(key_names::transfer_channel()).await?;
    let (tx, rx) = oneshot::channel();
    let dir = dir.clone();
    tokio::spawn(async move {
        let mut messages = pubsub.into_on_message();
        while messages.next().await.is_some() {
            if let Ok(None) = dir.transfer(ZONE).await {
                let _ = tx.send(Instant::now());
                return;
            }
        }
    });
    Ok(rx)
}

/// Wait until every player has finished a round trip sent after the
/// completion (all moving again), then return each player's longest round
/// trip overlapping [`t0`, that point], in ms.
async fn settle(
    players: &[Arc<Mutex<Vec<Trip>>>],
    t0: Instant,
    done: Instant,
) -> anyhow::Result<Vec<f64>> {
    let until = Instant::now() + SETTLE_TIMEOUT;
    loop {
        let moving = players.iter().all(|p| {
            p.lock()
                .expect("trips")
                .last()
                .is_some_and(|(sent, _)| *sent > done)
        });
        if moving {
            break;
        }
        if Instant::now() > until {
            bail!("players did not settle after the transfer");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(players
        .iter()
        .map(|p| {
            let trips = p.lock().expect("trips");
            trips
                .iter()
                .filter(|(sent, acked)| *acked >= t0 && *sent <= done)
                .map(|(sent, acked)| ms(*acked - *sent))
                .fold(0.0, f64::max)
        })
        .collect())
}

/// Nearest-rank percentile of `samples` (sorted here).
fn pct(samples: &[f64], p: f64) -> f64 {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    nearest_rank(&s, p).unwrap_or(f64::NAN)
}

fn print_case(title: &str, case: &Case) {
    println!("{title}");
    println!(
        "  {:<34} {:>5} {:>10} {:>10} {:>10}",
        "metric", "n", "p50 ms", "p99 ms", "max ms"
    );
    let row = |label: &str, v: &[f64]| {
        println!(
            "  {:<34} {:>5} {:>10.1} {:>10.1} {:>10.1}",
            label,
            v.len(),
            pct(v, 50.0),
            pct(v, 99.0),
            pct(v, 100.0)
        );
    };
    row("propose -> complete", &case.complete);
    row(
        &format!(
            "parked -> open ({}/{} parked)",
            case.parked_open.len(),
            case.reps
        ),
        &case.parked_open,
    );
    row("propose -> probe open", &case.propose_open);
    row("baseline: resume, zone open", &case.baseline);
    if !case.stall.is_empty() {
        row("player stall (per player)", &case.stall);
        row("player stall (worst per transfer)", &case.worst_stall);
    }
    println!();
}
