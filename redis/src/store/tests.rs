//! Store against a real, private redis-server.

use std::time::Duration;

use telos_testkit::RedisServer;

use super::*;

/// Long enough that no credential lapses while a test looks at it.
const CRED_TTL: Duration = Duration::from_secs(60);

async fn setup() -> (RedisServer, Store) {
    // Under exactly the documented ACL (see `crate::acl`).
    let (server, url) = crate::acl::test_server();
    let store = Store::connect(&url).await.expect("connect");
    (server, store)
}

/// The row's `owner_claim`.
async fn first_claim_of(store: &Store, name: &str) -> ClaimId {
    let stored: Option<String> = redis::cmd("HGET")
        .arg(format!("telos:char:{name}"))
        .arg("owner_claim")
        .query_async(&mut store.conn())
        .await
        .unwrap();
    ClaimId::parse(&stored.unwrap_or_default())
}

async fn pttl(store: &Store, key: &str) -> i64 {
    redis::cmd("PTTL")
        .arg(key)
        .query_async(&mut store.conn())
        .await
        .unwrap()
}

#[tokio::test]
async fn create_load_and_duplicate_names() {
    let (_r, store) = setup().await;
    assert_eq!(store.load("alice").await.unwrap(), None);
    store
        .create_character("Alice", "correct horse", b"{\"hp\":10}")
        .await
        .unwrap();
    let row = store.load("ALICE").await.unwrap().expect("row");
    assert_eq!(row.name, "Alice");
    assert_eq!(row.state_json, b"{\"hp\":10}");
    assert_eq!(
        (row.state_version, row.owner_epoch, row.applied_seq),
        (1, 0, 0)
    );
    assert_eq!(row.tier, "player");
    assert_eq!(row.conn_id, "");
    assert_eq!(row.persist_id.len(), 32);

    for dup in ["Alice", "alice", "ALICE"] {
        let err = store
            .create_character(dup, "another pw", b"{}")
            .await
            .unwrap_err();
        assert!(
            matches!(err, StoreError::NameTaken) && err.is_refused(),
            "{dup}: {err}"
        );
    }
    // The refused create changed nothing.
    assert_eq!(store.load("alice").await.unwrap(), Some(row.clone()));
    store
        .create_character("Bob", "password1", b"{}")
        .await
        .unwrap();
    assert_ne!(
        store.load("bob").await.unwrap().unwrap().persist_id,
        row.persist_id
    );
    assert!(matches!(
        store.create_character("", "password1", b"{}").await,
        Err(StoreError::InvalidName(_))
    ));
}

#[tokio::test]
async fn passwords_are_hashed_and_verified() {
    let (_r, store) = setup().await;
    store
        .create_character("Carol", "s3cret-pass", b"{}")
        .await
        .unwrap();
    assert!(store.verify_password("carol", "s3cret-pass").await.unwrap());
    assert!(!store.verify_password("Carol", "wrong-pass").await.unwrap());
    assert!(
        !store
            .verify_password("nobody", "s3cret-pass")
            .await
            .unwrap()
    );
    let pw: String = redis::cmd("HGET")
        .arg("telos:char:carol")
        .arg("pw")
        .query_async(&mut store.conn())
        .await
        .unwrap();
    assert!(pw.starts_with("$argon2id$"), "{pw}");
    assert!(!pw.contains("s3cret-pass"));
}

#[tokio::test]
async fn claims_mint_increasing_epochs() {
    let (_r, store) = setup().await;
    assert!(matches!(
        store.claim_character("ghost").await,
        Err(StoreError::NotFound)
    ));
    store
        .create_character("Dave", "password1", b"{}")
        .await
        .unwrap();
    let mut last = 0;
    for _ in 0..3 {
        let claimed = store.claim_character("dave").await.unwrap();
        assert!(claimed.epoch > last);
        assert_eq!(claimed.row.owner_epoch, claimed.epoch);
        last = claimed.epoch;
    }
    // Concurrent claims each get their own epoch.
    let claims = futures_join(&store, "dave", 20).await;
    let mut epochs: Vec<u64> = claims.iter().map(|c| c.epoch).collect();
    epochs.sort_unstable();
    epochs.dedup();
    assert_eq!(epochs.len(), 20);
    assert!(epochs[0] > last);
}

