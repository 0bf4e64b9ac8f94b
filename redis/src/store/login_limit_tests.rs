//! Failed-login limits against a real, private redis-server, with short
//! locks so that expiry is seen, not assumed.

use std::time::{Duration, Instant};

use telos_testkit::RedisServer;

use super::*;

/// Short enough to wait out in a test, long enough that the assertions
/// made while a lock holds finish well inside it.
const LOCK: Duration = Duration::from_millis(400);
const LOCK_CAP: Duration = Duration::from_millis(800);
/// Bounds every wait for a lock to lapse (a lock is at most `LOCK_CAP`).
const EXPIRY_BOUND: Duration = Duration::from_secs(5);
const POLL: Duration = Duration::from_millis(25);

fn limits() -> LoginLimits {
    LoginLimits {
        lock_after: 3,
        lock: LOCK,
        lock_cap: LOCK_CAP,
        // Out of the way unless a test is about it.
        throttle_after: 1000,
        throttle_interval: Duration::from_secs(1),
        ..LoginLimits::default()
    }
}

async fn setup() -> (RedisServer, Store) {
    // Under exactly the documented ACL (see `crate::acl`).
    let (server, url) = crate::acl::test_server();
    let store = Store::connect(&url).await.expect("connect");
    (server, store)
}

async fn admit(store: &Store, name: &str, bucket: &str, l: &LoginLimits) -> Admission {
    store.admit_login(name, bucket, l).await.unwrap()
}

/// Polls until (`name`, `bucket`) is admitted again; how long that took.
async fn until_admitted(store: &Store, name: &str, bucket: &str, l: &LoginLimits) -> Admission {
    let deadline = Instant::now() + EXPIRY_BOUND;
    loop {
        let a = admit(store, name, bucket, l).await;
        if matches!(a, Admission::Admitted { .. }) {
            return a;
        }
        assert!(Instant::now() < deadline, "still refused: {a:?}");
        tokio::time::sleep(POLL).await;
    }
}

fn waits(a: Admission) -> Duration {
    match a {
        Admission::Wait(d) => d,
        other => panic!("admitted: {other:?}"),
    }
}

#[tokio::test]
async fn a_pair_locks_after_n_failures_and_the_lock_expires_doubling() {
    let (server, store) = setup().await;
    let l = limits();
    for _ in 1..l.lock_after {
        assert_eq!(
            admit(&store, "Ann", "v4:192.0.2.1", &l).await,
            Admission::Admitted { locks: None }
        );
    }
    // The Nth attempt is checked, and arms the lock should it fail.
    assert_eq!(
        admit(&store, "ann", "v4:192.0.2.1", &l).await,
        Admission::Admitted { locks: Some(LOCK) }
    );
    let wait = waits(admit(&store, "ANN", "v4:192.0.2.1", &l).await);
    assert!(wait <= LOCK && !wait.is_zero(), "{wait:?}");
    // Another source, and another account from this source, are free.
    assert!(matches!(
        admit(&store, "ann", "v4:192.0.2.2", &l).await,
        Admission::Admitted { locks: None }
    ));
    assert!(matches!(
        admit(&store, "bob", "v4:192.0.2.1", &l).await,
        Admission::Admitted { locks: None }
    ));
    // The lock lapses by its TTL; the next failure locks twice as long,
    // then the cap holds.
    assert_eq!(
        until_admitted(&store, "ann", "v4:192.0.2.1", &l).await,
        Admission::Admitted {
            locks: Some(LOCK * 2)
        }
    );
    assert_eq!(
        until_admitted(&store, "ann", "v4:192.0.2.1", &l).await,
        Admission::Admitted {
            locks: Some(LOCK_CAP)
        }
    );
    // Every key the limits wrote expires by itself. (`KEYS` is no command
    // of Telos's: asked as the test server's admin.)
    let mut admin = server
        .admin_client()
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("telos:login*")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert!(keys.len() >= 4, "{keys:?}");
    for key in keys {
        let ttl: i64 = redis::cmd("PTTL")
            .arg(&key)
            .query_async(&mut store.conn())
            .await
            .unwrap();
        assert!(ttl > 0, "{key} has no TTL ({ttl})");
    }
}

