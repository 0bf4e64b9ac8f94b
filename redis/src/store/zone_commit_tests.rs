//! The zone commit's fences against a real, private redis-server, with
//! real leases and rows: it writes everything, or nothing.

use std::time::Duration;

use telos_testkit::RedisServer;

use super::*;
use crate::directory::{Claim, Directory};
use crate::store::ClaimedCharacter;

const TTL: Duration = Duration::from_secs(30);
const PHC: &str = "$argon2id$v=19$m=8,t=1,p=1$c2FsdHNhbHQ$aGFzaA";

struct Setup {
    _redis: RedisServer,
    store: Store,
    dir: Directory,
    generation: u64,
    holder: ClaimId,
    ada: ClaimedCharacter,
    bob: ClaimedCharacter,
}

async fn setup() -> Setup {
    let redis = RedisServer::start().expect("redis-server");
    let store = Store::connect(&redis.url).await.expect("connect");
    let dir = Directory::connect(&redis.url).await.expect("connect");
    let generation = match dir.claim_zone("city", "shard-a", TTL).await.unwrap() {
        Claim::Acquired { r#gen } => r#gen,
        other => panic!("claim: {other:?}"),
    };
    let holder = ClaimId::random();
    store
        .open_zone_state("city", "shard-a", generation, holder)
        .await
        .unwrap()
        .unwrap();
    for name in ["Ada", "Bob"] {
        store
            .create_character_hashed(name, PHC, b"{\"born\":true}")
            .await
            .unwrap();
    }
    let ada = store.claim_character("ada").await.unwrap();
    let bob = store.claim_character("bob").await.unwrap();
    Setup {
        _redis: redis,
        store,
        dir,
        generation,
        holder,
        ada,
        bob,
    }
}

impl Setup {
    fn fence(&self) -> ZoneFence<'static> {
        ZoneFence {
            zone: "city",
            shard: "shard-a",
            generation: self.generation,
            holder: self.holder,
            commits: None,
        }
    }

    async fn row_state(&self, name: &str) -> (Vec<u8>, u64, u64) {
        let row = self.store.load(name).await.unwrap().unwrap();
        (row.state_json, row.applied_seq, row.state_version)
    }
}

fn write<'a>(name: &'a str, who: &ClaimedCharacter, state: &'a [u8], seq: u64) -> RowWrite<'a> {
    RowWrite {
        name,
        fence: (who.epoch, who.row.state_version),
        state,
        conn_id: "conn-1",
        applied_seq: seq,
        quit: false,
    }
}

#[tokio::test]
async fn a_commit_writes_the_zone_and_every_row_together() {
    let s = setup().await;
    let batch = ZoneCommit {
        zone: Some(s.fence()),
        state: Some(b"floor: token"),
        parts: Vec::new(),
        rows: vec![
            write("ada", &s.ada, b"{\"carries\":[]}", 7),
            write("bob", &s.bob, b"{\"carries\":[1]}", 3),
        ],
    };
    let v = s.ada.row.state_version;
    assert_eq!(
        s.store.commit_zone(&batch).await.unwrap(),
        CommitOutcome::Committed {
            versions: vec![v + 1, s.bob.row.state_version + 1]
        }
    );
    assert_eq!(
        s.store.zone_state("city").await.unwrap().as_deref(),
        Some(&b"floor: token"[..])
    );
    assert_eq!(
        s.row_state("ada").await,
        (b"{\"carries\":[]}".to_vec(), 7, v + 1)
    );
    assert_eq!(s.row_state("bob").await.1, 3);
}

#[tokio::test]
async fn one_stale_epoch_refuses_the_whole_commit() {
    let s = setup().await;
    // Bob is claimed elsewhere after this zone's session took him.
    let newer = s.store.claim_character("bob").await.unwrap();
    let batch = ZoneCommit {
        zone: Some(s.fence()),
        state: Some(b"floor: token"),
        parts: Vec::new(),
        rows: vec![
            write("ada", &s.ada, b"{\"carries\":[]}", 7),
            write("bob", &s.bob, b"{\"carries\":[1]}", 3),
        ],
    };
    assert_eq!(
        s.store.commit_zone(&batch).await.unwrap(),
        CommitOutcome::Row {
            index: 1,
            current_epoch: newer.epoch,
            current_version: newer.row.state_version,
            current_claim: newer.claim,
        }
    );
    assert_eq!(
        s.store.zone_state("city").await.unwrap(),
        None,
        "no zone write"
    );
    assert_eq!(
        s.row_state("ada").await,
        (b"{\"born\":true}".to_vec(), 0, s.ada.row.state_version),
        "no row write either"
    );
}

#[tokio::test]
async fn a_stale_version_refuses_the_whole_commit() {
    let s = setup().await;
    let mut stale = write("ada", &s.ada, b"{}", 9);
    stale.fence.1 += 1;
    let batch = ZoneCommit {
        zone: Some(s.fence()),
        state: Some(b"floor"),
        parts: Vec::new(),
        rows: vec![write("bob", &s.bob, b"{}", 2), stale],
    };
    assert!(matches!(
        s.store.commit_zone(&batch).await.unwrap(),
        CommitOutcome::Row { index: 1, .. }
    ));
    assert_eq!(s.row_state("bob").await.1, 0, "bob's row untouched");
}

