//! # drain: what a SIGTERM drain costs a loaded shard
//!
//! `cargo bench -p telos --bench drain` (or `scripts/bench drain`), after
//! `cargo build --release --workspace --bins`: the processes are the release
//! binaries next to this bench's executable.
//!
//! One run starts a private `redis-server`; writes a bench world to a temp
//! folder (the starter world plus generated ring zones, [`ZONES`] in all);
//! starts one keyed `telos-world` ([`SOURCE`]) hosting every zone and
//! [`PEERS`] keyed peers hosting none, each with room for every player.
//! [`PLAYERS`] characters are created straight in the store, each saved in a
//! room of its zone (the same number per zone, spread over the zone's rooms,
//! so no one walks), and resumed on direct `Play` streams with a credential
//! issued in the store (no password hash per session). Streams to one shard
//! share one HTTP/2 connection, as the gate's do.
//!
//! Every player then acts like a gate with a typing user: one `where` every
//! [`SEND_EVERY`], at most one line in flight, every frame read as it
//! arrives, a `Redirect` followed at once (dial, `Attach` with the token,
//! replay the line in flight if it is above `ack_input_seq`), any other
//! outage resumed with the credential on a peer.
//!
//! After a warm-up and a steady state the bench SIGTERMs the source and
//! reports:
//! - the drain time: SIGTERM to process exit, and the `elapsed_ms` of the
//!   shard's `drain summary` line (`begin_drain` alone), with its counts;
//! - per zone: its target; when its lease flipped and when the zone found
//!   itself empty (the source's log), when the target saw the flip land
//!   (the target's log), when its first and last player got the
//!   `Redirect`, and its players' median reattach time;
//! - the per-player pause: last output on the old shard before the
//!   `Redirect` to the first output or ack on the new one. Before the freeze
//!   a player may have been idle for up to one send interval, so this bounds
//!   the pause from above; the part after the `Redirect` arrived (dial,
//!   attach, `Commit`, join) is shown on its own, and so is the round trip
//!   of a line that was in flight across the move — what a typing player
//!   actually waits;
//! - the baseline: the `where` round trip in the steady state of the same
//!   run, under the same load.
//!
//! The bench's own clients share the machine with redis and the shards.
//! The shards inherit the environment, so `TELOS_TICK_MS=100 scripts/bench
//! drain` runs them with a 100 ms zone tick; the report prints the tick,
//! lease TTL and capacity that ran.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::process::ExitStatus;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use clap::Parser;
use telos_proto::v1::server_frame::Frame;
use telos_redis::directory::{Directory, ShardState};
use telos_redis::store::Store;
use telos_testkit::RedisServer;
use telos_testkit::cli::SIGTERM;
use telos_testkit::driver::{Driver, Step};
use telos_testkit::keys::TempKeys;
use telos_testkit::play::Channels;
use telos_testkit::process::{Proc, WorldOpts, start_world, strip_ansi};
use telos_testkit::world::{WorldCopy, WorldMap, start_room};
use telos_tls::Role;
use telos_world::config::{Cli, WorldConfig};
use telos_world::game::{Character, to_state_json};
use tokio::sync::Semaphore;
use tokio::time::error::Elapsed;
use tokio_util::sync::CancellationToken;

use telos_testkit::stats::nearest_rank;