async fn futures_join(store: &Store, name: &str, n: usize) -> Vec<ClaimedCharacter> {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let (store, name) = (store.clone(), name.to_owned());
            tokio::spawn(async move { store.claim_character(&name).await.unwrap() })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

#[tokio::test]
async fn save_is_fenced_on_version_and_epoch() {
    let (_r, store) = setup().await;
    store
        .create_character("Erin", "password1", b"{\"v\":1}")
        .await
        .unwrap();
    let first = store.claim_character("erin").await.unwrap();
    let (e1, v1) = (first.epoch, first.row.state_version);

    let saved = store
        .save("erin", e1, v1, b"{\"v\":2}", "conn-1", 7)
        .await
        .unwrap();
    assert_eq!(saved, SaveOutcome::Saved { version: v1 + 1 });
    let row = store.load("erin").await.unwrap().unwrap();
    assert_eq!(
        (
            row.state_json.as_slice(),
            row.conn_id.as_str(),
            row.applied_seq,
            row.state_version
        ),
        (&b"{\"v\":2}"[..], "conn-1", 7, v1 + 1)
    );

    // Stale version: refused, nothing applied.
    let refused = store
        .save("erin", e1, v1, b"{\"v\":\"stale\"}", "conn-1", 8)
        .await
        .unwrap();
    let first_claim = first_claim_of(&store, "erin").await;
    assert_eq!(
        refused,
        SaveOutcome::Refused {
            current_epoch: e1,
            current_version: v1 + 1,
            current_claim: first_claim,
        }
    );

    // A newer claim fences the older epoch out, and the refusal names it.
    let second = store.claim_character("erin").await.unwrap();
    assert!(second.epoch > e1);
    assert_eq!(second.row.state_version, v1 + 1);
    let refused = store
        .save("erin", e1, v1 + 1, b"{\"v\":\"old\"}", "conn-1", 9)
        .await
        .unwrap();
    assert_eq!(
        refused,
        SaveOutcome::Refused {
            current_epoch: second.epoch,
            current_version: v1 + 1,
            current_claim: second.claim,
        }
    );
    let row = store.load("erin").await.unwrap().unwrap();
    assert_eq!(row.state_json, b"{\"v\":2}", "refused saves must not apply");
    assert_eq!(row.applied_seq, 7);

    let saved = store
        .save("erin", second.epoch, v1 + 1, b"{\"v\":3}", "conn-2", 12)
        .await
        .unwrap();
    assert_eq!(saved, SaveOutcome::Saved { version: v1 + 2 });
    assert!(matches!(
        store.save("nobody", 1, 1, b"{}", "c", 0).await,
        Err(StoreError::NotFound)
    ));
}

/// A quit's save marks the row: the connection it names ended with a quit
/// at its `applied_seq` (a resume of it is answered `Goodbye.`). Any other
/// save — a later session, another connection — clears the mark, and the
/// mark names only its own connection.
#[tokio::test]
async fn a_quit_save_marks_the_row_for_its_connection_only() {
    let (_r, store) = setup().await;
    store
        .create_character("Quinn", "password1", b"{}")
        .await
        .unwrap();
    let row = store.load("quinn").await.unwrap().unwrap();
    assert_eq!(row.quit_seq, 0);
    assert!(!row.quit_by(""), "a fresh row ended no session");
    let c = store.claim_character("quinn").await.unwrap();
    store
        .save("quinn", c.epoch, 1, b"{}", "conn-1", 4)
        .await
        .unwrap();
    assert!(
        !store
            .load("quinn")
            .await
            .unwrap()
            .unwrap()
            .quit_by("conn-1")
    );
    store
        .save_marked("quinn", c.epoch, 2, b"{}", "conn-1", 5, true)
        .await
        .unwrap();
    let row = store.load("quinn").await.unwrap().unwrap();
    assert_eq!((row.applied_seq, row.quit_seq), (5, 5));
    assert!(row.quit_by("conn-1"));
    assert!(!row.quit_by("conn-2"), "another connection did not quit");
    // The narrow read a resume makes says the same as the whole row.
    assert!(store.quit_by("Quinn", "conn-1").await.unwrap());
    assert!(!store.quit_by("quinn", "conn-2").await.unwrap());
    assert!(!store.quit_by("nobody", "conn-1").await.unwrap());

    let next = store.claim_character("quinn").await.unwrap();
    store
        .save("quinn", next.epoch, 3, b"{}", "conn-2", 1)
        .await
        .unwrap();
    let row = store.load("quinn").await.unwrap().unwrap();
    assert_eq!(row.quit_seq, 0);
    assert!(!row.quit_by("conn-1") && !row.quit_by("conn-2"));
    assert!(!store.quit_by("quinn", "conn-1").await.unwrap());
}

#[tokio::test]
async fn tiers() {
    let (_r, store) = setup().await;
    store
        .create_character("Fay", "password1", b"{}")
        .await
        .unwrap();
    store.set_tier("FAY", "admin").await.unwrap();
    assert_eq!(store.load("fay").await.unwrap().unwrap().tier, "admin");
    assert_eq!(
        store.claim_character("fay").await.unwrap().row.tier,
        "admin"
    );
    assert!(matches!(
        store.set_tier("fay", "god").await,
        Err(StoreError::InvalidTier(_))
    ));
    assert!(matches!(
        store.set_tier("nobody", "builder").await,
        Err(StoreError::NotFound)
    ));
    assert_eq!(
        store.load("nobody").await.unwrap(),
        None,
        "set_tier must not create rows"
    );
}

#[tokio::test]
async fn resume_credentials() {
    let (r, store) = setup().await;
    store
        .create_character("Gus", "password1", b"{}")
        .await
        .unwrap();
    let cred = store
        .issue_credential("Gus", "conn-1", CRED_TTL)
        .await
        .unwrap();
    assert_eq!(cred.len(), 64);
    assert!(
        store
            .check_credential("gus", "conn-1", &cred)
            .await
            .unwrap()
    );
    assert!(
        !store
            .check_credential("bob", "conn-1", &cred)
            .await
            .unwrap(),
        "wrong name"
    );
    assert!(
        !store
            .check_credential("gus", "conn-2", &cred)
            .await
            .unwrap(),
        "wrong conn"
    );
    let wrong = "0".repeat(64);
    assert!(
        !store
            .check_credential("gus", "conn-1", &wrong)
            .await
            .unwrap(),
        "wrong credential"
    );

    // A valid check restarts the TTL.
    let key = "telos:cred:gus:conn-1";
    redis::cmd("PEXPIRE")
        .arg(key)
        .arg(1_000)
        .exec_async(&mut store.conn())
        .await
        .unwrap();
    assert!(
        store
            .check_credential("gus", "conn-1", &cred)
            .await
            .unwrap()
    );
    assert!(pttl(&store, key).await > 1_000);

    // A second issue for the pair (a stalled shard finishing a login the
    // gate abandoned) leaves the first valid: the gate may hold either
    // (issue 17, overlap seed 113178421). Revoking forgets both.
    let newer = store
        .issue_credential("gus", "conn-1", CRED_TTL)
        .await
        .unwrap();
    for (which, c) in [("the earlier", &cred), ("the newer", &newer)] {
        assert!(
            store.check_credential("gus", "conn-1", c).await.unwrap(),
            "{which} credential of the pair was refused"
        );
    }
    assert!(
        !store
            .check_credential("gus", "conn-1", &wrong)
            .await
            .unwrap(),
        "wrong credential beside two issued ones"
    );

    // Hash-only storage: the raw credential is in no key and no value.
    let dump = dump_everything(&r).await;
    assert!(!dump.contains(&newer), "raw credential stored");
    assert!(!dump.contains(&cred));

    store.revoke_credential("gus", "conn-1").await.unwrap();
    for c in [&cred, &newer] {
        assert!(!store.check_credential("gus", "conn-1", c).await.unwrap());
    }
}

/// Every key and every value (hash fields included) as one string. On a
/// connection of its own: `KEYS` and `TYPE` are no commands of Telos's
/// (`telos_redis::acl`), so its connection would not send them.
async fn dump_everything(server: &RedisServer) -> String {
    let mut conn = server
        .admin_client()
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn)
        .await
        .unwrap();
    let mut out = String::new();
    for key in keys {
        out.push_str(&key);
        out.push('\n');
        let kind: String = redis::cmd("TYPE")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        let values: Vec<Vec<u8>> = match kind.as_str() {
            "hash" => redis::cmd("HGETALL")
                .arg(&key)
                .query_async(&mut conn)
                .await
                .unwrap(),
            "string" => vec![
                redis::cmd("GET")
                    .arg(&key)
                    .query_async(&mut conn)
                    .await
                    .unwrap(),
            ],
            other => panic!("unexpected type {other} at {key}"),
        };
        for v in values {
            out.push_str(&String::from_utf8_lossy(&v));
            out.push('\n');
        }
    }
    out
}

