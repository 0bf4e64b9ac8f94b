//! Drain-target selection and reservations against a real, private
//! redis-server.

use std::time::Duration;

use super::drain_targets::{PRESENCE_REFLECT_WINDOW, drain_reservation_ttl};
use super::tests::{eventually, setup};
use super::*;

/// Long enough that nothing expires while a test is looking at it.
const LONG: Duration = Duration::from_secs(30);
/// Short enough to watch a hold expire within a test.
const SHORT: Duration = Duration::from_millis(200);

/// The Redis server's clock in ms, the one every hold expiry is judged by.
async fn server_now_ms(dir: &Directory) -> u64 {
    dir.server_time_ms().await.expect("TIME")
}

/// Waits until the server clock is past `expiry_ms`.
async fn server_clock_past(dir: &Directory, expiry_ms: u64) {
    eventually("the server clock to pass the expiry", || async {
        server_now_ms(dir).await > expiry_ms
    })
    .await;
}

fn peer(id: &str, state: ShardState, players: u64, capacity: u64) -> ShardInfo {
    ShardInfo {
        id: id.into(),
        addr: format!("10.0.0.1:{}", 7000 + id.len()),
        state,
        players,
        capacity,
        handoff_version: 2,
        incarnation: 0,
    }
}

async fn live(dir: &Directory, id: &str, players: u64, capacity: u64) -> ShardInfo {
    let info = peer(id, ShardState::Live, players, capacity);
    dir.heartbeat(&info, LONG).await.unwrap();
    info
}

async fn reserve(dir: &Directory, drainer: &str, count: u64, ttl: Duration) -> DrainTarget {
    dir.reserve_drain_target(drainer, count, ttl, &[])
        .await
        .unwrap()
        .expect("a live peer")
}

/// The single hold `drainer` has on `target`, as `(count, expiry_ms)`.
async fn hold(dir: &Directory, target: &str, drainer: &str) -> Option<(u64, u64)> {
    dir.drain_reservations(target)
        .await
        .unwrap()
        .into_iter()
        .find(|(d, _, _)| d == drainer)
        .map(|(_, count, expiry)| (count, expiry))
}

async fn raw_hold(dir: &Directory, target: &str, drainer: &str) -> Option<String> {
    redis::cmd("HGET")
        .arg(key_names::drain_reserve(target))
        .arg(drainer)
        .query_async(&mut dir.conn())
        .await
        .unwrap()
}

async fn pttl(dir: &Directory, key: &str) -> i64 {
    redis::cmd("PTTL")
        .arg(key)
        .query_async(&mut dir.conn())
        .await
        .unwrap()
}

#[test]
fn reservation_ttl_is_deadline_plus_reflect_window() {
    assert_eq!(PRESENCE_REFLECT_WINDOW, Duration::from_secs(12));
    assert_eq!(
        drain_reservation_ttl(Duration::from_secs(30)),
        Duration::from_secs(42)
    );
}

#[tokio::test]
async fn reserves_accumulate_into_one_packed_hold_and_rebase_expiry() {
    let (_r, dir) = setup().await;
    live(&dir, "a", 0, 100).await;
    let b = live(&dir, "b", 10, 100).await;

    let before = server_now_ms(&dir).await;
    let first = reserve(&dir, "a", 3, LONG).await;
    assert_eq!(
        first,
        DrainTarget {
            shard: b.clone(),
            over_ceiling: false,
            reserved_total: 3,
        },
        "the drainer never picks itself"
    );
    let (count, first_expiry) = hold(&dir, "b", "a").await.unwrap();
    assert_eq!(count, 3);
    let ttl_ms = LONG.as_millis() as u64;
    assert!(first_expiry >= before + ttl_ms && first_expiry <= server_now_ms(&dir).await + ttl_ms);
    assert_eq!(
        raw_hold(&dir, "b", "a").await,
        Some(format!("3:{first_expiry}")),
        "count and expiry packed in one field"
    );
    let hash_ttl = pttl(&dir, &key_names::drain_reserve("b")).await;
    assert!(
        hash_ttl > 0 && hash_ttl <= ttl_ms as i64,
        "hash expires with its latest hold, got {hash_ttl}"
    );

    server_clock_past(&dir, first_expiry - ttl_ms + 5).await;
    let second = reserve(&dir, "a", 4, LONG).await;
    assert_eq!(second.shard.id, "b");
    assert_eq!(second.reserved_total, 7);
    let (count, second_expiry) = hold(&dir, "b", "a").await.unwrap();
    assert_eq!(count, 7, "accumulated");
    assert!(
        second_expiry > first_expiry,
        "rebased to the later now + ttl: {second_expiry} vs {first_expiry}"
    );
    assert_eq!(dir.drain_reservations("b").await.unwrap().len(), 1);
}

