//! Issue 17, defect 1: two actors for one zone on one shard. Every path
//! that opens a zone — the boot-zone loop and orphan placement
//! (`host_zone`), a drain adoption (`adopt_zone`) — raced for one zone on
//! one shard against a real Redis. Before the fix each checked `hosted`,
//! awaited the lease claim (idempotent for its own holder) and spawned, so
//! two callers both won and two actors ran the zone; now exactly one
//! actor is built, and every caller that got a handle got that one.

use std::sync::Arc;
use std::time::Duration;

use telos_testkit::RedisServer;
use telos_testkit::world::world_dir;
use telos_world::config::{Cli, WorldConfig};
use telos_world::game::{StarterGame, load_world};
use telos_world::runtime::moves::adopt::{AdoptRefused, adopt_zone};
use telos_world::runtime::shard::Shard;
use tokio::sync::Barrier;

/// Callers of each kind racing for the zone.
const RACERS: usize = 12;

async fn shard(redis: &RedisServer, id: &str) -> Arc<Shard> {
    let world = load_world(&world_dir()).expect("the starter world");
    let cfg = WorldConfig::resolve(Cli {
        shard_id: Some(id.into()),
        redis_url: Some(redis.url.clone()),
        world: Some(world_dir()),
        ..Cli::default()
    })
    .expect("a shard config");
    Shard::new(cfg, "127.0.0.1:0".into(), Arc::new(StarterGame::new(world)))
        .await
        .expect("a shard on the private Redis")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn boot_loop_and_placement_racing_for_one_zone_build_one_actor() {
    let redis = RedisServer::start().unwrap();
    let a = shard(&redis, "shard-a").await;
    let start = Arc::new(Barrier::new(RACERS));
    let mut racers = tokio::task::JoinSet::new();
    for _ in 0..RACERS {
        let (a, start) = (a.clone(), start.clone());
        racers.spawn(async move {
            start.wait().await;
            a.host_zone("city").await.expect("hosting city")
        });
    }
    let handles: Vec<_> = racers.join_all().await.into_iter().flatten().collect();
    let running = a.hosted().get("city").expect("city runs on shard-a");
    assert!(!handles.is_empty(), "no caller got the zone");
    for h in &handles {
        assert!(
            h.same_actor(&running),
            "two actors were built for city on one shard"
        );
    }
    let (_, generation) = a.directory().zone_owner("city").await.unwrap().unwrap();
    assert_eq!(
        a.leases().held("city").map(|l| l.state.generation()),
        Some(generation)
    );
    a.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_adoption_racing_the_boot_loop_builds_one_actor() {
    let redis = RedisServer::start().unwrap();
    let (a, b) = (
        shard(&redis, "shard-a").await,
        shard(&redis, "shard-b").await,
    );
    // shard-b owns city and hands it to shard-a (a drain's AdoptZone),
    // while shard-a's own boot loop and placement try to claim it.
    let owned = b.host_zone("city").await.unwrap().expect("b hosts city");
    drop(owned);
    let (_, generation) = b.directory().zone_owner("city").await.unwrap().unwrap();
    let version = a.handoff().version;
    let start = Arc::new(Barrier::new(2 * RACERS));
    let mut racers = tokio::task::JoinSet::new();
    for i in 0..2 * RACERS {
        let (a, start) = (a.clone(), start.clone());
        racers.spawn(async move {
            start.wait().await;
            if i % 2 == 0 {
                // Ok(()) once built (or already running); `Opening` while
                // another caller here holds the zone's slot, which a drain
                // answers by asking again — as these callers do.
                for _ in 0..200 {
                    match adopt_zone(&a, "city", "shard-b", generation, version).await {
                        Err(AdoptRefused::Opening(_)) => {
                            tokio::time::sleep(Duration::from_millis(10)).await
                        }
                        done => {
                            done.expect("adopting city");
                            break;
                        }
                    }
                }
                a.hosted().get("city")
            } else {
                a.host_zone("city").await.expect("hosting city")
            }
        });
    }
    let handles: Vec<_> = racers.join_all().await.into_iter().flatten().collect();
    let running = a.hosted().get("city").expect("the adoption built city");
    for h in &handles {
        assert!(
            h.same_actor(&running),
            "two actors were built for city on one shard"
        );
    }
    // shard-b still owns the lease: shard-a's claims all found it held.
    let (owner, _) = a.directory().zone_owner("city").await.unwrap().unwrap();
    assert_eq!(owner, "shard-b");
    a.shutdown(Duration::from_secs(5)).await;
    b.shutdown(Duration::from_secs(5)).await;
}