/// Players, the same number in every zone.
const PLAYERS: usize = 500;
/// Zones the source hosts: the starter world's, then generated rings.
const ZONES: usize = 10;
/// Rooms in a generated ring zone: with 50 players a zone, about eight a
/// room, so arrivals and departures fan out to a room, not to a crowd.
const RING_ROOMS: usize = 6;
/// The shard that drains.
const SOURCE: &str = "drain-src";
/// Its peers: the selector spreads the zones over them by headroom.
const PEERS: [&str; 3] = ["peer-a", "peer-b", "peer-c"];
/// The source's drain deadline, seconds: far above the drain itself, so a
/// slow handoff shows as a long drain, not as `reclaimed` players.
const DRAIN_DEADLINE_SECS: u64 = 20;
/// Each player's think time: one `where` per interval, never two in flight.
const SEND_EVERY: Duration = Duration::from_millis(200);
/// Discarded lead-in once every player is sending (connections warm).
const WARMUP: Duration = Duration::from_secs(1);
/// Steady state measured for the baseline, right before the SIGTERM.
const STEADY: Duration = Duration::from_secs(3);
/// After every player is back in play: a few send intervals, so each one
/// answers a `where` on its new shard.
const SETTLE: Duration = Duration::from_millis(600);
/// Characters created at a time: each is an Argon2 hash (19 MiB and a core).
const CREATE_PARALLELISM: usize = 2;
/// Sessions opened at a time (a resume costs a few Redis round trips).
const OPEN_PARALLELISM: usize = 32;
/// Bound on readiness: processes, zone leases, registry entries.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
const READY_POLL: Duration = Duration::from_millis(20);
/// How long the source may take from SIGTERM to exit: the drain deadline
/// plus its shutdown, so only a hang fails the run.
const EXIT_TIMEOUT: Duration = Duration::from_secs(DRAIN_DEADLINE_SECS + 15);
/// Exit detection granularity (the drain takes hundreds of milliseconds).
const EXIT_POLL: Duration = Duration::from_millis(2);
/// How long every player may take to be back in play after the SIGTERM:
/// a straggler reclaimed at the deadline still resumes within this.
const MOVE_TIMEOUT: Duration = Duration::from_secs(DRAIN_DEADLINE_SECS + 20);
/// Long enough for the whole run and its reconnects.
const CREDENTIAL_TTL: Duration = Duration::from_secs(3600);
const PASSWORD: &str = "bench-password";
/// The command, and the line that answers it.
const COMMAND: &str = "where";
const ANSWER_PREFIX: &str = "where: ";

fn main() -> anyhow::Result<()> {
    let world = BenchWorld::create()?;
    let keys = TempKeys::generate()?;
    let redis = RedisServer::start()?;
    let zone_ids: Vec<String> = world.zones.iter().map(|(z, _)| z.clone()).collect();
    let mut source = start_shard(SOURCE, &redis.url, world.dir(), keys.path(), &zone_ids)?;
    let peers = PEERS
        .iter()
        .map(|id| start_shard(id, &redis.url, world.dir(), keys.path(), &[]))
        .collect::<anyhow::Result<Vec<Proc>>>()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(wait_served(&redis.url, &zone_ids))?;

    let placements = place(&world);
    let created = Instant::now();
    let credentials = runtime.block_on(create_characters(&redis.url, &placements))?;
    let create_time = created.elapsed();
    let ctx = Arc::new(Ctx {
        channels: Arc::new(Channels::tls(keys.tls(Role::Gate))),
        stop: CancellationToken::new(),
        settled: AtomicUsize::new(0),
        candidates: peers.iter().map(|p| p.addr.clone()).collect(),
    });
    let opened = Instant::now();
    let players = runtime.block_on(open_players(&ctx, &source.addr, placements, credentials))?;
    let open_time = opened.elapsed();

    // Sends spread evenly over one interval, so the load is steady.
    let begin = Instant::now() + Duration::from_millis(50);
    let tasks: Vec<_> = players
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            let first = begin + SEND_EVERY.mul_f64(i as f64 / PLAYERS as f64);
            runtime.spawn(p.run(ctx.clone(), first))
        })
        .collect();
    let measure_from = begin + WARMUP;
    std::thread::sleep((measure_from + STEADY).saturating_duration_since(Instant::now()));

    let sigterm_at = Instant::now();
    source.signal(SIGTERM);
    let (status, exited_at) = wait_exit(&mut source, EXIT_TIMEOUT)?;
    let log = source.log_text();
    ensure!(
        status.success(),
        "{SOURCE} exited with {status:?}:\n{}",
        tail(&log, 40)
    );
    let back_by = Instant::now() + MOVE_TIMEOUT;
    while ctx.settled.load(Ordering::SeqCst) < PLAYERS && Instant::now() < back_by {
        std::thread::sleep(READY_POLL);
    }
    std::thread::sleep(SETTLE);
    ctx.stop.cancel();
    let outcomes = runtime.block_on(async {
        let mut outcomes = Vec::with_capacity(tasks.len());
        for t in tasks {
            outcomes.push(t.await?);
        }
        anyhow::Ok(outcomes)
    })?;
    runtime.shutdown_timeout(Duration::from_secs(2));
    let peer_logs: Vec<String> = peers.iter().map(Proc::log_text).collect();

    let run = Run {
        world: &world,
        shards: shard_settings()?,
        create_time,
        open_time,
        measure_from,
        sigterm_at,
        exited_at,
        log: Log::parse(&log, &peer_logs),
        outcomes: &outcomes,
    };
    run.print();
    drop(peers);
    drop(source);
    Ok(())
}

// ---------------------------------------------------------------- the world

