//! Login storms against a real shard (issue 11, defect 6): a real
//! `redis-server`, one real `telos-world` serving every starter zone and a
//! real `telos-gate` (keyed: mutual TLS between them), stormed by [`telos_testkit::storm`] clients.
//!
//! - a storm of creations and concurrent wrong passwords leaves the shard's
//!   thread count and memory bounded (each login is a 19 MiB argon2 hash;
//!   unbounded, every concurrent login had a blocking thread and a buffer
//!   of its own, and the buffers stayed resident afterwards);
//! - a burst beyond the hashing queue is answered with the busy line, not a
//!   hang and not "Login failed", and the busy answer costs the player
//!   neither a per-connection failure nor a token of the address's bucket.
//!
//! Memory and threads are read from `/proc/<pid>/status` (VmHWM is the peak
//! since start, so no sampling can miss it); nothing here is timed.

use telos_testkit::RedisServer;
use telos_testkit::bot::LoginReply;
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{Proc, WorldOpts, start_keyed_gate, start_world};
use telos_testkit::procfs;
use telos_testkit::storm::{
    BUSY_PREFIX, GATE_STORM_FLAGS, WORLD_STORM_FLAGS, WRONG_PASSWORD, create_and_quit, name,
    wrong_login_burst, wrong_logins,
};
use telos_testkit::world::starter_zones;

const PASSWORD: &str = "correct horse";
/// One argon2id hash's block memory with the parameters the world uses.
const HASH_MIB: u64 = 19;
/// Characters created by as many clients at once.
const CREATIONS: usize = 48;
/// Clients trying wrong passwords at once, and their attempts in all.
const WRONG_CLIENTS: usize = 64;
const WRONG_ATTEMPTS: usize = 128;
/// What the shard may add to its threads during the storm besides one
/// hashing thread per core: tokio's own workers are there before it; this
/// is room for a few other blocking tasks. Unbounded hashing added one
/// thread per concurrent login (~64 here).
const EXTRA_THREADS: u64 = 8;
/// What the shard's peak RSS may exceed its RSS before the storm by,
/// besides one hash buffer per core: sessions, gRPC streams and allocator
/// slack, with a wide margin. Unbounded hashing peaked at one 19 MiB buffer
/// per concurrent login (over 1 GiB here) and kept most of it.
const SLACK_MIB: u64 = 96;

fn cores() -> u64 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u64)
}

fn world_with(redis: &RedisServer, keys: &TempKeys, extra: &[&str]) -> anyhow::Result<Proc> {
    let zones = starter_zones();
    let zones: Vec<&str> = zones.iter().map(String::as_str).collect();
    let mut opts = WorldOpts::new("storm", &redis.url, &zones);
    opts.extra = WORLD_STORM_FLAGS
        .iter()
        .chain(extra)
        .map(|s| s.to_string())
        .collect();
    let opts = opts.keyed(keys.path());
    start_world(opts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_storm_keeps_the_shards_threads_and_memory_bounded() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let world = world_with(&redis, &keys, &[])?;
    let gate = start_keyed_gate(&redis.url, keys.path(), &GATE_STORM_FLAGS)?;
    // One login first: the shard's steady state before the storm (channel
    // to Redis, the zones, one hash done).
    let calm = name("Calm", 0);
    create_and_quit(&gate.addr, std::slice::from_ref(&calm), PASSWORD, 1).await?;
    let before = procfs::status(world.pid())?;

    let names: Vec<String> = (0..CREATIONS).map(|i| name("Storm", i)).collect();
    let (created, wrong) = tokio::join!(
        create_and_quit(&gate.addr, &names, PASSWORD, CREATIONS),
        wrong_logins(&gate.addr, &calm, WRONG_ATTEMPTS, WRONG_CLIENTS),
    );
    let (created, wrong) = (created?, wrong?);
    assert_eq!(created.welcomed, CREATIONS as u64, "{created:?}");
    assert_eq!(wrong.failed, WRONG_ATTEMPTS as u64, "{wrong:?}");
    let after = procfs::status(world.pid())?;
    eprintln!("shard before the storm: {before:?}; after: {after:?}");

    let thread_bound = before.threads + cores() + EXTRA_THREADS;
    assert!(
        after.threads <= thread_bound,
        "the shard grew from {} to {} threads (bound {thread_bound}) under {} concurrent logins",
        before.threads,
        after.threads,
        CREATIONS + WRONG_CLIENTS
    );
    let peak_bound_mib = before.rss_mib() as u64 + cores() * HASH_MIB + SLACK_MIB;
    assert!(
        after.peak_rss_mib() as u64 <= peak_bound_mib,
        "the shard's RSS peaked at {:.0} MiB (bound {peak_bound_mib} MiB; {:.0} MiB before the storm, {:.0} MiB after it)",
        after.peak_rss_mib(),
        before.rss_mib(),
        after.rss_mib()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_beyond_the_queue_is_told_busy_and_keeps_its_place() -> anyhow::Result<()> {
    /// Connections that send a wrong login at the same moment: far more
    /// than the workers of any test machine, with no queue behind them.
    const BURST: usize = 32;
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let _world = world_with(&redis, &keys, &["--login-hash-queue", "0"])?;
    // One failure ends a connection, and the address has one token more
    // than the burst: a busy answer that counted as a failure would close
    // its connection, and one that spent a token would leave the retries
    // below rate limited.
    let burst_tokens = (BURST + 1).to_string();
    let gate = start_keyed_gate(
        &redis.url,
        keys.path(),
        &[
            "--login-max-failures",
            "1",
            "--login-ip-burst",
            &burst_tokens,
            "--login-ip-per-sec",
            "0.001",
        ],
    )?;
    let target = name("Target", 0);
    create_and_quit(&gate.addr, std::slice::from_ref(&target), PASSWORD, 1).await?;

    let (tally, bots) = wrong_login_burst(&gate.addr, &target, BURST).await?;
    eprintln!("a burst of {BURST} wrong logins, no queue: {tally:?}");
    // Every login was answered (none hung): failed, or busy.
    assert_eq!(tally.answers(), BURST as u64, "{tally:?}");
    assert_eq!(tally.welcomed, 0, "{tally:?}");
    assert!(tally.failed >= 1, "no worker hashed: {tally:?}");
    assert!(
        tally.busy >= 2,
        "a burst of {BURST} with no queue: {tally:?}"
    );

    // The busy ones are still at the login prompt, with their failure
    // budget and the address's tokens intact: one at a time, each wrong
    // password is now checked and refused as such.
    let mut retried = 0;
    for mut bot in bots {
        let transcript = bot.transcript();
        if !transcript.lines().any(|l| l.starts_with(BUSY_PREFIX)) {
            continue;
        }
        assert!(
            !transcript.contains("Login failed"),
            "a busy answer said Login failed: {transcript}"
        );
        match bot.login("connect", &target, WRONG_PASSWORD).await? {
            LoginReply::Refused(line) => assert_eq!(line, "Login failed.", "{transcript}"),
            LoginReply::Welcome { .. } => anyhow::bail!("a wrong password was let in"),
        }
        retried += 1;
    }
    assert_eq!(retried, tally.busy);
    Ok(())
}
