//! Directory against a real, private redis-server.

use std::future::Future;
use std::time::Duration;

use telos_testkit::RedisServer;

use super::events::Cause;
use super::*;

/// Long enough that nothing expires while a test is looking at it.
const LONG: Duration = Duration::from_secs(30);
/// Short enough to watch expire within a test.
const SHORT: Duration = Duration::from_millis(300);
/// Upper bound on waiting for a server-side expiry to be observed.
const EXPIRY_WAIT: Duration = Duration::from_secs(5);

pub(super) async fn setup() -> (RedisServer, Directory) {
    // Under exactly the documented ACL (see `crate::acl`).
    let (server, url) = crate::acl::test_server();
    let dir = Directory::connect(&url).await.expect("connect");
    (server, dir)
}

/// Polls `check` until it holds (server-side TTLs run on Redis's clock, so
/// the test waits on what Redis reports rather than sleeping a guess).
pub(super) async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + EXPIRY_WAIT;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn shard(id: &str, state: ShardState) -> ShardInfo {
    ShardInfo {
        id: id.into(),
        addr: format!("127.0.0.1:7{}", id.len()),
        state,
        players: 3,
        capacity: 100,
        handoff_version: 2,
        incarnation: 0,
    }
}

async fn pttl(dir: &Directory, key: &str) -> i64 {
    redis::cmd("PTTL")
        .arg(key)
        .query_async(&mut dir.conn())
        .await
        .unwrap()
}