#[tokio::test]
async fn unreadable_store_is_an_error_not_a_miss() {
    let (r, store) = setup().await;
    store
        .create_character("Hal", "password1", b"{}")
        .await
        .unwrap();
    r.pause().unwrap();
    let err = store.load("hal").await.unwrap_err();
    r.resume().unwrap();
    assert!(
        matches!(err, StoreError::Redis(_)) && !err.is_refused(),
        "{err}"
    );
}

mod handoff_claim {
    use super::*;
    use crate::directory::{Claim, Directory, ShardInfo, ShardState};

    const LONG: Duration = Duration::from_secs(60);

    fn shard(id: &str, handoff_version: u32) -> ShardInfo {
        ShardInfo {
            id: id.into(),
            addr: format!("127.0.0.1:7{}", id.len()),
            state: ShardState::Live,
            players: 0,
            capacity: 100,
            handoff_version,
            incarnation: 0,
        }
    }

    async fn epoch(store: &Store, name: &str) -> u64 {
        store.load(name).await.unwrap().expect("row").owner_epoch
    }

    /// A live owner `b` for the forest, `field` of hash `key` garbled, and
    /// the claim's error.
    async fn corrupted_claim(
        r: &RedisServer,
        store: &Store,
        name: &str,
        key: &str,
        field: &str,
    ) -> StoreError {
        let dir = Directory::connect(&r.url_with_password()).await.unwrap();
        dir.claim_zone("forest", "b", LONG).await.unwrap();
        dir.heartbeat(&shard("b", 2), LONG).await.unwrap();
        let _: i64 = redis::cmd("HSET")
            .arg(key)
            .arg(field)
            .arg("not-a-number")
            .query_async(&mut store.conn())
            .await
            .unwrap();
        store
            .claim_for_handoff(name, "forest", "a", 2, 0, ClaimId::random())
            .await
            .unwrap_err()
    }

