//! One lease lifecycle against a real, private redis-server: claim, hold
//! (renew, release when the zone stops), confirm by observing a flip.

use std::time::Duration;

use telos_redis::directory::Directory;
use telos_testkit::RedisServer;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{Confirm, LeaseKeeper};
use crate::zone::lease::LeaseState;

const TTL: Duration = Duration::from_secs(6);
/// Bounds every wait here (a hang, not a performance claim).
const WAIT: Duration = Duration::from_secs(10);

async fn owner_becomes(dir: &Directory, zone: &str, want: Option<&str>) {
    let until = Instant::now() + WAIT;
    loop {
        let owner = dir.zone_owner(zone).await.unwrap().map(|(o, _)| o);
        if owner.as_deref() == want {
            return;
        }
        assert!(
            Instant::now() < until,
            "{zone}'s owner stayed {owner:?}, not {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claim_flip_confirm_and_release_run_through_one_keeper() {
    let redis = RedisServer::start().unwrap();
    let dir = Directory::connect(&redis.url).await.unwrap();
    let tracker = TaskTracker::new();
    let a = LeaseKeeper::new(dir.clone(), "shard-a", TTL, tracker.clone());
    let b = LeaseKeeper::new(dir.clone(), "shard-b", TTL, tracker.clone());

    // Claim: one winner; the other sees the lease held.
    let lease_a = a.claim("city").await.unwrap().expect("a free lease");
    assert!(b.claim("city").await.unwrap().is_none());
    let stop_a = CancellationToken::new();
    a.hold("city", &lease_a, &stop_a);
    assert_eq!(
        a.held("city").map(|h| h.state.generation()),
        Some(lease_a.generation())
    );

    // Confirm: b built the zone ahead of its lease and observes the flip.
    let lease_b = LeaseState::unconfirmed(TTL);
    let stop_b = CancellationToken::new();
    let confirming = {
        let (b_lease, b_stop) = (lease_b.clone(), stop_b.clone());
        async move {
            b.confirm(
                "city",
                &b_lease,
                Confirm::Flip,
                &b_stop,
                || true,
                |_| async { true },
                Instant::now() + WAIT,
            )
            .await
            .then_some(b)
        }
    };
    let confirming = tokio::spawn(confirming);
    let held = a.held("city").unwrap();
    held.renew_stop.cancel();
    let flipped = dir
        .flip_zone(
            "city",
            "shard-a",
            lease_a.generation(),
            ("shard-b", telos_redis::directory::events::Cause::Drain),
            TTL,
        )
        .await
        .unwrap()
        .expect("the flip lands");
    a.forget("city");
    let b = confirming.await.unwrap().expect("the flip was observed");
    assert!(lease_b.is_confirmed() && lease_b.is_valid());
    assert_eq!(lease_b.generation(), flipped);
    assert_eq!(b.held("city").map(|h| h.state.generation()), Some(flipped));
    owner_becomes(&dir, "city", Some("shard-b")).await;

    // Release: a's zone stopping after the hand-over gives nothing back
    // (the lease moved on); b's stopping releases it.
    stop_a.cancel();
    tokio::time::sleep(Duration::from_millis(100)).await;
    owner_becomes(&dir, "city", Some("shard-b")).await;
    stop_b.cancel();
    owner_becomes(&dir, "city", None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirm_stops_for_a_stopped_zone_and_gives_up_at_its_deadline() {
    let redis = RedisServer::start().unwrap();
    let dir = Directory::connect(&redis.url).await.unwrap();
    let tracker = TaskTracker::new();
    let a = LeaseKeeper::new(dir.clone(), "shard-a", TTL, tracker.clone());
    let b = LeaseKeeper::new(dir.clone(), "shard-b", TTL, tracker.clone());
    let _held = a.claim("docks").await.unwrap().expect("a free lease");
    let lease = LeaseState::unconfirmed(TTL);
    let stop = CancellationToken::new();
    // Never flipped: false at the deadline, nothing held.
    let deadline = Instant::now() + Duration::from_millis(300);
    assert!(
        !b.confirm(
            "docks",
            &lease,
            Confirm::Flip,
            &stop,
            || true,
            |_| async { true },
            deadline
        )
        .await
    );
    assert!(!lease.is_confirmed() && b.held("docks").is_none());
    // The zone stopped: false at once, whatever the deadline.
    let far = Instant::now() + WAIT;
    let t0 = Instant::now();
    assert!(
        !b.confirm(
            "docks",
            &lease,
            Confirm::Completion,
            &stop,
            || false,
            |_| async { true },
            far
        )
        .await
    );
    assert!(t0.elapsed() < Duration::from_secs(1));
}
