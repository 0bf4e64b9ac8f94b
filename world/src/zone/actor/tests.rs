//! The zone actor against a real Redis (a private `redis-server`), driven
//! through its handle as the runtime drives it.

use std::sync::Arc;
use std::time::Duration;

use telos_proto::v1::{Attached, server_frame::Frame};
use telos_redis::directory::Directory;
use telos_redis::store::{ClaimId, Store};
use telos_testkit::RedisServer;
use telos_testkit::process::repo_root;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::spawn_zone;
use crate::game::{StarterGame, load_world};
use crate::handoff::context::{Handoff, Shared, Tasks};
use crate::model::Game;
use crate::zone::env::ZoneEnv;
use crate::zone::handle::{JoinError, ZoneHandle};
use crate::zone::hosted::Hosted;
use crate::zone::lease::LeaseState;
use crate::zone::roster::Roster;
use crate::zone::session::{GateStream, Joining, OUT_CHANNEL, SessionMeta};

/// Bounds every wait here (a hang, not a performance claim).
pub(super) const WAIT: Duration = Duration::from_secs(10);

/// A keyless zone `city`, empty, under a valid local lease; its players
/// are saved through `store_url` (the server's own, or a proxy to it).
pub(super) async fn city(
    redis: &RedisServer,
    store_url: &str,
) -> anyhow::Result<(ZoneHandle, Arc<dyn Game>, Roster)> {
    let store = Store::connect(store_url).await?;
    let directory = Directory::connect(&redis.url).await?;
    let game: Arc<dyn Game> = Arc::new(StarterGame::new(load_world(
        &repo_root().join("config/world"),
    )?));
    let (tracker, root) = (TaskTracker::new(), CancellationToken::new());
    let handoff = Arc::new(Handoff::new(
        "shard-a",
        "127.0.0.1:1",
        None,
        crate::handoff::HANDOFF_VERSION,
        Shared {
            directory: directory.clone(),
            store: store.clone(),
            game: game.clone(),
            tasks: Tasks {
                tracker: tracker.clone(),
                stop: root.clone(),
            },
        },
    ));
    let env = ZoneEnv {
        shard_id: "shard-a".into(),
        game: game.clone(),
        store,
        directory: directory.clone(),
        hosted: Hosted::default(),
        roster: Roster::default(),
        tick: Duration::from_millis(50),
        save_interval: Duration::from_secs(60),
        handoff,
        tracker: tracker.clone(),
        root: root.clone(),
        chat_limit: crate::model::chat::ChatLimit::DEFAULT,
        comm: crate::zone::comm::Comm::none(),
        instances: Arc::default(),
    };
    let model = game.open_zone("city").expect("the starter has a city");
    // The lease is real: the zone opens its state row under it.
    let ttl = Duration::from_secs(60);
    let generation = match directory.claim_zone("city", "shard-a", ttl).await? {
        telos_redis::directory::Claim::Acquired { r#gen } => r#gen,
        held => anyhow::bail!("the city's lease is held: {held:?}"),
    };
    let lease = LeaseState::new(generation, ttl, Instant::now());
    let slot = env.hosted.reserve("city").expect("a free zone");
    let roster = env.roster.clone();
    let zone = spawn_zone(env, slot, model, Some(lease), &tracker, &root);
    Ok((zone, game, roster))
}

/// A keyless zone `city` with one player in it, under a valid local lease.
async fn city_with_a_player(
    redis: &RedisServer,
) -> anyhow::Result<(ZoneHandle, mpsc::Receiver<telos_proto::v1::ServerFrame>)> {
    let (zone, game, _) = city(redis, &redis.url).await?;
    let (out, frames) = mpsc::channel(OUT_CHANNEL);
    let meta = SessionMeta {
        conn_id: "conn-1".into(),
        epoch: 1,
        claim: ClaimId::random(),
        departure_claim: None,
        state_version: 0,
        applied_seq: 0,
        saved_seq: 0,
        dirty: true,
        quit: false,
        stream: GateStream::new(out),
        persist_id: "pid".into(),
        chat: Default::default(),
        commit: None,
    };
    let attached = Attached {
        ack_input_seq: 0,
        name: "Ada".into(),
        credential: String::new(),
        shard_id: "shard-a".into(),
    };
    zone.join(Joining {
        character: game.new_player("Ada"),
        meta,
        attached,
        arrival: crate::model::Arrival::Appears,
    })
    .await?;
    Ok((zone, frames))
}

/// A drain interrupted by a shutdown (or a fence) answers its caller only
/// once the actor has ended — its players closed — never while it still
/// applies input: a transfer's close releases the lease when the drain
/// answers, and a released zone must have no writer left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_drain_answers_only_after_the_zone_has_stopped() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let (zone, mut frames) = city_with_a_player(&redis).await?;
    // Keyless: every handoff of the fan-off is refused and retried on the
    // tick, so the drain stays under way until the shutdown comes.
    let drain = {
        let zone = zone.clone();
        tokio::spawn(async move { zone.drain(Instant::now() + WAIT).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!drain.is_finished(), "the drain answered before any stop");
    let stopping = {
        let zone = zone.clone();
        tokio::spawn(async move { zone.shutdown("The world is restarting; hold on...").await })
    };
    let answered = tokio::time::timeout(WAIT, drain).await??;
    assert!(answered.is_err(), "an interrupted drain reports no outcome");
    // By the time the drain answered, the player had been closed (read
    // before the shutdown's own answer is awaited).
    let mut closed = false;
    while let Ok(frame) = frames.try_recv() {
        closed |= matches!(frame.frame, Some(Frame::Closed(_)));
    }
    assert!(
        closed,
        "the drain answered while its player was still in play"
    );
    tokio::time::timeout(WAIT, stopping).await??;
    Ok(())
}

/// A player joining from their row (a login or resume) whose room is in
/// another zone — the row was saved elsewhere after the caller routed them
/// here — is refused with that zone, so the caller routes again. Before,
/// the game put them into this zone's first room: neither where they stood
/// nor where they were going, and `Attached` acknowledged the move.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_from_a_row_in_another_zone_is_routed_again() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let (zone, _frames) = city_with_a_player(&redis).await?;
    let game = StarterGame::new(load_world(&repo_root().join("config/world"))?);
    let mut character = game.new_player("Bea");
    character.set_room("forest:eaves".into());
    let (out, mut frames) = mpsc::channel(OUT_CHANNEL);
    let meta = SessionMeta {
        conn_id: "conn-2".into(),
        epoch: 1,
        claim: ClaimId::random(),
        departure_claim: None,
        state_version: 0,
        applied_seq: 4,
        saved_seq: 4,
        dirty: false,
        quit: false,
        stream: GateStream::new(out),
        persist_id: "pid-2".into(),
        commit: None,
        chat: Default::default(),
    };
    let attached = Attached {
        ack_input_seq: 4,
        name: "Bea".into(),
        credential: String::new(),
        shard_id: "shard-a".into(),
    };
    let joined = zone
        .join(Joining {
            character,
            meta,
            attached,
            arrival: crate::model::Arrival::Appears,
        })
        .await;
    match joined {
        Err(JoinError::Misrouted(z)) => assert_eq!(z, "forest"),
        other => panic!("joined a forest room into the city: {other:?}"),
    }
    assert!(
        frames.try_recv().is_err(),
        "a refused join sends nothing (no Attached, no room)"
    );
    Ok(())
}