/// The bench world: a copy of the starter world plus generated ring zones,
/// [`ZONES`] non-instanced zones in all.
struct BenchWorld {
    /// Removed with the bench world.
    copy: WorldCopy,
    /// Zone id → its room ids, sorted by zone id.
    zones: Vec<(String, Vec<String>)>,
}

impl BenchWorld {
    fn create() -> anyhow::Result<BenchWorld> {
        let copy = WorldCopy::new()?;
        let dir = copy.path();
        let starter = WorldMap::load(dir)?.zones().len();
        ensure!(
            starter <= ZONES,
            "the starter world has {starter} zones, more than {ZONES}"
        );
        let back = start_room();
        for n in 0..ZONES - starter {
            let id = format!("bench_{n}");
            let text = serde_json::to_string_pretty(&ring_zone(&id, &back))?;
            std::fs::write(dir.join(format!("{id}.json")), text)?;
        }
        let map = WorldMap::load(dir)?;
        let zones: Vec<(String, Vec<String>)> = map
            .zones()
            .into_iter()
            .map(|z| {
                let rooms = map.rooms_in(z).into_iter().map(str::to_string).collect();
                (z.to_string(), rooms)
            })
            .collect();
        ensure!(zones.len() == ZONES, "{} zones, not {ZONES}", zones.len());
        Ok(BenchWorld { copy, zones })
    }

    fn dir(&self) -> &Path {
        self.copy.path()
    }

    fn generated(&self) -> usize {
        self.zones
            .iter()
            .filter(|(z, _)| z.starts_with("bench_"))
            .count()
    }
}

/// A ring of [`RING_ROOMS`] rooms (east/west), whose first room leads up to
/// `back`, an existing room: every exit names a room of the world, which is
/// all the validator asks. Nobody walks it; it only has to load and hold
/// players.
fn ring_zone(id: &str, back: &str) -> serde_json::Value {
    let room = |k: usize| format!("{id}:ring{}", k % RING_ROOMS);
    let rooms: Vec<serde_json::Value> = (0..RING_ROOMS)
        .map(|k| {
            let mut exits = serde_json::Map::new();
            exits.insert("east".into(), room(k + 1).into());
            exits.insert("west".into(), room(k + RING_ROOMS - 1).into());
            if k == 0 {
                exits.insert("up".into(), back.into());
            }
            serde_json::json!({
                "id": room(k),
                "name": format!("Ring Room {k}"),
                "description": "A bare round chamber of a zone generated for the drain benchmark.",
                "exits": exits,
            })
        })
        .collect();
    serde_json::json!({ "id": id, "name": format!("Bench Ring {id}"), "rooms": rooms })
}

/// Start one keyed shard on the bench world, hosting `zones` at boot.
fn start_shard(
    id: &str,
    redis_url: &str,
    world: &Path,
    keys: &Path,
    zones: &[String],
) -> anyhow::Result<Proc> {
    let zones: Vec<&str> = zones.iter().map(String::as_str).collect();
    let mut opts = WorldOpts::new(id, redis_url, &zones).keyed(keys);
    opts.world = world.to_path_buf();
    opts.extra.extend([
        "--drain-deadline".to_string(),
        DRAIN_DEADLINE_SECS.to_string(),
    ]);
    start_world(opts)
}

/// Until the source holds every zone's lease and every peer is live in the
/// registry (a drain picks only live peers).
async fn wait_served(redis_url: &str, zones: &[String]) -> anyhow::Result<()> {
    let dir = Directory::connect(redis_url).await?;
    let until = Instant::now() + READY_TIMEOUT;
    loop {
        let live: BTreeSet<String> = dir
            .shards()
            .await?
            .into_iter()
            .filter(|s| s.state == ShardState::Live)
            .map(|s| s.id)
            .collect();
        let mut served = 0;
        for zone in zones {
            if dir
                .shard_for_zone(zone)
                .await?
                .is_some_and(|s| s.id == SOURCE)
            {
                served += 1;
            }
        }
        if served == zones.len() && PEERS.iter().all(|p| live.contains(*p)) {
            return Ok(());
        }
        if Instant::now() > until {
            bail!(
                "not ready after {READY_TIMEOUT:?}: {served}/{} zones on {SOURCE}, live shards {live:?}",
                zones.len()
            );
        }
        tokio::time::sleep(READY_POLL).await;
    }
}

/// Where one player is saved, and who it is.
struct Placement {
    name: String,
    conn_id: String,
    zone: String,
    room: String,
}

