//! The event stream against a real, private redis-server (under the
//! documented ACL): each script that moves a zone writes its move with its
//! cause in the same step, and a clean exit writes its `shard_left`.

use std::time::Duration;

use super::events::{Cause, ClusterEvent};
use super::tests::setup;
use super::*;

const LONG: Duration = Duration::from_secs(30);

fn live(id: &str) -> ShardInfo {
    ShardInfo {
        id: id.into(),
        addr: format!("{id}:1"),
        state: ShardState::Live,
        players: 0,
        capacity: 10,
        handoff_version: 1,
        incarnation: 0,
    }
}

async fn kinds(dir: &Directory) -> Vec<(String, Option<String>)> {
    let events = dir.recent_events(100).await.unwrap();
    events.into_iter().map(|e| (e.kind, e.cause)).collect()
}

fn kind(k: &str, cause: Option<&str>) -> (String, Option<String>) {
    (k.into(), cause.map(str::to_string))
}

/// `forest` claimed by shard a, flipped to b by a drain, and moved back by
/// an operator's transfer: the completion's answer.
async fn claim_flip_and_transfer_back(dir: &Directory) -> transfer::Completion {
    dir.register_zones(&["forest".into()]).await.unwrap();
    for s in ["a", "b"] {
        dir.heartbeat(&live(s), LONG).await.unwrap();
    }
    let Claim::Acquired { r#gen } = dir.claim_zone("forest", "a", LONG).await.unwrap() else {
        panic!("a free zone is claimed");
    };
    // A drain's flip, then an operator's transfer back.
    let flipped = dir
        .flip_zone("forest", "a", r#gen, ("b", Cause::Drain), LONG)
        .await
        .unwrap()
        .expect("flipped");
    dir.propose_operator_transfer("forest", "a")
        .await
        .unwrap()
        .expect("proposed");
    assert!(dir.release_zone("forest", "b", flipped).await.unwrap());
    dir.complete_transfer("forest", "b", flipped, LONG)
        .await
        .unwrap()
}

#[tokio::test]
async fn every_move_is_on_the_stream_with_its_cause() {
    let (_r, dir) = setup().await;
    let done = claim_flip_and_transfer_back(&dir).await;
    assert!(matches!(done, transfer::Completion::Completed { .. }));
    assert_eq!(
        kinds(&dir).await,
        [
            kind("zone_claimed", Some("claim")),
            kind("zone_moved", Some("drain")),
            kind("transfer_proposed", Some("operator")),
            kind("zone_moved", Some("operator")),
        ]
    );
    let last = dir.recent_events(1).await.unwrap().remove(0);
    assert_eq!(
        (last.from.as_deref(), last.to.as_deref()),
        (Some("b"), Some("a"))
    );
    assert!(last.pending_ms.is_some(), "{last:?}");
    // Paged reads pick up exactly after an id.
    let all = dir.recent_events(100).await.unwrap();
    let after = dir.events_after(&all[1].id, 100).await.unwrap();
    assert_eq!(after, all[2..].to_vec());
}

#[tokio::test]
async fn a_start_and_a_clean_exit_are_events_of_their_process() {
    let (_r, dir) = setup().await;
    let inc = dir.mint_incarnation("a").await.unwrap();
    let dir = dir.for_incarnation(inc);
    dir.announce_start("a", "a:1", "9.9.9").await.unwrap();
    dir.heartbeat(&live("a"), LONG).await.unwrap();
    assert_eq!(
        dir.shard_versions(&["a".into(), "z".into()]).await.unwrap(),
        [Some("9.9.9".to_string()), None]
    );
    dir.deregister("a").await.unwrap();
    let events = dir.recent_events(10).await.unwrap();
    let expect = [
        ClusterEvent::joined("a", "a:1", "9.9.9", inc),
        ClusterEvent::shard("shard_left", "a", inc),
    ];
    let got: Vec<ClusterEvent> = events
        .into_iter()
        .map(|e| ClusterEvent {
            id: String::new(),
            ..e
        })
        .collect();
    assert_eq!(got, expect);
}

/// An event Redis refuses (here `telos:events` is not a stream, as it is
/// refused under an ACL from before the stream) never fails the script
/// that records it: scripts cannot undo their writes, so a failed `XADD`
/// after the lease changed left a claim reported failed but made, and a
/// transfer moved but never completed.
#[tokio::test]
async fn a_refused_event_never_fails_the_move_it_records() {
    let (_r, url) = crate::acl::test_server();
    let dir = Directory::connect(&url).await.expect("connect");
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let () = redis::cmd("SET")
        .arg(key_names::events())
        .arg("not a stream")
        .query_async(&mut c)
        .await
        .unwrap();
    let done = claim_flip_and_transfer_back(&dir).await;
    assert!(
        matches!(done, transfer::Completion::Completed { .. }),
        "{done:?}"
    );
    assert_eq!(
        dir.transfer("forest").await.unwrap(),
        None,
        "no transfer left pending"
    );
}