    #[tokio::test]
    async fn resolves_before_it_mints_and_mints_only_for_a_live_peer() {
        let (r, store) = setup().await;
        let dir = Directory::connect(&r.url_with_password()).await.unwrap();
        store
            .create_character("Ana", "correct horse", b"{}")
            .await
            .unwrap();
        let id = ClaimId::random();
        let claim = |zone: &'static str, from: &'static str, version: u32, held: u64| {
            let store = &store;
            async move {
                store
                    .claim_for_handoff("ana", zone, from, version, held, id)
                    .await
                    .unwrap()
            }
        };

        // Nobody owns the forest; then an owner that is not live.
        assert_eq!(claim("forest", "a", 2, 0).await, HandoffClaim::NoOwner);
        let Claim::Acquired { .. } = dir.claim_zone("forest", "b", LONG).await.unwrap() else {
            panic!("lease");
        };
        assert_eq!(claim("forest", "a", 2, 0).await, HandoffClaim::NoOwner);
        assert_eq!(epoch(&store, "ana").await, 0, "nothing minted");

        // b is live: minted for b, the epoch after the session's.
        dir.heartbeat(&shard("b", 2), LONG).await.unwrap();
        assert_eq!(
            claim("forest", "a", 2, 0).await,
            HandoffClaim::Minted {
                dest: shard("b", 2),
                epoch: 1,
            }
        );
        assert_eq!(epoch(&store, "ana").await, 1);

        // Refusals mint nothing: the zone is the claimant's own, or its
        // owner speaks another handoff version.
        assert_eq!(claim("forest", "b", 2, 1).await, HandoffClaim::ThisShard);
        assert_eq!(
            claim("forest", "a", 3, 1).await,
            HandoffClaim::OtherVersion(shard("b", 2))
        );
        assert_eq!(epoch(&store, "ana").await, 1);

        // No row yet: a genuine miss, reported with the destination.
        assert_eq!(
            store
                .claim_for_handoff("nobody", "forest", "a", 2, 0, id)
                .await
                .unwrap(),
            HandoffClaim::NoRow(shard("b", 2))
        );

        // A pending transfer routes to its target at once.
        dir.heartbeat(&shard("ccc", 2), LONG).await.unwrap();
        dir.register_zones(&["forest".to_string()]).await.unwrap();
        dir.propose_transfer("forest", "ccc", crate::directory::events::Cause::Operator)
            .await
            .unwrap()
            .expect("proposal accepted");
        let HandoffClaim::Minted { dest, epoch: e, .. } = claim("forest", "a", 2, 1).await else {
            panic!("minted for the transfer target");
        };
        assert_eq!((dest.id.as_str(), e), ("ccc", 2));
    }

