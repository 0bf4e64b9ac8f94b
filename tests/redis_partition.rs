//! A shard cut from Redis while Redis itself is up (issue 17, the soak's
//! partition mode): the shard's link to Redis runs through a testkit
//! [`Proxy`] that holds Redis's answers (`DropDown`: requests land, no
//! reply comes back), the gate reaches Redis directly.
//!
//! A login the cut shard cannot check is not a failed login: the soak's
//! partition seed 777 saw `Login failed: the world cannot be reached` for
//! a right password while a peer that could reach Redis was live. The shard
//! said so as a final answer, which the gate showed as the contract's
//! credential verdict, counted against the connection's failure limit and
//! the address's login budget, and did not try another shard for.

use std::time::Duration;

use telos_testkit::RedisServer;
use telos_testkit::bot::{Bot, LoginReply};
use telos_testkit::process::{WorldOpts, start_gate, start_world};
use telos_testkit::proxy::{LinkMode, Proxy};
use telos_testkit::world::starter_zones;

const PASSWORD: &str = "correct horse";

/// The gate's failed-login limit for this test: fewer than the attempts
/// made during the cut, so an outage counted as a failure closes the
/// connection.
const MAX_FAILURES: &str = "2";

/// Logins tried while the shard is cut: each waits out the shard's Redis
/// request bound (2 s).
const ATTEMPTS_DURING_CUT: usize = 3;

/// After the link heals, logins are retried this many times, a second
/// apart, before the test gives up (the shard's Redis connection is back
/// within about half a second; the rest is slack for a loaded machine).
const ATTEMPTS_AFTER_HEAL: usize = 15;

/// How the gate says no shard could answer (its own outage line).
const OUTAGE: &str = "The world is not reachable right now";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_a_cut_shard_cannot_check_is_an_outage_not_a_failed_login() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let link = Proxy::start("127.0.0.1:0", &format!("127.0.0.1:{}", redis.port), None).await?;
    let shard_url = format!("redis://{}/", link.addr);
    let zones = starter_zones();
    let zones: Vec<&str> = zones.iter().map(String::as_str).collect();
    let _world = start_world(WorldOpts::new("shard-a", &shard_url, &zones))?;
    let gate = start_gate(&redis.url, &["--login-max-failures", MAX_FAILURES])?;
    let mut ada = Bot::create_at(&gate.addr, "Ada", PASSWORD).await?;
    ada.quit().await?;

    // Requests land (the shard's heartbeats keep it listed live), answers
    // never come back: every store call of a login times out.
    link.set(LinkMode::DropDown);
    let mut bot = Bot::open(&gate.addr).await?;
    for attempt in 1..=ATTEMPTS_DURING_CUT {
        let reply = bot.login("connect", "Ada", PASSWORD).await?;
        let LoginReply::Refused(line) = &reply else {
            panic!("attempt {attempt}: a login got in through a shard cut from Redis: {reply:?}");
        };
        assert!(
            !line.starts_with("Login failed"),
            "attempt {attempt}: a right password was answered `Login failed` for an outage: {line:?}"
        );
        assert!(
            line.starts_with(OUTAGE),
            "attempt {attempt}: unclear answer while the shard is cut: {line:?}"
        );
    }
    assert!(
        !bot.is_closed(),
        "the gate counted outages as failed logins and closed the connection:\n{}",
        bot.transcript()
    );

    link.heal();
    for attempt in 1..=ATTEMPTS_AFTER_HEAL {
        match bot.login("connect", "Ada", PASSWORD).await? {
            LoginReply::Welcome { .. } => return Ok(()),
            LoginReply::Refused(line) => {
                assert!(
                    line.starts_with(OUTAGE),
                    "after the heal, attempt {attempt}: {line:?}"
                );
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
    panic!(
        "no login got in within {ATTEMPTS_AFTER_HEAL} attempts after the link healed:\n{}",
        bot.transcript()
    );
}