#[tokio::test]
async fn expired_holds_are_pruned_by_the_server_clock_on_selection() {
    let (_r, dir) = setup().await;
    live(&dir, "b", 0, 100).await;
    live(&dir, "c", 10, 100).await;

    // b: a short hold from "a" and a long one from "y", so the hash itself
    // outlives the short hold and only per-field pruning can drop it.
    assert_eq!(reserve(&dir, "a", 50, SHORT).await.shard.id, "b");
    let y = dir
        .reserve_drain_target("y", 1, LONG, &["c".into()])
        .await
        .unwrap()
        .unwrap();
    assert_eq!((y.shard.id.as_str(), y.reserved_total), ("b", 51));
    // While the short hold lives, b (headroom 49) loses to c (90).
    assert_eq!(reserve(&dir, "z", 1, LONG).await.shard.id, "c");

    let (_, expiry) = hold(&dir, "b", "a").await.unwrap();
    server_clock_past(&dir, expiry).await;
    assert_eq!(
        raw_hold(&dir, "b", "a").await.map(|v| v.is_empty()),
        Some(false),
        "the lapsed field is still stored until a script reads it"
    );

    // b's headroom is 99 again once the lapsed hold stops counting.
    let pick = reserve(&dir, "z", 1, LONG).await;
    assert_eq!(pick.shard.id, "b");
    assert_eq!(pick.reserved_total, 2, "y's 1 and z's 1; a's 50 pruned");
    assert_eq!(raw_hold(&dir, "b", "a").await, None, "pruned by selection");
    let holders: Vec<String> = dir
        .drain_reservations("b")
        .await
        .unwrap()
        .into_iter()
        .map(|(d, _, _)| d)
        .collect();
    assert_eq!(holders, ["y", "z"]);
}

#[tokio::test]
async fn expire_soon_only_ever_shortens() {
    let (_r, dir) = setup().await;
    live(&dir, "b", 0, 100).await;
    reserve(&dir, "a", 5, LONG).await;
    let (_, expiry) = hold(&dir, "b", "a").await.unwrap();

    dir.expire_drain_target_soon("b", "a", LONG * 2)
        .await
        .unwrap();
    assert_eq!(
        hold(&dir, "b", "a").await,
        Some((5, expiry)),
        "a longer window never extends"
    );

    let soon = Duration::from_secs(1);
    dir.expire_drain_target_soon("b", "a", soon).await.unwrap();
    let (count, shortened) = hold(&dir, "b", "a").await.unwrap();
    assert_eq!(count, 5);
    assert!(shortened < expiry);
    assert!(shortened <= server_now_ms(&dir).await + 1000);
    let hash_ttl = pttl(&dir, &key_names::drain_reserve("b")).await;
    assert!(
        hash_ttl > 0 && hash_ttl <= 1000,
        "hash follows its latest hold, got {hash_ttl}"
    );

    // A missing field (and a missing hash) stays missing.
    dir.expire_drain_target_soon("b", "nobody", LONG)
        .await
        .unwrap();
    assert_eq!(raw_hold(&dir, "b", "nobody").await, None);
    dir.expire_drain_target_soon("c", "a", LONG).await.unwrap();
    let exists: bool = redis::cmd("EXISTS")
        .arg(key_names::drain_reserve("c"))
        .query_async(&mut dir.conn())
        .await
        .unwrap();
    assert!(!exists);

    // Nor is an expired hold revived.
    dir.expire_drain_target_soon("b", "a", Duration::from_millis(50))
        .await
        .unwrap();
    let (_, last) = hold(&dir, "b", "a").await.unwrap();
    server_clock_past(&dir, last).await;
    dir.expire_drain_target_soon("b", "a", LONG).await.unwrap();
    assert_eq!(raw_hold(&dir, "b", "a").await, None);
}