    /// The mint is a compare-and-set on the session's epoch: a session a
    /// login superseded mints nothing; the same claim run again (its reply
    /// lost) is answered with the epoch it minted, not a second one; a row
    /// behind the session (Redis lost the claim) mints after the session's.
    #[tokio::test]
    async fn mints_only_from_the_sessions_epoch_and_answers_its_own_claim_again() {
        let (r, store) = setup().await;
        let dir = Directory::connect(&r.url_with_password()).await.unwrap();
        store
            .create_character("Eve", "correct horse", b"{}")
            .await
            .unwrap();
        dir.claim_zone("forest", "b", LONG).await.unwrap();
        dir.heartbeat(&shard("b", 2), LONG).await.unwrap();
        let claim = |held: u64, id: ClaimId| {
            let store = &store;
            async move {
                store
                    .claim_for_handoff("eve", "forest", "a", 2, held, id)
                    .await
                    .unwrap()
            }
        };
        let login = store.claim_character("eve").await.unwrap(); // epoch 1
        let minted = |epoch| HandoffClaim::Minted {
            dest: shard("b", 2),
            epoch,
        };

        // A session still at epoch 0 was superseded by the login.
        assert_eq!(
            claim(0, ClaimId::random()).await,
            HandoffClaim::Superseded { current: 1 }
        );
        assert_eq!(epoch(&store, "eve").await, 1, "nothing minted");

        // The login's session departs: minted once, answered again.
        let departure = ClaimId::random();
        assert_eq!(claim(login.epoch, departure).await, minted(2));
        assert_eq!(claim(login.epoch, departure).await, minted(2));
        assert_eq!(epoch(&store, "eve").await, 2, "one mint for one claim");
        assert_eq!(
            claim(login.epoch, ClaimId::random()).await,
            HandoffClaim::Superseded { current: 2 },
            "another claim at the old epoch is not that one"
        );

        // Redis lost the last two mints: the row is back at 0.
        let _: () = redis::cmd("HSET")
            .arg("telos:char:eve")
            .arg("owner_epoch")
            .arg(0)
            .query_async(&mut store.conn())
            .await
            .unwrap();
        assert_eq!(claim(2, ClaimId::random()).await, minted(3));
    }

    #[tokio::test]
    async fn refuses_instance_zones_and_fails_on_a_corrupt_row() {
        let (r, store) = setup().await;
        store
            .create_character("Bo", "correct horse", b"{}")
            .await
            .unwrap();
        let err = store
            .claim_for_handoff("bo", "crypt#3", "a", 2, 0, ClaimId::random())
            .await
            .unwrap_err();
        assert!(err.is_refused(), "{err}");

        let err = corrupted_claim(&r, &store, "bo", "telos:char:bo", "owner_epoch").await;
        assert!(!err.is_refused(), "a store that cannot mint fails: {err}");
    }

    #[tokio::test]
    async fn never_mints_for_a_registry_entry_it_cannot_use() {
        let (r, store) = setup().await;
        store
            .create_character("Cy", "correct horse", b"{}")
            .await
            .unwrap();
        let err = corrupted_claim(&r, &store, "cy", "telos:shard:b", "capacity").await;
        assert!(!err.is_refused(), "{err}");
        assert_eq!(epoch(&store, "cy").await, 0, "nothing minted");
    }
}

mod claim_from {
    use super::*;

    async fn epoch(store: &Store, name: &str) -> u64 {
        store.load(name).await.unwrap().expect("row").owner_epoch
    }

    #[tokio::test]
    async fn mints_only_from_the_handoffs_epoch_and_answers_its_own_claim_again() {
        let (_r, store) = setup().await;
        store
            .create_character("Dee", "correct horse", b"{}")
            .await
            .unwrap();
        let e = store.claim_character("dee").await.unwrap().epoch; // the handoff's mint
        let mine = ClaimId::random();
        let minted = ClaimFrom::Minted {
            epoch: e + 1,
            state_version: 1,
        };
        assert_eq!(
            store.claim_epoch_from("dee", e, mine).await.unwrap(),
            minted
        );
        // The same claim again (its reply lost): the same answer, no mint.
        assert_eq!(
            store.claim_epoch_from("dee", e, mine).await.unwrap(),
            minted
        );
        // The row moved on under another claim: never mint over it.
        assert_eq!(
            store
                .claim_epoch_from("dee", e, ClaimId::random())
                .await
                .unwrap(),
            ClaimFrom::Moved { current: e + 1 }
        );
        assert_eq!(epoch(&store, "dee").await, e + 1);
        assert!(matches!(
            store.claim_epoch_from("nobody", 1, mine).await,
            Err(StoreError::NotFound)
        ));
    }
}