#[tokio::test]
async fn a_stale_generation_refuses_the_whole_commit() {
    let s = setup().await;
    let mut fence = s.fence();
    fence.generation += 1;
    let batch = ZoneCommit {
        zone: Some(fence),
        state: Some(b"floor"),
        parts: Vec::new(),
        rows: vec![write("ada", &s.ada, b"{}", 9)],
    };
    assert_eq!(
        s.store.commit_zone(&batch).await.unwrap(),
        CommitOutcome::Zone(ZoneStateRefused::Lease)
    );
    // The lease moved to another shard: the old owner's commit is refused.
    s.dir
        .release_zone("city", "shard-a", s.generation)
        .await
        .ok();
    let batch = ZoneCommit {
        zone: Some(s.fence()),
        state: None,
        parts: Vec::new(),
        rows: vec![write("ada", &s.ada, b"{}", 9)],
    };
    assert!(matches!(
        s.store.commit_zone(&batch).await.unwrap(),
        CommitOutcome::Zone(_)
    ));
    assert_eq!(s.row_state("ada").await.1, 0, "no row written");
    assert_eq!(s.store.zone_state("city").await.unwrap(), None);
}

#[tokio::test]
async fn another_open_of_the_zone_refuses_the_earlier_ones_commit() {
    let s = setup().await;
    s.store
        .open_zone_state("city", "shard-a", s.generation, ClaimId::random())
        .await
        .unwrap()
        .unwrap();
    let batch = ZoneCommit {
        zone: Some(s.fence()),
        state: Some(b"floor"),
        parts: Vec::new(),
        rows: vec![write("ada", &s.ada, b"{}", 9)],
    };
    assert_eq!(
        s.store.commit_zone(&batch).await.unwrap(),
        CommitOutcome::Zone(ZoneStateRefused::Holder)
    );
    assert_eq!(s.row_state("ada").await.1, 0);
}

#[tokio::test]
async fn an_instance_commits_its_rows_without_a_zone_fence_and_a_missing_row_refuses() {
    let s = setup().await;
    let batch = ZoneCommit {
        zone: None,
        state: Some(b"ignored: an instance keeps no row"),
        parts: Vec::new(),
        rows: vec![write("ada", &s.ada, b"{\"in\":\"crypt\"}", 4)],
    };
    assert!(matches!(
        s.store.commit_zone(&batch).await.unwrap(),
        CommitOutcome::Committed { .. }
    ));
    assert_eq!(s.row_state("ada").await.1, 4);
    let batch = ZoneCommit {
        zone: None,
        state: None,
        parts: Vec::new(),
        rows: vec![
            write("bob", &s.bob, b"{}", 5),
            write("nobody", &s.bob, b"{}", 1),
        ],
    };
    assert_eq!(
        s.store.commit_zone(&batch).await.unwrap(),
        CommitOutcome::Missing { index: 1 }
    );
}

#[tokio::test]
async fn keyed_parts_are_written_removed_and_read_back_by_the_next_open() {
    let s = setup().await;
    // A whole state from before the game kept parts.
    s.store
        .save_zone_state("city", "shard-a", s.generation, s.holder, b"whole")
        .await
        .unwrap()
        .unwrap();
    let batch = ZoneCommit {
        zone: Some(s.fence()),
        parts: vec![("floor:a", Some(&b"[1]"[..])), ("mob:m", Some(&b"{}"[..]))],
        rows: vec![write("ada", &s.ada, b"{}", 1)],
        ..ZoneCommit::default()
    };
    assert!(matches!(
        s.store.commit_zone(&batch).await.unwrap(),
        CommitOutcome::Committed { .. }
    ));
    assert_eq!(
        s.store.zone_state("city").await.unwrap(),
        None,
        "parts supersede the whole"
    );
    let batch = ZoneCommit {
        zone: Some(s.fence()),
        parts: vec![("mob:m", None), ("floor:a", Some(&b"[2]"[..]))],
        ..ZoneCommit::default()
    };
    s.store.commit_zone(&batch).await.unwrap();
    let next = s
        .store
        .open_zone_state("city", "shard-a", s.generation, ClaimId::random())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(next.whole, None);
    assert_eq!(next.parts, vec![("floor:a".to_string(), b"[2]".to_vec())]);
    // Only what changed was sent: an empty part is refused, never written.
    let batch = ZoneCommit {
        zone: Some(s.fence()),
        parts: vec![("floor:a", Some(&b""[..]))],
        ..ZoneCommit::default()
    };
    assert!(s.store.commit_zone(&batch).await.is_err());
}

#[tokio::test]
async fn a_row_behind_the_committers_count_lost_commits_and_refuses() {
    let s = setup().await;
    let at = |commits| ZoneFence {
        commits: Some(commits),
        ..s.fence()
    };
    let batch = |fence| ZoneCommit {
        zone: Some(fence),
        parts: vec![("clock", Some(&b"1"[..]))],
        ..ZoneCommit::default()
    };
    for n in 0..2 {
        assert!(matches!(
            s.store.commit_zone(&batch(at(n))).await.unwrap(),
            CommitOutcome::Committed { .. }
        ));
    }
    // The committer counts 3 commits; the row holds 2 (Redis lost one).
    assert_eq!(
        s.store.commit_zone(&batch(at(3))).await.unwrap(),
        CommitOutcome::Zone(ZoneStateRefused::Behind { commits: 2 })
    );
    let opened = s
        .store
        .open_zone_state("city", "shard-a", s.generation, s.holder)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(opened.commits, 2, "an open learns the row's count");
}