#[tokio::test]
async fn release_gives_back_one_hand_over_and_keeps_the_rest_of_the_hold() {
    let (_r, dir) = setup().await;
    live(&dir, "b", 0, 100).await;
    // Two of a's zones reserved onto b; the second hand-over fails.
    reserve(&dir, "a", 3, LONG).await;
    reserve(&dir, "a", 1, LONG).await;
    reserve(&dir, "x", 2, LONG).await;
    let (count, expiry) = hold(&dir, "b", "a").await.unwrap();
    assert_eq!(count, 4);

    assert_eq!(dir.release_drain_target("b", "a", 1).await.unwrap(), 3);
    assert_eq!(
        hold(&dir, "b", "a").await,
        Some((3, expiry)),
        "the first zone's players stay reserved, expiry untouched"
    );
    assert_eq!(hold(&dir, "b", "x").await.map(|(c, _)| c), Some(2));
    // Released to zero (or past it): the hold is gone; the hash stays for x.
    assert_eq!(dir.release_drain_target("b", "a", 5).await.unwrap(), 0);
    assert_eq!(raw_hold(&dir, "b", "a").await, None);
    assert_eq!(hold(&dir, "b", "x").await.map(|(c, _)| c), Some(2));
    // A missing hold stays missing; an expired one is not revived.
    assert_eq!(dir.release_drain_target("b", "a", 1).await.unwrap(), 0);
    assert_eq!(raw_hold(&dir, "b", "a").await, None);
    reserve(&dir, "s", 2, SHORT).await;
    let (_, s_expiry) = hold(&dir, "b", "s").await.unwrap();
    server_clock_past(&dir, s_expiry).await;
    assert_eq!(dir.release_drain_target("b", "s", 1).await.unwrap(), 0);
    assert_eq!(raw_hold(&dir, "b", "s").await, None);
    assert!(dir.release_drain_target("", "a", 1).await.is_err());
}

#[tokio::test]
async fn retire_reports_whether_the_hold_was_already_gone() {
    let (_r, dir) = setup().await;
    live(&dir, "b", 0, 100).await;
    live(&dir, "c", 0, 100).await;
    assert_eq!(reserve(&dir, "a", 5, LONG).await.shard.id, "b");
    assert_eq!(reserve(&dir, "x", 1, LONG).await.shard.id, "c");
    assert_eq!(reserve(&dir, "a", 5, SHORT).await.shard.id, "c");

    let (_, c_expiry) = hold(&dir, "c", "a").await.unwrap();
    server_clock_past(&dir, c_expiry).await;
    let retired = dir
        .retire_drain_targets("a", &["b".into(), "c".into(), "b".into()])
        .await
        .unwrap();
    assert_eq!(
        retired,
        [("b".to_string(), false), ("c".to_string(), true)],
        "b retired early; c had lapsed; duplicates answered once"
    );
    assert_eq!(raw_hold(&dir, "b", "a").await, None);
    assert_eq!(raw_hold(&dir, "c", "a").await, None);
    assert_eq!(
        dir.drain_reservations("c").await.unwrap().len(),
        1,
        "other drainers' holds stay"
    );

    // Retired again, or never held: gone.
    assert_eq!(
        dir.retire_drain_targets("a", &["b".into()]).await.unwrap(),
        [("b".to_string(), true)]
    );
    assert!(dir.retire_drain_targets("a", &[]).await.unwrap().is_empty());
}