/// `name(0)` = "Drainaa": valid names (letters only) below 676 players.
fn name(i: usize) -> String {
    let letter = |n: usize| char::from(b'a' + (n % 26) as u8);
    format!("Drain{}{}", letter(i / 26), letter(i))
}

/// Player `i` goes to zone `i % ZONES`, rooms taken in turn.
fn place(world: &BenchWorld) -> Vec<Placement> {
    (0..PLAYERS)
        .map(|i| {
            let (zone, rooms) = &world.zones[i % world.zones.len()];
            Placement {
                name: name(i),
                conn_id: format!("bench-{i}"),
                zone: zone.clone(),
                room: rooms[(i / world.zones.len()) % rooms.len()].clone(),
            }
        })
        .collect()
}

/// Create every character saved in its room, and a resume credential for
/// its connection.
async fn create_characters(
    redis_url: &str,
    placements: &[Placement],
) -> anyhow::Result<Vec<String>> {
    let store = Store::connect(redis_url).await?;
    let limit = Arc::new(Semaphore::new(CREATE_PARALLELISM));
    let tasks: Vec<_> = placements
        .iter()
        .map(|p| {
            let (store, limit) = (store.clone(), limit.clone());
            let (name, room, conn_id) = (p.name.clone(), p.room.clone(), p.conn_id.clone());
            tokio::spawn(async move {
                let _permit = limit.acquire_owned().await?;
                let state = to_state_json(&Character::new(&name, &room));
                store.create_character(&name, PASSWORD, &state).await?;
                Ok::<_, anyhow::Error>(
                    store
                        .issue_credential(&name, &conn_id, CREDENTIAL_TTL)
                        .await?,
                )
            })
        })
        .collect();
    let mut credentials = Vec::with_capacity(tasks.len());
    for t in tasks {
        credentials.push(t.await??);
    }
    Ok(credentials)
}

// ---------------------------------------------------------------- streams

/// What every player task shares.
struct Ctx {
    /// One HTTP/2 connection per shard address, shared by every player's
    /// streams to it (the gate's `ChannelPool`).
    channels: Arc<Channels>,
    stop: CancellationToken,
    /// Players back in play after the SIGTERM (or failed for good).
    settled: AtomicUsize,
    /// Where an outage resumes: the peers, in turn.
    candidates: Vec<String>,
}

/// One player: a gate connection with one typing user, its session kept by
/// the tests' [`Driver`] (redirects followed, outages resumed, the line in
/// flight replayed).
struct Player {
    driver: Driver,
    zone: String,
}

/// Resume every player on the source, and check with one `where` that each
/// is in its zone there.
async fn open_players(
    ctx: &Arc<Ctx>,
    source: &str,
    placements: Vec<Placement>,
    credentials: Vec<String>,
) -> anyhow::Result<Vec<Player>> {
    let limit = Arc::new(Semaphore::new(OPEN_PARALLELISM));
    let tasks: Vec<_> = placements
        .into_iter()
        .zip(credentials)
        .map(|(p, credential)| {
            let (ctx, limit, source) = (ctx.clone(), limit.clone(), source.to_string());
            tokio::spawn(async move {
                let _permit = limit.acquire_owned().await?;
                open_player(&ctx, &source, p, credential).await
            })
        })
        .collect();
    let mut players = Vec::with_capacity(tasks.len());
    for t in tasks {
        players.push(t.await??);
    }
    Ok(players)
}

async fn open_player(
    ctx: &Ctx,
    source: &str,
    p: Placement,
    credential: String,
) -> anyhow::Result<Player> {
    let channels = ctx.channels.clone();
    let mut driver = Driver::resume(channels, source, &p.name, &p.conn_id, &credential).await?;
    ensure!(
        driver.shard == SOURCE,
        "{} attached on {}",
        driver.name,
        driver.shard
    );
    driver.set_shards(ctx.candidates.clone());
    let text = driver.command(COMMAND).await?;
    let name = &driver.name;
    let line = text
        .lines()
        .find(|l| l.starts_with(ANSWER_PREFIX))
        .with_context(|| format!("{name}: no where line in {text:?}"))?;
    let (zone, shard) = (where_field(line, "zone="), where_field(line, "shard="));
    ensure!(
        zone == p.zone && shard == SOURCE,
        "{name} is in {zone} on {shard}, not {} on {SOURCE}",
        p.zone
    );
    Ok(Player {
        driver,
        zone: p.zone,
    })
}