#[tokio::test]
async fn a_success_clears_the_pair_and_its_lock() {
    let (_r, store) = setup().await;
    let l = limits();
    for _ in 0..l.lock_after {
        admit(&store, "cy", "unknown", &l).await;
    }
    waits(admit(&store, "cy", "unknown", &l).await);
    // (The shard never reports a success for a refused attempt; this is
    // the Nth attempt, admitted, turning out right.)
    store.login_succeeded("cy", "unknown").await.unwrap();
    for _ in 1..l.lock_after {
        assert_eq!(
            admit(&store, "cy", "unknown", &l).await,
            Admission::Admitted { locks: None }
        );
    }
}

#[tokio::test]
async fn many_sources_are_throttled_account_wide_but_never_shut_out() {
    let (_r, store) = setup().await;
    let l = LoginLimits {
        lock_after: 1000,
        throttle_after: 4,
        throttle_interval: LOCK,
        ..limits()
    };
    // The player's own address logged in lately.
    admit(&store, "dee", "v4:198.51.100.9", &l).await;
    store
        .login_succeeded("dee", "v4:198.51.100.9")
        .await
        .unwrap();
    for i in 0..l.throttle_after {
        let bucket = format!("v4:203.0.113.{i}");
        assert!(matches!(
            admit(&store, "dee", &bucket, &l).await,
            Admission::Admitted { .. }
        ));
    }
    // Throttled: one attempt per interval, whichever new source asks first.
    assert!(matches!(
        admit(&store, "dee", "v4:203.0.113.100", &l).await,
        Admission::Admitted { .. }
    ));
    let wait = waits(admit(&store, "dee", "v4:203.0.113.101", &l).await);
    assert!(wait <= LOCK, "{wait:?}");
    // The known source is not slowed by anyone else's guessing.
    for _ in 0..3 {
        assert!(matches!(
            admit(&store, "dee", "v4:198.51.100.9", &l).await,
            Admission::Admitted { .. }
        ));
    }
    // And a new source gets its attempt once the interval is over.
    until_admitted(&store, "dee", "v4:203.0.113.101", &l).await;
}

#[tokio::test]
async fn an_attempt_never_judged_does_not_count_nor_lock() {
    let (_r, store) = setup().await;
    let l = limits();
    for _ in 1..l.lock_after {
        admit(&store, "eve", "unknown", &l).await;
    }
    // The Nth attempt armed the lock, then its hash was refused `Busy`.
    let armed = admit(&store, "eve", "unknown", &l).await;
    assert_eq!(armed, Admission::Admitted { locks: Some(LOCK) });
    store
        .login_unchecked("eve", "unknown", armed)
        .await
        .unwrap();
    // Not locked, and the retry is the Nth attempt again, not the N+1th.
    assert_eq!(
        admit(&store, "eve", "unknown", &l).await,
        Admission::Admitted { locks: Some(LOCK) }
    );
}

#[tokio::test]
async fn a_callers_budget_of_attributed_failures_runs_out_and_refills() {
    let (_r, store) = setup().await;
    let l = LoginLimits {
        caller_budget: 3,
        caller_refill: LOCK,
        ..limits()
    };
    for _ in 0..3 {
        assert!(store.caller_budget("gate:g1", &l, false).await.unwrap());
        assert!(store.caller_budget("gate:g1", &l, true).await.unwrap());
    }
    // Spent: peeking and taking both say so, and taking spends nothing more.
    assert!(!store.caller_budget("gate:g1", &l, false).await.unwrap());
    assert!(!store.caller_budget("gate:g1", &l, true).await.unwrap());
    // Per caller: another certificate's budget is its own.
    assert!(store.caller_budget("gate:g2", &l, true).await.unwrap());
    // One token back per refill interval.
    let started = Instant::now();
    while !store.caller_budget("gate:g1", &l, false).await.unwrap() {
        assert!(started.elapsed() < EXPIRY_BOUND, "never refilled");
        tokio::time::sleep(POLL).await;
    }
    assert!(started.elapsed() >= LOCK / 2, "{:?}", started.elapsed());
}