#[tokio::test]
async fn admits_over_the_ceiling_only_when_every_peer_is_reservation_full() {
    let (_r, dir) = setup().await;
    live(&dir, "b", 0, 10).await;
    let c = live(&dir, "c", 0, 10).await;
    assert!(!reserve(&dir, "a1", 10, LONG).await.over_ceiling);
    assert!(!reserve(&dir, "a2", 10, LONG).await.over_ceiling);

    // Both full: still placed rather than stalled, on the tie-break (b).
    let over = reserve(&dir, "a3", 5, LONG).await;
    assert_eq!(
        (
            over.shard.id.as_str(),
            over.over_ceiling,
            over.reserved_total
        ),
        ("b", true, 15)
    );
    // Neither fits 5, but c (headroom 0) is less overloaded than b (-5).
    let least = reserve(&dir, "a4", 5, LONG).await;
    assert_eq!((least.shard.id.as_str(), least.over_ceiling), ("c", true));

    // c grows; with room on one peer, that peer is chosen within the ceiling.
    let c = ShardInfo { capacity: 40, ..c };
    dir.heartbeat(&c, LONG).await.unwrap();
    let fits = reserve(&dir, "a5", 5, LONG).await;
    assert_eq!(
        fits,
        DrainTarget {
            shard: c,
            over_ceiling: false,
            reserved_total: 20,
        }
    );
}

#[tokio::test]
async fn concurrent_drainers_spread_over_the_peers() {
    let (r, dir) = setup().await;
    live(&dir, "p1", 40, 100).await;
    live(&dir, "p2", 0, 100).await;
    const ZONES: usize = 10;
    const PLAYERS_PER_ZONE: u64 = 5;

    let mut drains = Vec::new();
    for drainer in ["d1", "d2"] {
        // A connection per drainer, as separate shards would have.
        let dir = Directory::connect(&r.url_with_password()).await.unwrap();
        drains.push(tokio::spawn(async move {
            let mut picks = Vec::new();
            for _ in 0..ZONES {
                picks.push(reserve(&dir, drainer, PLAYERS_PER_ZONE, LONG).await);
            }
            picks
        }));
    }
    for drain in drains {
        for pick in drain.await.unwrap() {
            assert!(!pick.over_ceiling, "room for everyone: {pick:?}");
        }
    }

    let mut per_target = Vec::new();
    let mut per_drainer = std::collections::HashMap::<String, u64>::new();
    for target in ["p1", "p2"] {
        let holds = dir.drain_reservations(target).await.unwrap();
        let sum: u64 = holds.iter().map(|(_, count, _)| count).sum();
        for (drainer, count, _) in holds {
            *per_drainer.entry(drainer).or_default() += count;
        }
        per_target.push(sum);
    }
    assert_eq!(
        per_drainer,
        [("d1".to_string(), 50), ("d2".to_string(), 50)].into(),
        "every reserve is held exactly once"
    );
    // Headroom 60 vs 100: serialized max-headroom picks end level, 30 each.
    assert_eq!(per_target, [30, 70]);
}

#[tokio::test]
async fn never_picks_draining_dead_excluded_or_itself() {
    let (_r, dir) = setup().await;
    live(&dir, "a", 0, 1000).await;
    dir.heartbeat(&peer("b", ShardState::Draining, 0, 1000), LONG)
        .await
        .unwrap();
    dir.heartbeat(&peer("c", ShardState::Live, 0, 1000), SHORT)
        .await
        .unwrap();
    let d = live(&dir, "d", 90, 100).await;
    eventually("c's presence to expire", || async {
        let exists: bool = redis::cmd("EXISTS")
            .arg(key_names::shard("c"))
            .query_async(&mut dir.conn())
            .await
            .unwrap();
        !exists
    })
    .await;

    let pick = reserve(&dir, "a", 50, LONG).await;
    assert_eq!(pick.shard, d, "the only live peer, though over its ceiling");
    assert!(pick.over_ceiling);
    assert_eq!(
        dir.reserve_drain_target("a", 1, LONG, &["d".into()])
            .await
            .unwrap(),
        None,
        "no live peer left"
    );
    assert!(dir.drain_reservations("b").await.unwrap().is_empty());
    assert!(dir.drain_reservations("c").await.unwrap().is_empty());
}