#[tokio::test]
async fn claim_renew_release() {
    let (_r, dir) = setup().await;
    assert_eq!(dir.zone_owner("forest").await.unwrap(), None);
    assert_eq!(
        dir.claim_zone("forest", "a", LONG).await.unwrap(),
        Claim::Acquired { r#gen: 1 }
    );
    // Claiming again while ours refreshes at the same generation.
    assert_eq!(
        dir.claim_zone("forest", "a", LONG).await.unwrap(),
        Claim::Acquired { r#gen: 1 }
    );
    assert_eq!(
        dir.claim_zone("forest", "b", LONG).await.unwrap(),
        Claim::Held {
            owner: "a".into(),
            r#gen: 1
        }
    );
    assert_eq!(
        dir.zone_owner("forest").await.unwrap(),
        Some(("a".into(), 1))
    );
    assert!(dir.renew_zone("forest", "a", 1, LONG).await.unwrap());
    assert!(!dir.renew_zone("forest", "b", 1, LONG).await.unwrap());
    assert!(!dir.renew_zone("forest", "a", 2, LONG).await.unwrap());
    assert!(!dir.release_zone("forest", "b", 1).await.unwrap());
    assert!(!dir.release_zone("forest", "a", 0).await.unwrap());
    assert!(dir.release_zone("forest", "a", 1).await.unwrap());
    assert_eq!(dir.zone_owner("forest").await.unwrap(), None);
    // Released, the next claim still gets a higher generation.
    assert_eq!(
        dir.claim_zone("forest", "b", LONG).await.unwrap(),
        Claim::Acquired { r#gen: 2 }
    );
}

#[tokio::test]
async fn expiry_refuses_late_renewal_and_generations_never_go_back() {
    let (_r, dir) = setup().await;
    assert_eq!(
        dir.claim_zone("city", "a", SHORT).await.unwrap(),
        Claim::Acquired { r#gen: 1 }
    );
    let ttl = pttl(&dir, &key_names::zone_lease("city")).await;
    assert!(ttl > 0 && ttl <= 300, "lease TTL {ttl}");
    assert_eq!(
        pttl(&dir, &key_names::zone_gen("city")).await,
        -1,
        "gen counter must not expire"
    );

    eventually("lease expiry", || async {
        dir.zone_owner("city").await.unwrap().is_none()
    })
    .await;
    assert!(
        !dir.renew_zone("city", "a", 1, LONG).await.unwrap(),
        "late renewal must lose"
    );
    assert_eq!(
        dir.zone_owner("city").await.unwrap(),
        None,
        "late renewal revived the lease"
    );

    assert_eq!(
        dir.claim_zone("city", "b", LONG).await.unwrap(),
        Claim::Acquired { r#gen: 2 }
    );
    assert!(!dir.renew_zone("city", "a", 1, LONG).await.unwrap());
    assert!(!dir.release_zone("city", "a", 1).await.unwrap());
    assert_eq!(dir.zone_owner("city").await.unwrap(), Some(("b".into(), 2)));

    // Same owner re-claiming after its own expiry also moves forward.
    assert!(dir.renew_zone("city", "b", 2, SHORT).await.unwrap());
    eventually("lease expiry", || async {
        dir.zone_owner("city").await.unwrap().is_none()
    })
    .await;
    assert_eq!(
        dir.claim_zone("city", "b", LONG).await.unwrap(),
        Claim::Acquired { r#gen: 3 }
    );
}

#[tokio::test]
async fn fenced_flip() {
    let (_r, dir) = setup().await;
    assert_eq!(
        dir.flip_zone("moor", "a", 1, ("b", Cause::Drain), LONG)
            .await
            .unwrap(),
        None,
        "free zone"
    );
    let Claim::Acquired { r#gen: g } = dir.claim_zone("moor", "a", SHORT).await.unwrap() else {
        panic!("claim");
    };
    assert_eq!(
        dir.flip_zone("moor", "c", g, ("b", Cause::Drain), LONG)
            .await
            .unwrap(),
        None,
        "wrong from"
    );
    assert_eq!(
        dir.flip_zone("moor", "a", g + 1, ("b", Cause::Drain), LONG)
            .await
            .unwrap(),
        None,
        "wrong gen"
    );
    assert_eq!(dir.zone_owner("moor").await.unwrap(), Some(("a".into(), g)));

    let new = dir
        .flip_zone("moor", "a", g, ("b", Cause::Drain), LONG)
        .await
        .unwrap();
    assert_eq!(new, Some(g + 1));
    assert_eq!(
        dir.zone_owner("moor").await.unwrap(),
        Some(("b".into(), g + 1))
    );
    let ttl = pttl(&dir, &key_names::zone_lease("moor")).await;
    assert!(
        ttl > SHORT.as_millis() as i64,
        "flip must set the fresh TTL, got {ttl}"
    );
    // The old owner is fenced out of every operation at its old generation.
    assert!(!dir.renew_zone("moor", "a", g, LONG).await.unwrap());
    assert!(!dir.release_zone("moor", "a", g).await.unwrap());
    assert_eq!(
        dir.flip_zone("moor", "a", g, ("c", Cause::Drain), LONG)
            .await
            .unwrap(),
        None,
        "replayed flip"
    );
    assert!(dir.renew_zone("moor", "b", g + 1, LONG).await.unwrap());
}

/// A flip from the owner to itself is no hand-over: it would re-mint the
/// lease under a generation the owner does not renew. Refused, unchanged.
#[tokio::test]
async fn a_flip_to_the_owner_itself_is_refused() {
    let (_r, dir) = setup().await;
    let Claim::Acquired { r#gen: g } = dir.claim_zone("moor", "a", LONG).await.unwrap() else {
        panic!("claim");
    };
    let err = dir
        .flip_zone("moor", "a", g, ("a", Cause::Drain), LONG)
        .await
        .unwrap_err();
    assert!(matches!(err, DirectoryError::Invalid(_)), "{err:?}");
    assert_eq!(dir.zone_owner("moor").await.unwrap(), Some(("a".into(), g)));
}

#[tokio::test]
async fn flip_after_expiry_is_refused() {
    let (_r, dir) = setup().await;
    assert_eq!(
        dir.claim_zone("moor", "a", SHORT).await.unwrap(),
        Claim::Acquired { r#gen: 1 }
    );
    eventually("lease expiry", || async {
        dir.zone_owner("moor").await.unwrap().is_none()
    })
    .await;
    assert_eq!(
        dir.flip_zone("moor", "a", 1, ("b", Cause::Drain), LONG)
            .await
            .unwrap(),
        None
    );
}

#[tokio::test]
async fn racing_claims_have_exactly_one_winner() {
    let (r, _) = setup().await;
    const CLAIMS_PER_SHARD: usize = 50;
    let mut tasks = Vec::new();
    for shard in ["a", "b", "c"] {
        // Separate connections per shard, as separate processes would have.
        let dir = Directory::connect(&r.url_with_password()).await.unwrap();
        for _ in 0..CLAIMS_PER_SHARD {
            let dir = dir.clone();
            tasks.push(tokio::spawn(async move {
                (shard, dir.claim_zone("arena", shard, LONG).await.unwrap())
            }));
        }
    }
    let mut winners = std::collections::HashSet::new();
    for task in tasks {
        let (shard, claim) = task.await.unwrap();
        match claim {
            Claim::Acquired { r#gen } => {
                assert_eq!(r#gen, 1);
                winners.insert(shard);
            }
            Claim::Held { r#gen, .. } => assert_eq!(r#gen, 1),
        }
    }
    assert_eq!(winners.len(), 1, "winners: {winners:?}");
}

#[tokio::test]
async fn instance_zones_take_no_lease() {
    let (_r, dir) = setup().await;
    let err = dir.shard_for_zone("crypt#7").await.unwrap_err();
    assert!(matches!(err, DirectoryError::InstanceZone(_)) && err.is_refused());
    assert!(matches!(
        dir.claim_zone("crypt#7", "a", LONG).await,
        Err(DirectoryError::InstanceZone(_))
    ));
    assert!(matches!(
        dir.flip_zone("crypt#7", "a", 1, ("b", Cause::Drain), LONG)
            .await,
        Err(DirectoryError::InstanceZone(_))
    ));
    assert!(matches!(
        dir.claim_zone("crypt", "a", Duration::ZERO).await,
        Err(DirectoryError::Invalid(_))
    ));
}

#[tokio::test]
async fn heartbeat_registry_and_expiry() {
    let (_r, dir) = setup().await;
    let a = shard("a", ShardState::Live);
    let mut b = shard("b", ShardState::Live);
    dir.heartbeat(&a, LONG).await.unwrap();
    dir.heartbeat(&b, SHORT).await.unwrap();
    assert_eq!(dir.shards().await.unwrap(), vec![a.clone(), b.clone()]);

    b.state = ShardState::Draining;
    b.players = 9;
    dir.heartbeat(&b, SHORT).await.unwrap();
    assert_eq!(dir.shards().await.unwrap()[1], b);

    eventually("b's presence to expire", || async {
        dir.shards().await.unwrap() == vec![a.clone()]
    })
    .await;
    let members: Vec<String> = redis::cmd("SMEMBERS")
        .arg(key_names::shards())
        .query_async(&mut dir.conn())
        .await
        .unwrap();
    assert_eq!(members, vec!["a".to_string()], "dead id pruned");

    dir.deregister("a").await.unwrap();
    assert!(dir.shards().await.unwrap().is_empty());
}

#[tokio::test]
async fn shard_state_serde_and_display() {
    assert_eq!(ShardState::Draining.to_string(), "draining");
    assert_eq!(
        serde_json::to_string(&ShardState::Live).unwrap(),
        "\"live\""
    );
    let z = ZoneStatus {
        id: "x".into(),
        owner: None,
        r#gen: 4,
        players: 0,
    };
    assert!(serde_json::to_string(&z).unwrap().contains("\"gen\":4"));
}

#[tokio::test]
async fn shard_for_zone_joins_lease_and_registry() {
    let (_r, dir) = setup().await;
    assert_eq!(
        dir.shard_for_zone("forest").await.unwrap(),
        None,
        "no owner"
    );
    let Claim::Acquired { r#gen: g } = dir.claim_zone("forest", "a", LONG).await.unwrap() else {
        panic!("claim");
    };
    assert_eq!(
        dir.shard_for_zone("forest").await.unwrap(),
        None,
        "owner not live"
    );

    let a = shard("a", ShardState::Draining);
    let b = shard("bb", ShardState::Live);
    dir.heartbeat(&a, LONG).await.unwrap();
    dir.heartbeat(&b, SHORT).await.unwrap();
    // A draining owner still owns its zones until it flips them.
    assert_eq!(dir.shard_for_zone("forest").await.unwrap(), Some(a));

    dir.flip_zone("forest", "a", g, ("bb", Cause::Drain), LONG)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(dir.shard_for_zone("forest").await.unwrap(), Some(b));
    eventually("bb's presence to expire", || async {
        dir.shard_for_zone("forest").await.unwrap().is_none()
    })
    .await;
}

#[tokio::test]
async fn zones_report_owner_gen_and_players() {
    let (_r, dir) = setup().await;
    dir.register_zones(&["forest".into(), "city".into(), "moor".into()])
        .await
        .unwrap();
    dir.heartbeat_with_zones(&shard("a", ShardState::Live), &[("forest".into(), 4)], LONG)
        .await
        .unwrap();
    // Mid hand-over both shards host players of the zone: they add up.
    dir.heartbeat_with_zones(
        &shard("b", ShardState::Live),
        &[("forest".into(), 1), ("city".into(), 2)],
        LONG,
    )
    .await
    .unwrap();
    // A dead shard's report does not count: it goes with its entry.
    dir.heartbeat_with_zones(
        &shard("ghost", ShardState::Live),
        &[("forest".into(), 100)],
        SHORT,
    )
    .await
    .unwrap();
    dir.claim_zone("forest", "a", LONG).await.unwrap();
    dir.claim_zone("city", "b", SHORT).await.unwrap();

    eventually("ghost's entry to expire", || async {
        dir.shards().await.unwrap().iter().all(|s| s.id != "ghost")
    })
    .await;
    eventually("city's lease to expire", || async {
        dir.zone_owner("city").await.unwrap().is_none()
    })
    .await;
    let zones = dir.zones().await.unwrap();
    let expect = vec![
        ZoneStatus {
            id: "city".into(),
            owner: None,
            r#gen: 1,
            players: 2,
        },
        ZoneStatus {
            id: "forest".into(),
            owner: Some("a".into()),
            r#gen: 1,
            players: 5,
        },
        ZoneStatus {
            id: "moor".into(),
            owner: None,
            r#gen: 0,
            players: 0,
        },
    ];
    assert_eq!(zones, expect);
}

/// A zone's count lives in its shard's registry entry and nowhere else: a
/// heartbeat that no longer lists the zone, a clean deregistration and a
/// restarted shard's first heartbeat each leave nothing of the old count.
#[tokio::test]
async fn zone_counts_never_outlive_the_entry_that_published_them() {
    let (_r, dir) = setup().await;
    dir.register_zones(&["city".into(), "hills".into()])
        .await
        .unwrap();
    let players = |zones: Vec<ZoneStatus>| -> Vec<(String, u64)> {
        zones.into_iter().map(|z| (z.id, z.players)).collect()
    };
    let a = shard("a", ShardState::Live);
    dir.heartbeat_with_zones(&a, &[("city".into(), 10)], LONG)
        .await
        .unwrap();
    assert_eq!(
        players(dir.zones().await.unwrap()),
        [("city".into(), 10), ("hills".into(), 0)]
    );
    // The city moved away: the next entry does not list it.
    dir.heartbeat_with_zones(&a, &[("hills".into(), 3)], LONG)
        .await
        .unwrap();
    assert_eq!(
        players(dir.zones().await.unwrap()),
        [("city".into(), 0), ("hills".into(), 3)]
    );
    // Drained and restarted under the same id: nothing of the old entry.
    dir.deregister("a").await.unwrap();
    assert_eq!(
        players(dir.zones().await.unwrap()),
        [("city".into(), 0), ("hills".into(), 0)]
    );
    // A crashed predecessor's entry, then the restarted shard's first
    // heartbeat, which counts nobody yet.
    dir.heartbeat_with_zones(&a, &[("city".into(), 7)], LONG)
        .await
        .unwrap();
    dir.heartbeat(&a, LONG).await.unwrap();
    assert_eq!(
        players(dir.zones().await.unwrap()),
        [("city".into(), 0), ("hills".into(), 0)]
    );
}

fn player(name: &str, shard: &str) -> OnlinePlayer {
    OnlinePlayer {
        name: name.into(),
        tier: "player".into(),
        wizinvis: false,
        shard: shard.into(),
        zone: "forest".into(),
    }
}

#[tokio::test]
async fn online_merges_live_shards() {
    let (_r, dir) = setup().await;
    dir.heartbeat(&shard("a", ShardState::Live), LONG)
        .await
        .unwrap();
    dir.heartbeat(&shard("b", ShardState::Live), LONG)
        .await
        .unwrap();
    dir.publish_online("a", &[player("zed", "a"), player("Amy", "a")], LONG)
        .await
        .unwrap();
    dir.publish_online("b", &[player("bob", "b")], SHORT)
        .await
        .unwrap();
    // Not in the registry: never listed.
    dir.publish_online("ghost", &[player("casper", "ghost")], LONG)
        .await
        .unwrap();
    let names = |v: Vec<OnlinePlayer>| v.into_iter().map(|p| p.name).collect::<Vec<_>>();
    assert_eq!(names(dir.online().await.unwrap()), ["Amy", "bob", "zed"]);

    // Replacing a shard's list drops players who left.
    dir.publish_online("a", &[player("Amy", "a")], LONG)
        .await
        .unwrap();
    assert_eq!(names(dir.online().await.unwrap()), ["Amy", "bob"]);

    eventually("b's online list to expire", || async {
        dir.online().await.unwrap().len() == 1
    })
    .await;
    dir.deregister("a").await.unwrap();
    assert!(dir.online().await.unwrap().is_empty());
}
