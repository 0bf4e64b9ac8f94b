//! A claim for an attempt its gate has given up never fences the session a
//! later attempt of the same connection put into play (issue 17: a stalled
//! shard's login claimed after the gate had logged the player in
//! elsewhere, and the live session's saves were refused).

use super::*;

async fn setup(name: &str) -> (telos_testkit::RedisServer, Store) {
    let (server, url) = crate::acl::test_server();
    let store = Store::connect(&url).await.expect("connect");
    store
        .create_character(name, "password1", b"{}")
        .await
        .expect("create");
    (server, store)
}

fn attempt(conn_id: &str, attempt: u64) -> Claimant<'_> {
    Claimant { conn_id, attempt }
}

/// A claim for `conn_id`'s attempt `n` that must be granted.
async fn granted(store: &Store, name: &str, conn_id: &str, n: u64) -> ClaimedCharacter {
    store
        .claim_character_for(name, attempt(conn_id, n))
        .await
        .unwrap()
}

#[tokio::test]
async fn an_earlier_attempt_of_the_same_connection_is_refused_and_mints_nothing() {
    let (_r, store) = setup("Ada").await;
    let later = granted(&store, "ada", "c-1", 7).await;
    let refused = store.claim_character_for("ada", attempt("c-1", 6)).await;
    assert!(
        matches!(refused, Err(StoreError::OlderAttempt)),
        "{refused:?}"
    );
    assert!(StoreError::OlderAttempt.is_refused());
    // Nothing minted: the later attempt's session still saves.
    let saved = store
        .save("ada", later.epoch, later.row.state_version, b"{}", "c-1", 1)
        .await
        .unwrap();
    assert!(matches!(saved, SaveOutcome::Saved { .. }), "{saved:?}");
}

#[tokio::test]
async fn the_same_attempt_claims_again_and_a_later_one_takes_over() {
    let (_r, store) = setup("Bo").await;
    let first = granted(&store, "bo", "c-1", 3).await;
    // A join found stale is claimed again under the same attempt.
    let again = granted(&store, "bo", "c-1", 3).await;
    assert!(again.epoch > first.epoch);
    let later = granted(&store, "bo", "c-1", 4).await;
    assert!(later.epoch > again.epoch);
}

#[tokio::test]
async fn attempts_order_only_within_one_connection() {
    let (_r, store) = setup("Cy").await;
    granted(&store, "cy", "c-1", 9).await;
    // Another connection's login takes over whatever its number (attempt
    // numbers of different connections, or gates, are not comparable).
    let other = granted(&store, "cy", "c-2", 1).await;
    // And from then on c-1's attempts are not compared with c-2's.
    let back = granted(&store, "cy", "c-1", 2).await;
    assert!(back.epoch > other.epoch);
    // An attempt that is not told (0) is never refused.
    store.claim_character("cy").await.unwrap();
    granted(&store, "cy", "c-1", 0).await;
}
