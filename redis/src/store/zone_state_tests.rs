//! Zone state rows against a real, private redis-server, with real leases.

use std::time::Duration;

use telos_testkit::RedisServer;

use super::*;
use crate::directory::{Claim, Directory};

const TTL: Duration = Duration::from_secs(30);

async fn setup() -> (RedisServer, Store, Directory) {
    let server = RedisServer::start().expect("redis-server");
    let store = Store::connect(&server.url).await.expect("connect");
    let dir = Directory::connect(&server.url).await.expect("connect");
    (server, store, dir)
}

fn whole(state: &[u8], commits: u64) -> ZoneStateOpened {
    ZoneStateOpened {
        whole: Some(state.to_vec()),
        parts: Vec::new(),
        commits,
    }
}

async fn claim(dir: &Directory, zone: &str, shard: &str, ttl: Duration) -> u64 {
    match dir.claim_zone(zone, shard, ttl).await.unwrap() {
        Claim::Acquired { r#gen } => r#gen,
        other => panic!("{shard} could not claim {zone}: {other:?}"),
    }
}

#[tokio::test]
async fn an_open_takes_the_row_over_and_only_the_latest_open_writes() {
    let (_r, store, dir) = setup().await;
    let g = claim(&dir, "city", "shard-a", TTL).await;
    let (first, second) = (ClaimId::random(), ClaimId::random());
    assert_eq!(
        store
            .open_zone_state("city", "shard-a", g, first)
            .await
            .unwrap(),
        Ok(ZoneStateOpened::default()),
        "nothing saved yet: the zone opens from its world files"
    );
    store
        .save_zone_state("city", "shard-a", g, first, b"one")
        .await
        .unwrap()
        .unwrap();
    // A second open of the same zone at the same generation (two actors
    // of one process): it reads what the first saved and takes the row.
    assert_eq!(
        store
            .open_zone_state("city", "shard-a", g, second)
            .await
            .unwrap(),
        Ok(whole(b"one", 1))
    );
    assert_eq!(
        store
            .save_zone_state("city", "shard-a", g, first, b"lost")
            .await
            .unwrap(),
        Err(ZoneStateRefused::Holder),
        "the earlier open writes no more"
    );
    store
        .save_zone_state("city", "shard-a", g, second, b"two")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        store.zone_state("city").await.unwrap(),
        Some(b"two".to_vec())
    );
}

#[tokio::test]
async fn no_lease_no_open_and_no_save() {
    let (_r, store, dir) = setup().await;
    let holder = ClaimId::random();
    assert_eq!(
        store
            .open_zone_state("city", "shard-a", 1, holder)
            .await
            .unwrap(),
        Err(ZoneStateRefused::Lease)
    );
    let g = claim(&dir, "city", "shard-b", TTL).await;
    assert_eq!(
        store
            .open_zone_state("city", "shard-a", g, holder)
            .await
            .unwrap(),
        Err(ZoneStateRefused::Lease),
        "another shard's lease"
    );
    assert_eq!(
        store
            .save_zone_state("city", "shard-a", g, holder, b"x")
            .await
            .unwrap(),
        Err(ZoneStateRefused::Lease)
    );
    assert_eq!(store.zone_state("city").await.unwrap(), None);
    assert!(
        store
            .open_zone_state("crypt#1", "shard-a", g, holder)
            .await
            .is_err()
    );
}

/// A stale owner: paused past its lease's TTL while the zone moved on.
#[tokio::test]
async fn a_stale_owners_save_is_refused_after_its_lease_expired() {
    let (_r, store, dir) = setup().await;
    let short = Duration::from_millis(300);
    let g1 = claim(&dir, "forest", "shard-a", short).await;
    let a = ClaimId::random();
    store
        .open_zone_state("forest", "shard-a", g1, a)
        .await
        .unwrap()
        .unwrap();
    store
        .save_zone_state("forest", "shard-a", g1, a, b"a's")
        .await
        .unwrap()
        .unwrap();
    // shard-a pauses past its TTL: nobody has claimed yet, and still its
    // save is refused (the lease it writes under is gone).
    tokio::time::sleep(short * 2).await;
    assert_eq!(
        store
            .save_zone_state("forest", "shard-a", g1, a, b"late")
            .await
            .unwrap(),
        Err(ZoneStateRefused::Lease)
    );
    // shard-b claims at a newer generation and opens what a saved last.
    let g2 = claim(&dir, "forest", "shard-b", TTL).await;
    assert!(g2 > g1);
    let b = ClaimId::random();
    assert_eq!(
        store
            .open_zone_state("forest", "shard-b", g2, b)
            .await
            .unwrap(),
        Ok(whole(b"a's", 1))
    );
    assert_eq!(
        store
            .save_zone_state("forest", "shard-a", g1, a, b"late")
            .await
            .unwrap(),
        Err(ZoneStateRefused::Lease)
    );
    store
        .save_zone_state("forest", "shard-b", g2, b, b"b's")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        store.zone_state("forest").await.unwrap(),
        Some(b"b's".to_vec())
    );
}

/// An open at an older generation than the row's (a lease re-minted lower
/// after Redis lost writes) never takes the row back.
#[tokio::test]
async fn an_open_below_the_rows_generation_is_refused_as_stale() {
    let (_r, store, dir) = setup().await;
    let g = claim(&dir, "hills", "shard-a", TTL).await;
    let _: () = redis::cmd("HSET")
        .arg(key_names::zone_state("hills"))
        .arg("gen")
        .arg(g + 5)
        .query_async(&mut store.conn())
        .await
        .unwrap();
    assert_eq!(
        store
            .open_zone_state("hills", "shard-a", g, ClaimId::random())
            .await
            .unwrap(),
        Err(ZoneStateRefused::Stale { row_gen: g + 5 })
    );
}