mod heal {
    use super::*;

    async fn row(store: &Store) -> CharacterRow {
        store.load("hal").await.unwrap().expect("row")
    }

    /// Heal rewrites a row that went back — an older epoch, or the
    /// session's own epoch and claim at an older version — and nothing
    /// else: a newer owner, the same epoch under another claim (a rollback
    /// re-issued it) and a row that did not go back all refuse.
    #[tokio::test]
    async fn heals_only_a_row_that_went_back_under_the_sessions_claim() {
        let (_r, store) = setup().await;
        store
            .create_character("Hal", "correct horse", b"{}")
            .await
            .unwrap();
        let c = store.claim_character("hal").await.unwrap(); // epoch 1, version 1
        let s = store
            .save("hal", c.epoch, 1, b"{\"v\":2}", "conn", 3)
            .await
            .unwrap();
        assert_eq!(s, SaveOutcome::Saved { version: 2 });

        // Not gone back: the session wrote version 2, the row is at 2.
        let refused = store
            .heal("hal", c.epoch, c.claim, 2, b"{\"x\":1}", "conn", 4, false)
            .await
            .unwrap();
        assert!(
            matches!(refused, SaveOutcome::Refused { .. }),
            "{refused:?}"
        );
        // At our epoch under another claim: not ours.
        let refused = store
            .heal(
                "hal",
                c.epoch,
                ClaimId::random(),
                5,
                b"{\"x\":1}",
                "conn",
                4,
                false,
            )
            .await
            .unwrap();
        assert!(
            matches!(refused, SaveOutcome::Refused { .. }),
            "{refused:?}"
        );
        // Our epoch and claim, and we had written version 5: heal, above both.
        assert_eq!(
            store
                .heal("hal", c.epoch, c.claim, 5, b"{\"v\":6}", "conn", 9, false)
                .await
                .unwrap(),
            SaveOutcome::Saved { version: 6 }
        );
        let healed = row(&store).await;
        assert_eq!(
            (
                healed.state_json.as_slice(),
                healed.applied_seq,
                healed.state_version
            ),
            (&b"{\"v\":6}"[..], 9, 6)
        );
        // An older epoch on the row (our claim lost too): heal, and the
        // session's epoch and claim are back.
        let newer = c.epoch + 3;
        let mine = ClaimId::random();
        assert_eq!(
            store
                .heal("hal", newer, mine, 6, b"{\"v\":7}", "conn", 10, false)
                .await
                .unwrap(),
            SaveOutcome::Saved { version: 7 }
        );
        let healed = row(&store).await;
        assert_eq!(healed.owner_epoch, newer);
        assert_eq!(first_claim_of(&store, "hal").await, mine);
        // A newer owner than the healer: refused, nothing written.
        let refused = store
            .heal(
                "hal",
                c.epoch,
                c.claim,
                99,
                b"{\"stale\":1}",
                "conn",
                11,
                false,
            )
            .await
            .unwrap();
        assert!(
            matches!(refused, SaveOutcome::Refused { current_epoch, .. } if current_epoch == newer),
            "{refused:?}"
        );
        assert_eq!(row(&store).await.state_json, b"{\"v\":7}");
    }
}

#[tokio::test]
async fn a_revoked_credential_no_longer_resumes() {
    let (_r, store) = setup().await;
    let cred = store
        .issue_credential("Gus", "conn-1", CRED_TTL)
        .await
        .unwrap();
    let other = store
        .issue_credential("Gus", "conn-2", CRED_TTL)
        .await
        .unwrap();
    store.revoke_credential("gus", "conn-1").await.unwrap();
    assert!(
        !store
            .check_credential("gus", "conn-1", &cred)
            .await
            .unwrap()
    );
    // Only that connection's credential is gone; revoking again is fine.
    assert!(
        store
            .check_credential("gus", "conn-2", &other)
            .await
            .unwrap()
    );
    store.revoke_credential("gus", "conn-1").await.unwrap();
}