/// A field of the `where` line (`zone=`, `room=`, `shard=`).
fn where_field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split(' ')
        .find_map(|w| w.strip_prefix(key))
        .unwrap_or_default()
}

/// What one player saw, for the report.
#[derive(Default)]
struct Outcome {
    zone: String,
    /// (sent, round trip) of every line answered on the stream it was sent on.
    round_trips: Vec<(Instant, Duration)>,
    /// The line in flight when the session moved: sent → acked on the new shard.
    in_flight: Option<Duration>,
    /// When the `Redirect` arrived.
    redirect_at: Option<Instant>,
    /// Last output on the old shard → first output or ack on the new one.
    gap: Option<Duration>,
    /// `Redirect` received (or outage seen) → first output or ack on the new shard.
    after_redirect: Option<Duration>,
    /// The shard the session moved to.
    target: String,
    redirects: u32,
    /// Outages recovered by a credential resume (not a zero-drop redirect).
    resumes: u32,
    /// The shard of the last `where` answer.
    answered_on: String,
    error: Option<String>,
}

/// A move in progress: from when to measure, until the first output or ack
/// on the new shard.
struct Moving {
    last_output: Instant,
    noticed: Instant,
}

/// The line in flight and what a move did to it.
#[derive(Default)]
struct Line {
    /// The line in flight: (seq, sent).
    in_flight: Option<(u64, Instant)>,
    /// The seq of the line that was in flight when the session moved.
    carried: Option<u64>,
}

impl Player {
    /// Play until stopped; what was seen comes back whatever happens.
    async fn run(mut self, ctx: Arc<Ctx>, first_send: Instant) -> Outcome {
        let mut out = Outcome {
            zone: self.zone.clone(),
            ..Outcome::default()
        };
        let mut settled = false;
        let resumed_before = self.driver.resumes;
        if let Err(e) = self.play(&ctx, first_send, &mut out, &mut settled).await {
            out.error = Some(format!("{}: {e:#}", self.driver.name));
        }
        out.resumes = (self.driver.resumes - resumed_before) as u32;
        if !settled {
            // Failed for good, or never moved: nothing more to wait for.
            ctx.settled.fetch_add(1, Ordering::SeqCst);
        }
        out
    }

    async fn play(
        &mut self,
        ctx: &Ctx,
        first_send: Instant,
        out: &mut Outcome,
        settled: &mut bool,
    ) -> anyhow::Result<()> {
        /// What woke the player.
        enum Event {
            Stop,
            Frame(anyhow::Result<Option<Frame>>),
            Send,
        }
        let mut next_send = first_send;
        let tick = tokio::time::sleep_until(next_send.into());
        tokio::pin!(tick);
        let mut line = Line::default();
        let mut last_output = Instant::now();
        let mut moving: Option<Moving> = None;
        loop {
            let event = tokio::select! {
                biased;
                _ = ctx.stop.cancelled() => Event::Stop,
                f = self.driver.next_frame() => Event::Frame(f),
                _ = &mut tick, if line.in_flight.is_none() => Event::Send,
            };
            let now = Instant::now();
            let read = match event {
                Event::Stop => return Ok(()),
                Event::Send => {
                    // A send on a dead stream is not lost: the driver keeps
                    // the line and replays it after the outage.
                    let seq = self.driver.send(COMMAND).await?;
                    line.in_flight = Some((seq, now));
                    while next_send <= now {
                        next_send += SEND_EVERY;
                    }
                    tick.as_mut().reset(next_send.into());
                    continue;
                }
                // No frame for a while is no outage: a player frozen by the
                // drain waits on (the whole move is bounded by MOVE_TIMEOUT).
                Event::Frame(Err(e)) if e.downcast_ref::<Elapsed>().is_some() => continue,
                Event::Frame(read) => read,
            };
            // A Redirect, or an outage the driver resumes from: the move's
            // pause is measured from here.
            let redirected = matches!(read, Ok(Some(Frame::Redirect(_))));
            let lost = match &read {
                Ok(Some(Frame::Closed(c))) => !c.r#final,
                Ok(Some(_)) => false,
                Ok(None) | Err(_) => true,
            };
            if redirected {
                out.redirects += 1;
                out.redirect_at = Some(now);
            }
            if redirected || (lost && moving.is_none()) {
                moving = Some(Moving {
                    last_output,
                    noticed: now,
                });
            }
            if redirected || lost {
                line.carried = line.in_flight.map(|(seq, _)| seq);
            }
            match self.driver.handle(read).await? {
                Step::Output(text) => {
                    if let Some(l) = text.lines().find(|l| l.starts_with(ANSWER_PREFIX)) {
                        out.answered_on = where_field(l, "shard=").to_string();
                    }
                    last_output = now;
                    arrived(&mut moving, out, now);
                }
                Step::InputAck(seq) => {
                    last_output = now;
                    arrived(&mut moving, out, now);
                    if let Some((sent_seq, sent)) = line.in_flight
                        && seq >= sent_seq
                    {
                        if line.carried == Some(sent_seq) {
                            out.in_flight = Some(now - sent);
                        } else {
                            out.round_trips.push((sent, now - sent));
                        }
                        line.in_flight = None;
                    }
                }
                Step::Attached(ack) => self.moved(ctx, ack, &mut line, out, settled),
                Step::Other => {}
            }
        }
    }

