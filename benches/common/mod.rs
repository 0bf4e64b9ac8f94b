//! What the benches that run a world and a gate share (`mod common;` in
//! each): a keyed world with the storm flags, a keyed gate from a chosen
//! binary, logging many players in a bounded number at a time, and waiting
//! until a gate holds no player. Not a bench itself: cargo builds only
//! `benches/*.rs` (and `benches/*/main.rs`) as benches.

#![allow(dead_code)]

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use telos_testkit::RedisServer;
use telos_testkit::bot::Bot;
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{GATE_TEST_EDGE_ENV, Proc, WorldOpts, repo_root, start_world};
use telos_testkit::storm::{GATE_STORM_FLAGS, WORLD_STORM_FLAGS};
use telos_testkit::world::starter_zones;

/// A private Redis and one keyed world serving every starter zone, its
/// login limits lifted (every bench client is 127.0.0.1).
pub struct World {
    // Field order is drop order: the world first, Redis last.
    pub world: Proc,
    pub keys: TempKeys,
    pub redis: RedisServer,
}

impl World {
    /// Started with the storm flags and `extra`.
    pub fn start(extra: &[&str]) -> anyhow::Result<World> {
        let redis = RedisServer::start()?;
        let zones = starter_zones();
        let zone_refs: Vec<&str> = zones.iter().map(String::as_str).collect();
        let keys = TempKeys::generate()?;
        let mut opts = WorldOpts::new("bench", &redis.url, &zone_refs).keyed(keys.path());
        opts.extra
            .extend(WORLD_STORM_FLAGS.iter().chain(extra).map(|s| s.to_string()));
        let world = start_world(opts)?;
        Ok(World { world, keys, redis })
    }

    /// A keyed gate from `program` in front of this world, with the test
    /// edge limits, the storm flags and `extra`; logging at `warn`.
    pub fn gate(&self, program: &Path, extra: &[&str]) -> anyhow::Result<Proc> {
        self.gate_with_env(program, extra, &[])
    }

    /// [`World::gate`] with `env` set for the gate too.
    pub fn gate_with_env(
        &self,
        program: &Path,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Proc> {
        let mut cmd = std::process::Command::new(program);
        cmd.current_dir(repo_root())
            .env("RUST_LOG", "warn")
            .envs(GATE_TEST_EDGE_ENV)
            .envs(env.iter().copied())
            .args(["--listen", "127.0.0.1:0", "--redis-url", &self.redis.url])
            .arg("--keys")
            .arg(self.keys.path())
            .args(GATE_STORM_FLAGS)
            .args(extra);
        Proc::spawn("gate", cmd)
    }
}

/// `f` for every name, at most `at_once` at a time; the results in the
/// order of `names`.
pub async fn many<T, F, Fut>(names: &[String], at_once: usize, f: F) -> anyhow::Result<Vec<T>>
where
    T: Send + 'static,
    F: Fn(String) -> Fut,
    Fut: Future<Output = anyhow::Result<T>> + Send + 'static,
{
    let sem = Arc::new(tokio::sync::Semaphore::new(at_once));
    let mut tasks = Vec::with_capacity(names.len());
    for n in names {
        let (fut, sem) = (f(n.clone()), sem.clone());
        tasks.push(tokio::spawn(async move {
            let _permit = sem.acquire_owned().await?;
            fut.await
        }));
    }
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        out.push(t.await??);
    }
    Ok(out)
}

/// Every name logged in through the telnet port `gate` (one `look`
/// answered each), `at_once` logins at a time: each is a password hash in
/// the world.
pub async fn log_in_all(
    gate: &str,
    names: &[String],
    password: &str,
    at_once: usize,
) -> anyhow::Result<Vec<Bot>> {
    many(names, at_once, |n| {
        let (gate, password) = (gate.to_string(), password.to_string());
        async move {
            let mut bot = Bot::connect_at(&gate, &n, &password).await?;
            bot.command("look").await?;
            anyhow::Ok(bot)
        }
    })
    .await
}

/// Until the gate holds no player connection: its open file count has
/// stopped falling and is what a gate with no players holds (sockets close
/// within the gate's linger). Bounded by a minute without progress.
pub async fn wait_closed(gate: &Proc) -> anyhow::Result<()> {
    let fds = || std::fs::read_dir(format!("/proc/{}/fd", gate.pid())).map(|d| d.count());
    let mut last = fds()?;
    let mut still = 0;
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = fds()?;
        if now == last && now < 64 {
            return Ok(());
        }
        still = if now < last { 0 } else { still + 1 };
        anyhow::ensure!(still < 300, "the gate still holds {now} files");
        last = now;
    }
}

/// A positive count from the environment variable `name`, else `default`.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(default)
}