#[tokio::test]
async fn orphaned_zones_are_known_zones_without_a_live_lease() {
    let (_r, dir) = setup().await;
    assert!(dir.orphaned_zones().await.unwrap().is_empty());
    dir.register_zones(&["forest".into(), "city".into(), "moor".into()])
        .await
        .unwrap();
    dir.claim_zone("forest", "a", LONG).await.unwrap();
    dir.claim_zone("city", "b", SHORT).await.unwrap();
    assert_eq!(dir.orphaned_zones().await.unwrap(), ["moor"]);
    eventually("city's lease to expire", || async {
        dir.zone_owner("city").await.unwrap().is_none()
    })
    .await;
    assert_eq!(dir.orphaned_zones().await.unwrap(), ["city", "moor"]);
}

#[tokio::test]
async fn bad_requests_are_refused_and_foreign_data_is_corrupt() {
    let (_r, dir) = setup().await;
    live(&dir, "b", 0, 100).await;
    for err in [
        dir.reserve_drain_target("", 1, LONG, &[])
            .await
            .unwrap_err(),
        dir.reserve_drain_target("a", 1, Duration::ZERO, &[])
            .await
            .unwrap_err(),
        dir.reserve_drain_target("a", u64::MAX, LONG, &[])
            .await
            .unwrap_err(),
        dir.expire_drain_target_soon("b", "a", Duration::ZERO)
            .await
            .unwrap_err(),
        dir.retire_drain_targets("a", &["".into()])
            .await
            .unwrap_err(),
    ] {
        assert!(err.is_refused(), "{err}");
    }

    redis::cmd("HSET")
        .arg(key_names::drain_reserve("b"))
        .arg("a")
        .arg("junk")
        .exec_async(&mut dir.conn())
        .await
        .unwrap();
    match dir.reserve_drain_target("x", 1, LONG, &[]).await {
        Err(DirectoryError::Corrupt { key, reason }) => {
            assert_eq!(key, key_names::drain_reserve("b"));
            assert!(reason.contains("junk"), "{reason}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

/// Placement of orphaned zones asks the drain selector's own rule, read
/// only: the same peer a reserve would choose (reservations counted),
/// nothing reserved, excluded ids never chosen, no live peer none.
#[tokio::test]
async fn the_pick_is_the_selectors_choice_and_reserves_nothing() {
    let (_redis, dir) = setup().await;
    assert_eq!(dir.pick_drain_target(&[]).await.unwrap(), None);
    live(&dir, "a", 10, 100).await;
    live(&dir, "b", 20, 100).await;
    dir.heartbeat(&peer("c", ShardState::Draining, 0, 100), LONG)
        .await
        .unwrap();
    // Most headroom: a (90), not the draining c.
    assert_eq!(
        dir.pick_drain_target(&[]).await.unwrap().as_deref(),
        Some("a")
    );
    assert_eq!(hold(&dir, "a", "x").await, None);
    assert!(dir.drain_reservations("a").await.unwrap().is_empty());
    // A reservation counts: 25 held on a leaves it 65, below b's 80.
    let t = dir
        .reserve_drain_target("x", 25, LONG, &["b".to_string()])
        .await
        .unwrap();
    assert_eq!(t.map(|t| t.shard.id).as_deref(), Some("a"));
    assert_eq!(
        dir.pick_drain_target(&[]).await.unwrap().as_deref(),
        Some("b")
    );
    let reserved = reserve(&dir, "y", 1, LONG).await;
    assert_eq!(reserved.shard.id, "b", "reserve and pick disagree");
    // Excluded (another handoff version): never chosen.
    assert_eq!(
        dir.pick_drain_target(&["b".to_string()])
            .await
            .unwrap()
            .as_deref(),
        Some("a")
    );
}