    /// The session is on a new stream, acked to `ack` (the driver replayed
    /// the line in flight if the new shard had not applied it): count the
    /// player as back in play.
    fn moved(
        &mut self,
        ctx: &Ctx,
        ack: u64,
        line: &mut Line,
        out: &mut Outcome,
        settled: &mut bool,
    ) {
        out.target = self.driver.shard.clone();
        if let Some((seq, sent)) = line.in_flight
            && seq <= ack
        {
            // Applied before the move; its ack was the attach.
            if line.carried == Some(seq) {
                out.in_flight = Some(sent.elapsed());
            }
            line.in_flight = None;
        }
        if !*settled {
            *settled = true;
            ctx.settled.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// The first output or ack on the new shard ends a move's pause.
fn arrived(moving: &mut Option<Moving>, out: &mut Outcome, now: Instant) {
    if let Some(m) = moving.take() {
        out.gap = Some(now - m.last_output);
        out.after_redirect = Some(now - m.noticed);
    }
}

/// Wait for `proc` to exit; its status and when it was seen.
fn wait_exit(proc: &mut Proc, timeout: Duration) -> anyhow::Result<(ExitStatus, Instant)> {
    let until = Instant::now() + timeout;
    loop {
        if let Some(status) = proc.child.try_wait()? {
            return Ok((status, Instant::now()));
        }
        if Instant::now() > until {
            let log = proc.log_text();
            proc.kill();
            bail!(
                "{SOURCE} did not exit within {timeout:?}:\n{}",
                tail(&log, 40)
            );
        }
        std::thread::sleep(EXIT_POLL);
    }
}

// ---------------------------------------------------------------- report

/// Everything the report is made of.
struct Run<'a> {
    world: &'a BenchWorld,
    /// The settings the bench does not pass to the shards.
    shards: WorldConfig,
    create_time: Duration,
    open_time: Duration,
    measure_from: Instant,
    sigterm_at: Instant,
    exited_at: Instant,
    log: Log,
    outcomes: &'a [Outcome],
}

/// The settings the shards run with but the bench does not pass (zone tick,
/// capacity, lease TTL): resolved the way `telos-world` resolves them, from
/// `TELOS_*` variables or the defaults, so the report shows what ran.
fn shard_settings() -> anyhow::Result<WorldConfig> {
    let cli = Cli::try_parse_from(["telos-world", "--shard-id", SOURCE])?;
    Ok(WorldConfig::resolve(cli)?)
}

impl Run<'_> {
    fn print(&self) {
        let log = &self.log;
        let generated = self.world.generated();
        println!(
            "drain: {PLAYERS} players in {ZONES} zones on one keyed shard; SIGTERM hands them to {} keyed peers",
            PEERS.len()
        );
        println!(
            "world: {} starter zones + {generated} generated rings of {RING_ROOMS} rooms; {} players a zone, spread over its rooms",
            ZONES - generated,
            PLAYERS / ZONES
        );
        println!(
            "players: direct Play streams (one HTTP/2 connection per shard), `{COMMAND}` every {} ms, one line in flight, redirects followed like the gate",
            SEND_EVERY.as_millis()
        );
        println!(
            "shards: release binaries; zone tick {} ms, lease TTL {} ms, capacity {} each, drain deadline {DRAIN_DEADLINE_SECS} s",
            self.shards.tick.as_millis(),
            self.shards.lease_ttl.as_millis(),
            self.shards.capacity
        );
        println!(
            "setup: {PLAYERS} characters created in {:.1} s, {PLAYERS} sessions resumed and checked in {:.1} s; baseline over {:.1} s after {:.1} s warm-up",
            self.create_time.as_secs_f64(),
            self.open_time.as_secs_f64(),
            STEADY.as_secs_f64(),
            WARMUP.as_secs_f64()
        );
        println!();

        match &log.summary {
            Some(line) => println!("{SOURCE}: {line}"),
            None => println!("{SOURCE}: no drain summary line in its log"),
        }
        println!(
            "drain time: SIGTERM -> exit {:.0} ms; begin_drain (elapsed_ms) {}",
            ms(self.exited_at - self.sigterm_at),
            log.summary_field("elapsed_ms")
                .map_or_else(|| "-".to_string(), |v| format!("{v} ms"))
        );
        println!(
            "refusals logged: {} drain handoffs (retried on the next tick), {} AdoptZone",
            log.handoff_refusals, log.adopt_refusals
        );
        let redirected = self.outcomes.iter().filter(|o| o.redirects > 0).count();
        let resumed = self.outcomes.iter().filter(|o| o.resumes > 0).count();
        let failed: Vec<&str> = self
            .outcomes
            .iter()
            .filter_map(|o| o.error.as_deref())
            .collect();
        let on_peers = self
            .outcomes
            .iter()
            .filter(|o| PEERS.contains(&o.answered_on.as_str()))
            .count();
        println!(
            "players: {redirected} redirected, {resumed} resumed from durable state, {} failed; {on_peers}/{PLAYERS} answered `{COMMAND}` on a peer afterwards",
            failed.len()
        );
        for e in failed.iter().take(5) {
            println!("  failed: {e}");
        }
        println!();
        self.print_zones();
        println!();
        self.print_latencies();
    }

    /// One row per zone, in the order its players were redirected.
    fn print_zones(&self) {
        #[derive(Default)]
        struct Row {
            players: usize,
            targets: BTreeSet<String>,
            first: Option<Duration>,
            last: Option<Duration>,
            after_redirect: Vec<Duration>,
        }
        let mut rows: BTreeMap<&str, Row> = BTreeMap::new();
        for o in self.outcomes {
            let row = rows.entry(o.zone.as_str()).or_default();
            row.players += 1;
            if !o.target.is_empty() {
                row.targets.insert(o.target.clone());
            }
            if let Some(at) = o.redirect_at {
                let after = at - self.sigterm_at;
                row.first = Some(row.first.map_or(after, |f| f.min(after)));
                row.last = Some(row.last.map_or(after, |l| l.max(after)));
            }
            row.after_redirect.extend(o.after_redirect);
        }
        let mut rows: Vec<(&str, Row)> = rows.into_iter().collect();
        rows.sort_by_key(|(_, r)| r.first.unwrap_or(Duration::MAX));
        let log = &self.log;
        let at = |d: Option<f64>| d.map_or_else(|| "-".to_string(), |v| format!("{v:.0}"));
        println!(
            "{:<8} {:>7}  {:<8} {:>7} {:>9} {:>9} {:>10} {:>8} {:>11}",
            "zone",
            "players",
            "to",
            "flipped",
            "confirmed",
            "1st redir",
            "last redir",
            "drained",
            "p50 reattach"
        );
        for (zone, r) in rows {
            let to: Vec<&str> = r.targets.iter().map(String::as_str).collect();
            println!(
                "{:<8} {:>7}  {:<8} {:>7} {:>9} {:>9} {:>10} {:>8} {:>11.1}",
                zone,
                r.players,
                to.join(","),
                at(log.flipped.get(zone).copied()),
                at(log.confirmed.get(zone).copied()),
                at(r.first.map(ms)),
                at(r.last.map(ms)),
                at(log.drained.get(zone).copied()),
                Stats::of(r.after_redirect).p50,
            );
        }
        println!(
            "ms after SIGTERM. flipped (lease flip landed) and drained (zone noticed it is empty) from {SOURCE}'s log;"
        );
        println!(
            "confirmed (target's ClaimZone saw the flip) from the target's log; p50 reattach: Redirect received -> first output on the target."
        );
    }

    fn print_latencies(&self) {
        let baseline: Vec<Duration> = self
            .outcomes
            .iter()
            .flat_map(|o| &o.round_trips)
            .filter(|(sent, rtt)| *sent >= self.measure_from && *sent + *rtt <= self.sigterm_at)
            .map(|(_, rtt)| *rtt)
            .collect();
        let pick = |f: fn(&Outcome) -> Option<Duration>| -> Vec<Duration> {
            self.outcomes.iter().filter_map(f).collect()
        };
        println!(
            "{:<58} {:>6} {:>9} {:>9} {:>9}",
            "", "n", "p50 ms", "p99 ms", "max ms"
        );
        for (label, samples) in [
            (
                format!("baseline: `{COMMAND}` round trip, steady state"),
                baseline,
            ),
            (
                "pause: last output on old shard -> first on new shard".to_string(),
                pick(|o| o.gap),
            ),
            (
                "  of it: Redirect received -> first output on new shard".to_string(),
                pick(|o| o.after_redirect),
            ),
            (
                format!("`{COMMAND}` in flight across the move: sent -> acked"),
                pick(|o| o.in_flight),
            ),
        ] {
            let s = Stats::of(samples);
            println!(
                "{label:<58} {:>6} {:>9.2} {:>9.2} {:>9.2}",
                s.n, s.p50, s.p99, s.max
            );
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Nearest-rank percentiles of a sample, in ms.
struct Stats {
    n: usize,
    p50: f64,
    p99: f64,
    max: f64,
}

impl Stats {
    fn of(mut samples: Vec<Duration>) -> Stats {
        samples.sort_unstable();
        let pct = |p: f64| nearest_rank(&samples, p).map_or(f64::NAN, ms);
        Stats {
            n: samples.len(),
            p50: pct(50.0),
            p99: pct(99.0),
            max: pct(100.0),
        }
    }
}

/// What the shards' logs say about the drain. Times are ms after the
/// source's `SIGTERM` line (every process logs the same machine's clock);
/// best effort: a line that cannot be read is left out, shown as `-`.
struct Log {
    /// The summary line, from "drain summary:" on, escapes stripped.
    summary: Option<String>,
    /// Zone → its lease flip landed (source).
    flipped: HashMap<String, f64>,
    /// Zone → the zone actor found itself empty and stopped (source).
    drained: HashMap<String, f64>,
    /// Zone → the target observed the flip through its own `ClaimZone`.
    confirmed: HashMap<String, f64>,
    handoff_refusals: usize,
    adopt_refusals: usize,
}

impl Log {
    fn parse(source: &str, peers: &[String]) -> Log {
        let lines = |text: &str| -> Vec<String> { text.lines().map(strip_ansi).collect() };
        let source = lines(source);
        let peers: Vec<String> = peers.iter().flat_map(|t| lines(t)).collect();
        let zero = source
            .iter()
            .find(|l| l.contains("SIGTERM: draining"))
            .and_then(|l| seconds_of_day(l));
        // Zone → ms after `zero` of the first line containing `needle`.
        let times = |lines: &[String], needle: &str| -> HashMap<String, f64> {
            let mut at = HashMap::new();
            let Some(zero) = zero else { return at };
            for line in lines.iter().filter(|l| l.contains(needle)) {
                if let (Some(zone), Some(t)) = (last_field(line, "zone"), seconds_of_day(line)) {
                    let after = (t - zero).rem_euclid(86_400.0) * 1000.0;
                    at.entry(zone.to_string()).or_insert(after);
                }
            }
            at
        };
        Log {
            summary: source
                .iter()
                .rev()
                .find_map(|l| l.find("drain summary:").map(|at| l[at..].to_string())),
            flipped: times(&source, "lease flipped; fanning players off"),
            drained: times(&source, "zone drained"),
            confirmed: times(&peers, "adoption confirmed"),
            handoff_refusals: source
                .iter()
                .filter(|l| l.contains("drain handoff refused"))
                .count(),
            adopt_refusals: source
                .iter()
                .filter(|l| l.contains("AdoptZone refused"))
                .count(),
        }
    }

    fn summary_field(&self, key: &str) -> Option<String> {
        self.summary
            .as_deref()
            .and_then(|l| last_field(l, key))
            .map(str::to_string)
    }
}

/// The value of the last `key=value` word of a log line, unquoted.
fn last_field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .rev()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
        .map(|v| v.trim_matches('"'))
}

/// Seconds since midnight of the RFC 3339 timestamp a log line starts with.
fn seconds_of_day(line: &str) -> Option<f64> {
    let stamp = line.split_whitespace().next()?;
    let time = stamp.split_once('T')?.1.trim_end_matches('Z');
    let mut parts = time.splitn(3, ':');
    let h: f64 = parts.next()?.parse().ok()?;
    let m: f64 = parts.next()?.parse().ok()?;
    let s: f64 = parts.next()?.parse().ok()?;
    Some(h * 3600.0 + m * 60.0 + s)
}

/// The last `n` lines of a log, for an error message.
fn tail(log: &str, n: usize) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
