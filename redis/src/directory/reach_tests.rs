//! The reachability rule against a real Redis under the documented ACL:
//! one report never cuts a shard off, reports for the bound do (renew and
//! claim refused, the entry published as `cut_off`), and an answer — the
//! gate taking its mark back — ends it.

use std::time::Duration;

use super::reach::REACH_BOUND;
use super::tests::setup;
use super::*;

const TTL: Duration = Duration::from_secs(30);

fn entry(state: ShardState) -> ShardInfo {
    ShardInfo {
        id: "shard-a".into(),
        addr: "127.0.0.1:7001".into(),
        state,
        players: 0,
        capacity: 100,
        handoff_version: 2,
        incarnation: 0,
    }
}

async fn state_of(dir: &Directory) -> ShardState {
    dir.shards().await.expect("registry")[0].state
}

#[tokio::test]
async fn a_gate_reporting_a_shard_for_the_bound_cuts_it_off_until_it_answers() {
    let (_server, dir) = setup().await;
    let live = entry(ShardState::Live);
    let Claim::Acquired { r#gen } = dir.claim_zone("city", "shard-a", TTL).await.unwrap() else {
        panic!("a free zone is claimed");
    };

    // One report: nothing yet, however long ago it was made.
    dir.mark_unreachable("shard-a", "gate-1").await.unwrap();
    tokio::time::sleep(REACH_BOUND + Duration::from_millis(200)).await;
    assert!(dir.renew_zone("city", "shard-a", r#gen, TTL).await.unwrap());
    assert_eq!(
        dir.heartbeat_with_zones(&live, &[], TTL).await.unwrap(),
        Reach::Reached
    );

    // Reported again past the bound: cut off.
    let held = dir.mark_unreachable("shard-a", "gate-1").await.unwrap();
    assert!(held >= REACH_BOUND, "{held:?}");
    assert!(!dir.renew_zone("city", "shard-a", r#gen, TTL).await.unwrap());
    assert_eq!(
        dir.heartbeat_with_zones(&live, &[], TTL).await.unwrap(),
        Reach::CutOff
    );
    assert_eq!(state_of(&dir).await, ShardState::CutOff);
    dir.release_zone("city", "shard-a", r#gen).await.unwrap();
    let claim = dir.claim_zone("city", "shard-a", TTL).await.unwrap();
    assert!(
        matches!(claim, Claim::Held { ref owner, .. } if owner.is_empty()),
        "{claim:?}"
    );
    // Another shard is not concerned.
    assert!(matches!(
        dir.claim_zone("city", "shard-b", TTL).await.unwrap(),
        Claim::Acquired { .. }
    ));

    // The gate reaches it again: live, and it may claim.
    dir.clear_unreachable("shard-a", "gate-1").await.unwrap();
    assert_eq!(
        dir.heartbeat_with_zones(&live, &[], TTL).await.unwrap(),
        Reach::Reached
    );
    assert_eq!(state_of(&dir).await, ShardState::Live);
    assert!(matches!(
        dir.claim_zone("forest", "shard-a", TTL).await.unwrap(),
        Claim::Acquired { .. }
    ));
}

#[tokio::test]
async fn a_draining_shard_cut_off_stays_draining_in_the_registry() {
    let (_server, dir) = setup().await;
    dir.mark_unreachable("shard-a", "gate-1").await.unwrap();
    tokio::time::sleep(REACH_BOUND + Duration::from_millis(100)).await;
    dir.mark_unreachable("shard-a", "gate-1").await.unwrap();
    let draining = entry(ShardState::Draining);
    assert_eq!(
        dir.heartbeat_with_zones(&draining, &[], TTL).await.unwrap(),
        Reach::CutOff
    );
    assert_eq!(state_of(&dir).await, ShardState::Draining);
}

/// A field left behind (a lost reply, a shard that left the registry while
/// marked) never lengthens a later run: a report after the last one went
/// stale starts a new run, and one report alone cuts nobody off.
#[tokio::test]
async fn a_stale_report_starts_a_new_run() {
    let (_server, dir) = setup().await;
    dir.mark_unreachable("shard-a", "gate-1").await.unwrap();
    tokio::time::sleep(super::reach::REACH_STALE + Duration::from_millis(300)).await;
    let held = dir.mark_unreachable("shard-a", "gate-1").await.unwrap();
    assert!(held < Duration::from_millis(100), "{held:?}");
    let live = entry(ShardState::Live);
    assert_eq!(
        dir.heartbeat_with_zones(&live, &[], TTL).await.unwrap(),
        Reach::Reached
    );
}
