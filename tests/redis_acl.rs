//! Every path of a cluster under exactly the ACL line docs/operations.md
//! gives operators (issue 18, defect 1: under the old line every returning
//! player's `connect` failed, "the world cannot be reached", while `create`
//! worked and the auth test, which only created, passed).
//!
//! A real `redis-server` whose Telos user has the documented rules and
//! nothing else; two keyed shards and a gate on it. One player goes
//! through create, a cross-shard walk (handoff), a wrong password and a
//! returning `connect`, `telosctl tier`, `transfer --wait` and `status`, a
//! drain (SIGTERM) that hands them on, a shard SIGKILLed under them (the
//! gate resumes them elsewhere with their credential), and `quit`. Each step
//! is checked to do what it should, and Redis's own `ACL LOG` (read as an
//! admin user) must show no command, key or channel denied, scripts
//! included.

mod support;

use std::time::Duration;

use support::acl::{ACL_USER, documented_acl_rules};
use telos_testkit::RedisServer;
use telos_testkit::bot::{Bot, LoginReply};
use telos_testkit::cli::{EXIT_TIMEOUT, Finished, clean_command, run_to_exit};
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{Proc, start_keyed_gate, start_keyed_world};
use telos_testkit::redis::{RedisAcl, RedisOptions};
use telos_testkit::world::{path_to_zone, start_room, starter_zones, zone_of};
use tokio::time::Instant;

const REDIS_PASSWORD: &str = "pw-acl-paths-0c1d";
const PASSWORD: &str = "correct horse";

/// Bounds a broken build: a drain, a takeover after a crash, a zone
/// coming back take seconds.
const SETTLE: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(200);

fn telosctl(url: &str, args: &[&str]) -> anyhow::Result<Finished> {
    let mut cmd = clean_command("telosctl");
    cmd.arg("--redis-url").arg(url).args(args);
    run_to_exit("telosctl", cmd, EXIT_TIMEOUT)
}

/// Walk `dirs`, each step answered with a room.
async fn walk(bot: &mut Bot, dirs: &[String]) -> anyhow::Result<()> {
    for dir in dirs {
        let out = bot.command(dir).await?;
        anyhow::ensure!(!out.contains("You can't go that way"), "{dir}: {out}");
    }
    Ok(())
}

/// Polls the player's `where` until they are on `shard`.
async fn wait_on_shard(bot: &mut Bot, shard: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + SETTLE;
    loop {
        let (_, _, on) = bot.where_().await?;
        if on == shard {
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < deadline, "still on {on}, not {shard}");
        tokio::time::sleep(POLL).await;
    }
}

/// Redis's record of every denied command, key or channel since start.
async fn acl_denials(redis: &RedisServer) -> anyhow::Result<Vec<redis::Value>> {
    let mut admin = redis
        .admin_client()?
        .get_multiplexed_async_connection()
        .await?;
    Ok(redis::cmd("ACL").arg("LOG").query_async(&mut admin).await?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_path_works_under_the_documented_acl() -> anyhow::Result<()> {
    let redis = RedisServer::start_with(RedisOptions {
        acl: Some(RedisAcl {
            user: ACL_USER.into(),
            password: REDIS_PASSWORD.into(),
            rules: documented_acl_rules(),
        }),
        ..RedisOptions::default()
    })?;
    let url = redis.url_with_password();
    let keys = TempKeys::generate()?;
    let zones = starter_zones();
    let (first, second) = zones.split_at(zones.len().div_ceil(2));
    let start = start_room();
    assert!(first.iter().any(|z| z == zone_of(&start)), "{first:?}");
    let no_flags: &[&str] = &[];
    let mut a = start_keyed_world("shard-a", &url, first, keys.path(), None, no_flags)?;
    let mut b: Proc = start_keyed_world("shard-b", &url, second, keys.path(), None, no_flags)?;
    let gate = start_keyed_gate(&url, keys.path(), &[])?;
    let logs = |what: &str, procs: &[&Proc]| {
        let mut text = format!("{what}\n");
        for p in procs {
            text.push_str(&p.log_text());
        }
        text
    };

    // Create, and a journal line.
    let mut bot = Bot::create_at(&gate.addr, "Alfa", PASSWORD).await?;
    let mut journal = vec!["before the walk".to_string()];
    bot.command(&format!("journal {}", journal[0])).await?;

    // A walk into shard-b's nearest zone: a handoff.
    let (zone_b, route) = second
        .iter()
        .map(|z| (z.clone(), path_to_zone(&start, z)))
        .min_by_key(|(_, path)| path.len())
        .expect("shard-b has zones");
    walk(&mut bot, &route).await?;
    let (zone, _, shard) = bot.where_().await?;
    assert_eq!(
        (zone.as_str(), shard.as_str()),
        (zone_b.as_str(), "shard-b")
    );
    journal.push("after the walk".into());
    bot.command(&format!("journal {}", journal[1])).await?;
    bot.quit().await?;

    // A wrong password, then the returning player (login_admit.lua,
    // login_succeeded.lua and login_unchecked.lua: PTTL and DECR).
    let mut again = Bot::open(&gate.addr).await?;
    let reply = again.login("connect", "alfa", "wrong password!").await?;
    assert!(
        matches!(&reply, LoginReply::Refused(l) if l.starts_with("Login failed")),
        "{reply:?}"
    );
    let reply = again.login("connect", "alfa", PASSWORD).await?;
    assert!(
        matches!(&reply, LoginReply::Welcome { .. }),
        "{reply:?}\n{}",
        logs("", &[&gate, &a, &b])
    );
    let mut bot = again;
    assert_eq!(bot.journal_list().await?, journal);

    // tier, status, and a transfer of the player's zone to shard-a (the
    // player moves with it).
    let tier = telosctl(&url, &["tier", "alfa", "builder"])?;
    assert!(tier.success(), "{tier:?}");
    let status = telosctl(&url, &["status", "--json"])?;
    assert!(status.success(), "{status:?}");
    for shard in ["\"shard-a\"", "\"shard-b\""] {
        assert!(status.stdout.contains(shard), "{}", status.stdout);
    }
    let moved = telosctl(&url, &["transfer", &zone_b, "--to", "shard-a", "--wait"])?;
    assert!(moved.success(), "{moved:?}\n{}", logs("", &[&a, &b]));
    wait_on_shard(&mut bot, "shard-a").await?;

    // Drain shard-a (SIGTERM): its zones and the player go to shard-b.
    let drained = a.stop_with(libc::SIGTERM, SETTLE)?;
    assert!(drained.success(), "{drained:?}\n{}", a.log_text());
    wait_on_shard(&mut bot, "shard-b").await?;
    assert!(!bot.is_closed());

    // shard-a again, then shard-b killed under the player: its zones are
    // taken over and the gate resumes the player with their credential.
    a = start_keyed_world("shard-a", &url, first, keys.path(), None, no_flags)?;
    b.kill();
    wait_on_shard(&mut bot, "shard-a").await?;
    assert!(!bot.is_closed(), "{}", bot.transcript());
    journal.push("after the resume".into());
    bot.command(&format!("journal {}", journal[2])).await?;
    let score = bot.command("score").await?;
    assert!(score.contains("Tier: builder"), "{score}");
    assert_eq!(bot.journal_list().await?, journal);
    bot.quit().await?;

    let denials = acl_denials(&redis).await?;
    assert!(
        denials.is_empty(),
        "Redis denied Telos under the documented ACL: {denials:?}"
    );
    for log in [a.log_text(), b.log_text(), gate.log_text()] {
        assert!(!log.contains("NOPERM"), "{log}");
    }
    Ok(())
}
