//! # zone_actor: what the zone actor costs over the pure game model
//!
//! `cargo bench -p telos-world --bench zone_actor` (or `scripts/bench zone`).
//!
//! For each case, N players join one real zone actor (`spawn_zone`, with a
//! real lease from `claim_zone` kept alive by the real renew loop, a real
//! `Store` and `Directory` on a private `redis-server`, the shard's default
//! tick and save cadence). Each player has its own out channel, drained by
//! its own task, and keeps exactly one line in flight through
//! `ZoneHandle::input`, as a `Play` session does. The same command mix is then
//! run directly on a `ZoneState::execute` (no actor, no channels, no Redis)
//! as the baseline, in the same process and run.
//!
//! Latency is measured per command from the caller's side: for the actor,
//! from sending the line to getting its reply (the `InputAck` is already
//! queued by then); for the model, one `execute` call. Saves are part of the
//! actor's cost (cadence saves and the early save every 128 unsaved lines);
//! the model does none.
//!
//! `TELOS_BENCH_SECS` overrides the measured seconds per side of each case.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use telos_proto::v1::{Attached, ServerFrame};
use telos_redis::directory::Claim;
use telos_testkit::RedisServer;
use telos_testkit::world::world_dir;
use telos_world::config::{Cli, WorldConfig};
use telos_world::game::{
    Character, Ctx, StarterGame, WorldDef, ZoneDef, ZoneState, from_state_json, load_world,
    sanitize_loaded, to_state_json, zone_of,
};
use telos_world::runtime::shard::Shard;
use telos_world::zone::lease::{LeaseState, renew_loop};
use telos_world::zone::session::OUT_CHANNEL;
use telos_world::zone::{GateStream, InputReply, Joining, SessionMeta, ZoneHandle, spawn_zone};
use tokio::sync::{Semaphore, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use telos_testkit::stats::percentile_us;

/// Seconds measured per side (actor, model) of each case; a few seconds
/// gives stable percentiles without making the bench a coffee break.
const MEASURE_SECS: f64 = 2.0;
/// Discarded lead-in per side: lets caches, allocator and the first saves settle.
const WARMUP: Duration = Duration::from_millis(500);
const SHARD_ID: &str = "bench";
const PASSWORD: &str = "bench-password";
/// Argon2 hashes at a time while creating the characters (setup only):
/// each takes 19 MiB and a core.
const CREATE_PARALLELISM: usize = 2;
/// The command mix, cycled per player with a per-player offset.
const MIX: [&str; 3] = ["say hi", "look", "journal x"];

/// One row of the table.
struct Case {
    players: usize,
    /// Players stand in one room (a crowd: `say` fans out to all of them)
    /// or are spread over the zone's rooms.
    crowd: bool,
}

const CASES: [Case; 4] = [
    Case {
        players: 1,
        crowd: false,
    },
    Case {
        players: 10,
        crowd: false,
    },
    Case {
        players: 100,
        crowd: false,
    },
    Case {
        players: 100,
        crowd: true,
    },
];

/// Commands per second and latency percentiles of one side of a case.
struct Measured {
    commands: u64,
    secs: f64,
    p50_us: f64,
    p99_us: f64,
    /// Replies other than `Applied` (a player reclaimed or refused): should be 0.
    failed: u64,
}

impl Measured {
    fn from(mut latencies_ns: Vec<u64>, secs: f64, failed: u64) -> Measured {
        latencies_ns.sort_unstable();
        let pct = |p: f64| percentile_us(&latencies_ns, p);
        Measured {
            commands: latencies_ns.len() as u64,
            secs,
            p50_us: pct(50.0),
            p99_us: pct(99.0),
            failed,
        }
    }

    fn per_sec(&self) -> f64 {
        self.commands as f64 / self.secs
    }
}

fn main() -> anyhow::Result<()> {
    let secs = std::env::var("TELOS_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| *s > 0.0)
        .unwrap_or(MEASURE_SECS);
    let measure = Duration::from_secs_f64(secs);
    let redis = RedisServer::start()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let world_path = world_dir();
    let world = load_world(&world_path)?;
    let zone = zone_of(&world.start_room).to_string();
    let def = world
        .zone(&zone)
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("start zone {zone} is not defined"))?;
    let rooms: Vec<String> = def.rooms.iter().map(|r| r.id.clone()).collect();
    let start_room = world.start_room.clone();
    let world = Arc::new(world);
    let game = Arc::new(StarterGame::new((*world).clone()));
    let max_players = CASES.iter().map(|c| c.players).max().unwrap_or(1);
    let names: Vec<String> = (0..max_players).map(bot_name).collect();

    let cfg = WorldConfig::resolve(Cli {
        shard_id: Some(SHARD_ID.into()),
        redis_url: Some(redis.url.clone()),
        world: Some(world_path),
        ..Cli::default()
    })?;
    let (tick, save_interval, lease_ttl) = (cfg.tick, cfg.save_interval, cfg.lease_ttl);
    let shard = runtime.block_on(async {
        // The real shard wiring builds the zone environment; nothing is
        // started (no heartbeat, no gRPC): only the actor runs.
        let shard = Shard::new(cfg, "127.0.0.1:0".into(), game.clone()).await?;
        create_characters(&shard, &names, &start_room).await?;
        anyhow::Ok(shard)
    })?;

    println!(
        "zone actor vs. pure model: zone {zone} ({} rooms), mix [{}], one line in flight per player",
        rooms.len(),
        MIX.join(" | ")
    );
    println!(
        "{secs:.1} s measured per side after {:.1} s warm-up; tick {} ms, save every {} ms, lease TTL {} ms, redis {}",
        WARMUP.as_secs_f64(),
        tick.as_millis(),
        save_interval.as_millis(),
        lease_ttl.as_millis(),
        redis.url
    );
    println!();
    let header = format!(
        "{:>7} {:>6} | {:>11} {:>8} {:>8} | {:>11} {:>8} {:>8} | {:>11} {:>11}",
        "players",
        "rooms",
        "actor cmd/s",
        "p50 µs",
        "p99 µs",
        "model cmd/s",
        "p50 µs",
        "p99 µs",
        "model/actor",
        "p50 actor/"
    );
    println!("{header}");
    println!(
        "{:>7} {:>6} | {:>11} {:>8} {:>8} | {:>11} {:>8} {:>8} | {:>11} {:>11}",
        "", "", "", "", "", "", "", "", "cmd/s", "model"
    );
    println!("{}", "-".repeat(header.chars().count()));
    for case in &CASES {
        let placement: Vec<String> = (0..case.players)
            .map(|i| {
                if case.crowd {
                    start_room.clone()
                } else {
                    rooms[i % rooms.len()].clone()
                }
            })
            .collect();
        let occupied = {
            let mut r = placement.clone();
            r.sort();
            r.dedup();
            r.len()
        };
        let names = &names[..case.players];
        let actor = runtime.block_on(measure_actor(
            &shard,
            &world,
            &zone,
            def.clone(),
            names,
            &placement,
            measure,
        ))?;
        let model = measure_model(&world, &zone, def.clone(), names, &placement, measure);
        let failed = if actor.failed + model.failed > 0 {
            format!("  ({} failed replies!)", actor.failed + model.failed)
        } else {
            String::new()
        };
        println!(
            "{:>7} {:>6} | {:>11.0} {:>8.1} {:>8.1} | {:>11.0} {:>8.2} {:>8.2} | {:>10.1}x {:>10.1}x{failed}",
            case.players,
            occupied,
            actor.per_sec(),
            actor.p50_us,
            actor.p99_us,
            model.per_sec(),
            model.p50_us,
            model.p99_us,
            model.per_sec() / actor.per_sec(),
            actor.p50_us / model.p50_us,
        );
    }
    println!();
    println!(
        "model/actor cmd/s: how many more commands per second the bare model runs than the actor serves."
    );
    println!("With N lines in flight an actor command also waits behind the other players' lines");
    println!(
        "(latency ~ N / throughput), so p50 actor/model is queueing + overhead; with 1 player it is the round trip."
    );
    drop(shard);
    runtime.shutdown_timeout(Duration::from_secs(2));
    Ok(())
}

/// `bot_name(0)` = "Botaa": valid names (letters only) for any index.
fn bot_name(i: usize) -> String {
    let letter = |n: usize| char::from(b'a' + (n % 26) as u8);
    format!(
        "Bot{}{}{}",
        letter(i / (26 * 26)),
        letter(i / 26),
        letter(i)
    )
}

async fn create_characters(
    shard: &Shard,
    names: &[String],
    start_room: &str,
) -> anyhow::Result<()> {
    let limit = Arc::new(Semaphore::new(CREATE_PARALLELISM));
    let mut tasks = tokio::task::JoinSet::new();
    for name in names {
        let (store, name, limit) = (shard.store().clone(), name.clone(), limit.clone());
        let state = to_state_json(&Character::new(&name, start_room));
        tasks.spawn(async move {
            let _permit = limit.acquire_owned().await?;
            store.create_character(&name, PASSWORD, &state).await?;
            anyhow::Ok(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    Ok(())
}

/// Claim the player's row (a fresh owner epoch, as a login does) and join
/// them into `zone` at `room`; the out channel is drained by its own task.
async fn join(
    shard: &Shard,
    zone: &ZoneHandle,
    name: &str,
    room: &str,
    tracker: &TaskTracker,
) -> anyhow::Result<(String, String)> {
    let key = name.to_ascii_lowercase();
    let conn_id = format!("bench-{key}");
    let claimed = shard.store().claim_character(&key).await?;
    let row = claimed.row;
    let mut character = from_state_json(&row.state_json)?;
    character.room = room.to_string();
    sanitize_loaded(&mut character);
    let (out, mut rx) = mpsc::channel::<ServerFrame>(OUT_CHANNEL);
    tracker.spawn(async move {
        while let Some(frame) = rx.recv().await {
            black_box(frame);
        }
    });
    let meta = SessionMeta {
        conn_id: conn_id.clone(),
        epoch: claimed.epoch,
        claim: claimed.claim,
        departure_claim: None,
        state_version: row.state_version,
        applied_seq: 0,
        saved_seq: 0,
        dirty: false,
        quit: false,
        stream: GateStream::new(out),
        persist_id: row.persist_id.clone(),
        chat: Default::default(),
        commit: None,
    };
    let attached = Attached {
        ack_input_seq: 0,
        name: character.name.clone(),
        credential: String::new(),
        shard_id: shard.id().to_string(),
    };
    zone.join(Joining {
        character: Box::new(character),
        meta,
        attached,
        arrival: telos_world::model::Arrival::Appears,
    })
    .await?;
    Ok((key, conn_id))
}

async fn measure_actor(
    shard: &Arc<Shard>,
    shard_world: &Arc<WorldDef>,
    zone_id: &str,
    def: Arc<ZoneDef>,
    names: &[String],
    placement: &[String],
    measure: Duration,
) -> anyhow::Result<Measured> {
    let tracker = TaskTracker::new();
    let stop = CancellationToken::new();
    let ttl = shard.config().lease_ttl;
    let sent_at = Instant::now();
    let generation = match shard.directory().claim_zone(zone_id, SHARD_ID, ttl).await? {
        Claim::Acquired { r#gen } => r#gen,
        Claim::Held { owner, .. } => anyhow::bail!("zone {zone_id} is held by {owner}"),
    };
    let lease = LeaseState::new(generation, ttl, sent_at);
    let slot = shard
        .hosted()
        .reserve(zone_id)
        .map_err(|t| anyhow::anyhow!("zone {zone_id} is taken: {t:?}"))?;
    let zone = spawn_zone(
        shard.zone_env().clone(),
        slot,
        Box::new(ZoneState::new(def, shard_world.clone(), zone_id)),
        Some(lease.clone()),
        &tracker,
        &stop,
    );
    tracker.spawn(renew_loop(
        shard.directory().clone(),
        zone_id.to_string(),
        SHARD_ID.to_string(),
        lease,
        zone.cancel_token().clone(),
        stop.clone(),
    ));
    let mut players = Vec::with_capacity(names.len());
    for (name, room) in names.iter().zip(placement) {
        players.push(join(shard, &zone, name, room, &tracker).await?);
    }

    let begin = Instant::now() + Duration::from_millis(50);
    let measure_from = begin + WARMUP;
    let until = measure_from + measure;
    let mut tasks = tokio::task::JoinSet::new();
    for (i, (key, conn_id)) in players.into_iter().enumerate() {
        let zone = zone.clone();
        tasks.spawn(async move {
            tokio::time::sleep_until(begin).await;
            let mut latencies = Vec::new();
            let mut failed = 0u64;
            let mut seq = 0u64;
            loop {
                let t0 = Instant::now();
                if t0 >= until {
                    break;
                }
                seq += 1;
                let line = MIX[(i + seq as usize) % MIX.len()].to_string();
                let reply = zone.input(&key, &conn_id, seq, line).await;
                let took = t0.elapsed();
                match reply {
                    Ok(InputReply::Applied) => {}
                    _ => {
                        failed += 1;
                        break;
                    }
                }
                if t0 >= measure_from {
                    latencies.push(took.as_nanos() as u64);
                }
            }
            (latencies, failed)
        });
    }
    let mut latencies = Vec::new();
    let mut failed = 0;
    while let Some(done) = tasks.join_next().await {
        let (l, f) = done?;
        latencies.extend(l);
        failed += f;
    }
    // Lines still in flight at `until` finish after it: count the window as
    // measured, up to the last reply.
    let secs = measure.as_secs_f64();
    zone.shutdown("bench case done").await;
    stop.cancel();
    tracker.close();
    tracker.wait().await;
    shard
        .directory()
        .release_zone(zone_id, SHARD_ID, generation)
        .await?;
    Ok(Measured::from(latencies, secs, failed))
}

fn measure_model(
    world: &Arc<WorldDef>,
    zone_id: &str,
    def: Arc<ZoneDef>,
    names: &[String],
    placement: &[String],
    measure: Duration,
) -> Measured {
    let mut state = ZoneState::new(def, world.clone(), zone_id);
    let mut keys = Vec::with_capacity(names.len());
    for (name, room) in names.iter().zip(placement) {
        let mut ch = Character::new(name, room);
        sanitize_loaded(&mut ch);
        keys.push(ch.key());
        black_box(state.enter(ch, None));
    }
    let ctx = Ctx {
        shard_id: SHARD_ID,
        zone_id,
        chat: telos_world::model::chat::ChatAllowance::UNLIMITED,
    };
    let begin = std::time::Instant::now();
    let measure_from = begin + WARMUP;
    let until = measure_from + measure;
    let mut latencies = Vec::new();
    let mut seq = 0usize;
    'run: loop {
        seq += 1;
        for (i, key) in keys.iter().enumerate() {
            let t0 = std::time::Instant::now();
            if t0 >= until {
                break 'run;
            }
            let line = MIX[(i + seq) % MIX.len()];
            black_box(state.execute(key, black_box(line), &ctx));
            if t0 >= measure_from {
                latencies.push(t0.elapsed().as_nanos() as u64);
            }
        }
    }
    Measured::from(latencies, measure.as_secs_f64(), 0)
}
