//! One fencing token per process (issue 17, defect 2), against a real,
//! private redis-server: two processes of one shard id never hold a lease
//! at the same generation, and the older one is told it was superseded.

use std::time::Duration;

use super::tests::{eventually, setup};
use super::*;
use crate::directory::events::Cause;

const LONG: Duration = Duration::from_secs(30);
const SHORT: Duration = Duration::from_millis(300);

fn entry(addr: &str) -> ShardInfo {
    ShardInfo {
        id: "a".into(),
        addr: addr.into(),
        state: ShardState::Live,
        players: 0,
        capacity: 100,
        handoff_version: 2,
        incarnation: 0,
    }
}

#[tokio::test]
async fn a_restarted_process_never_takes_over_its_predecessors_live_lease() {
    let (_r, dir) = setup().await;
    let first = dir.for_incarnation(dir.mint_incarnation("a").await.unwrap());
    let second = dir.for_incarnation(dir.mint_incarnation("a").await.unwrap());
    assert!(second.incarnation() > first.incarnation());
    assert_eq!(
        first.claim_zone("city", "a", SHORT).await.unwrap(),
        Claim::Acquired { r#gen: 1 }
    );
    // The first process may only be paused: its live lease is not the
    // second's, neither to refresh at its generation nor to release.
    assert_eq!(
        second.claim_zone("city", "a", LONG).await.unwrap(),
        Claim::Held {
            owner: "a".into(),
            r#gen: 1
        }
    );
    assert!(!second.renew_zone("city", "a", 1, LONG).await.unwrap());
    assert!(!second.release_zone("city", "a", 1).await.unwrap());
    assert!(first.renew_zone("city", "a", 1, SHORT).await.unwrap());
    // Once it lapses, the second mints a generation of its own, and the
    // first — waking up — can neither renew nor re-claim over it.
    eventually("the first process's lease to lapse", || async {
        dir.zone_owner("city").await.unwrap().is_none()
    })
    .await;
    assert_eq!(
        second.claim_zone("city", "a", LONG).await.unwrap(),
        Claim::Acquired { r#gen: 2 }
    );
    assert!(!first.renew_zone("city", "a", 1, LONG).await.unwrap());
    assert!(!first.renew_zone("city", "a", 2, LONG).await.unwrap());
    assert_eq!(
        first.claim_zone("city", "a", LONG).await.unwrap(),
        Claim::Held {
            owner: "a".into(),
            r#gen: 2
        }
    );
    assert!(!first.release_zone("city", "a", 2).await.unwrap());
    assert!(second.renew_zone("city", "a", 2, LONG).await.unwrap());
}

#[tokio::test]
async fn a_flipped_or_completed_lease_binds_the_first_process_that_takes_it() {
    let (_r, dir) = setup().await;
    let a = dir.for_incarnation(dir.mint_incarnation("a").await.unwrap());
    let (b1, b2) = (
        dir.for_incarnation(dir.mint_incarnation("b").await.unwrap()),
        dir.for_incarnation(dir.mint_incarnation("b").await.unwrap()),
    );
    a.claim_zone("moor", "a", LONG).await.unwrap();
    let flipped = a
        .flip_zone("moor", "a", 1, ("b", Cause::Drain), LONG)
        .await
        .unwrap()
        .expect("the flip lands");
    // Bound to no process of b yet: the first to claim it (observing the
    // flip) binds it; the other process of b is refused from then on.
    assert_eq!(
        b2.claim_zone("moor", "b", LONG).await.unwrap(),
        Claim::Acquired { r#gen: flipped }
    );
    assert_eq!(
        b1.claim_zone("moor", "b", LONG).await.unwrap(),
        Claim::Held {
            owner: "b".into(),
            r#gen: flipped
        }
    );
    assert!(!b1.renew_zone("moor", "b", flipped, LONG).await.unwrap());
    // A renew binds too (a transfer's target renews, never claims).
    let again = b2
        .flip_zone("moor", "b", flipped, ("a", Cause::Drain), LONG)
        .await
        .unwrap()
        .expect("flipped back");
    assert!(a.renew_zone("moor", "a", again, LONG).await.unwrap());
    let a2 = dir.for_incarnation(dir.mint_incarnation("a").await.unwrap());
    assert!(!a2.renew_zone("moor", "a", again, LONG).await.unwrap());
}

#[tokio::test]
async fn an_older_process_is_superseded_and_removes_nothing() {
    let (_r, dir) = setup().await;
    let first = dir.for_incarnation(dir.mint_incarnation("a").await.unwrap());
    first
        .heartbeat(&entry("127.0.0.1:7001"), LONG)
        .await
        .expect("the first process publishes");
    let second = dir.for_incarnation(dir.mint_incarnation("a").await.unwrap());
    second
        .heartbeat(&entry("127.0.0.1:7002"), LONG)
        .await
        .expect("a newer process replaces the entry");
    // The first wakes up: its heartbeat is refused and changes nothing,
    // and its clean stop does not take its successor off the registry.
    let refused = first.heartbeat(&entry("127.0.0.1:7001"), LONG).await;
    assert!(
        matches!(refused, Err(DirectoryError::Superseded { .. })),
        "{refused:?}"
    );
    first.deregister("a").await.unwrap();
    let shards = dir.shards().await.unwrap();
    assert_eq!(shards.len(), 1);
    assert_eq!(shards[0].addr, "127.0.0.1:7002");
    // The entry says which process published it (the gate tells a
    // replacement at one address from its paused predecessor by it).
    assert_eq!(shards[0].incarnation, second.incarnation());
    second.deregister("a").await.unwrap();
    assert!(dir.shards().await.unwrap().is_empty());
}
