//! The cluster driver: a private Redis with its append-only file, the
//! keyed world shards splitting the starter world, and the gate, each
//! startable, killable, pausable and restartable on the same address, with
//! every incarnation's log kept in the run directory.
//!
//! Every link goes through a fault-injecting [`Proxy`]: each shard dials
//! Redis through a proxy of its own, and each shard's gRPC listener sits
//! behind a proxy whose address the shard advertises (`--advertise-addr`),
//! so the gate and the peers dial the proxy. That proxy names each client
//! connection by the process that opened it (from `/proc`), so a rule can
//! cut the gate from one shard, or one shard from its peers, and nothing
//! else.
//!
//! With the `failover` fault Redis is a primary, a replica and three
//! Sentinels instead ([`SentinelRedis`]), and every process finds the
//! primary through the Sentinels.
//!
//! Everything here blocks (process spawns wait for readiness); the fault
//! driver calls it through `block_in_place`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context, bail};

use crate::cli::{Finished, clean_command, run_to_exit, telosctl};
use crate::process::{Proc, keyed_gate_command, keyed_world_command};
use crate::redis::{RedisOptions, RedisServer, free_port};
use crate::world::starter_zones;

use super::config::GATE_LOGIN_BURST;
use super::sentinel_redis::SentinelRedis;
use super::slot::new_slot;
pub use super::slot::{MetricsAddrs, Pids, ShardSlot};

use super::history::{ProcessEnd, StatusView};
use super::status::parse_status;

mod superseded;

/// `telosctl transfer --wait` gives a transfer this many seconds: far more
/// than one takes (well under a second), so only a stuck one fails.
const TRANSFER_WAIT_SECS: &str = "30";
/// Starts of a shard on fresh ports when a port picked for it was taken.
const BIND_ATTEMPTS: u32 = 5;
/// How a process says a port it was given is taken (the OS's words).
const PORT_TAKEN: &str = "Address already in use";
/// A `telosctl transfer --wait` run is killed after this.
const TRANSFER_EXIT_TIMEOUT: Duration = Duration::from_secs(40);

pub struct Cluster {
    pub run_dir: PathBuf,
    pub redis_url: String,
    pub gate_addr: String,
    pub zones: Vec<String>,
    pub shards: Vec<ShardSlot>,
    /// The one Redis (append-only file); `None` behind Sentinel.
    redis: Option<RedisServer>,
    /// Redis behind Sentinel (the `failover` fault), and the soak's own way
    /// to its primary.
    sentinel: Option<SentinelRedis>,
    redis_incarnation: u32,
    keys: PathBuf,
    gate: Option<Proc>,
    gate_incarnation: u32,
    log_level: String,
    pids: Pids,
    metrics: MetricsAddrs,
}

impl Cluster {
    /// Redis (AOF; behind Sentinel with a replica when `sentinel`), keys,
    /// `shards` keyed shards splitting the starter zones round robin, and
    /// the gate, all ready.
    pub fn start(
        run_dir: &Path,
        shards: u32,
        log_level: &str,
        sentinel: bool,
    ) -> anyhow::Result<Cluster> {
        let logs = run_dir.join("logs");
        std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
        let (redis, sentinel) = if sentinel {
            (None, Some(SentinelRedis::start()?))
        } else {
            let redis = RedisServer::start_with(RedisOptions {
                aof: true,
                dir: Some(run_dir.join("redis")),
                log: Some(logs.join("redis.log")),
                ..RedisOptions::default()
            })?;
            (Some(redis), None)
        };
        let (redis_url, redis_port) = match (&redis, &sentinel) {
            (Some(r), _) => (r.url.clone(), r.port),
            (None, Some(s)) => (s.url(), s.primary_port()?),
            (None, None) => unreachable!("one or the other"),
        };
        let keys = run_dir.join("keys");
        crate::keys::generate(&keys)?;
        let zones = starter_zones();
        let n = shards as usize;
        let pids = Pids::default();
        let redis_addr = format!("127.0.0.1:{redis_port}");
        let mut slots = Vec::new();
        for i in 0..n {
            let boot_zones = zones.iter().skip(i).step_by(n).cloned().collect();
            slots.push(new_slot(i, boot_zones, &redis_addr, &pids)?);
        }
        let mut cluster = Cluster {
            run_dir: run_dir.to_path_buf(),
            redis_url,
            gate_addr: format!("127.0.0.1:{}", free_port()),
            zones,
            shards: slots,
            redis,
            sentinel,
            redis_incarnation: 1,
            keys,
            gate: None,
            gate_incarnation: 0,
            log_level: log_level.to_string(),
            pids,
            metrics: MetricsAddrs::default(),
        };
        cluster.publish_redis_pid();
        for i in 0..n {
            cluster.start_shard(i)?;
        }
        cluster.start_gate()?;
        Ok(cluster)
    }

    /// Where the soak's own reads go: the one Redis, or behind Sentinel a
    /// proxy to the current primary.
    pub fn probe_url(&self) -> String {
        match &self.sentinel {
            Some(s) => s.probe_url(),
            None => self.redis_url.clone(),
        }
    }

    /// Redis behind Sentinel (the `failover` fault's).
    pub fn sentinel_mut(&mut self) -> anyhow::Result<&mut SentinelRedis> {
        self.sentinel
            .as_mut()
            .context("the failover fault needs Redis behind Sentinel")
    }

    pub fn pids(&self) -> Pids {
        self.pids.clone()
    }

    pub fn logs_dir(&self) -> PathBuf {
        self.run_dir.join("logs")
    }

    pub fn shard_index(&self, id: &str) -> Option<usize> {
        self.shards.iter().position(|s| s.id == id)
    }

    pub fn metrics_addrs(&self) -> MetricsAddrs {
        self.metrics.clone()
    }

    /// A new shard (the next id, `boot_zones` in its `--zones`) joins the
    /// running cluster; returns its index.
    pub fn add_shard(&mut self, boot_zones: Vec<String>) -> anyhow::Result<usize> {
        let i = self.shards.len();
        anyhow::ensure!(i < 26, "no shard id left (shard-a to shard-z are taken)");
        let redis_addr = match (&self.redis, &self.sentinel) {
            (Some(r), _) => format!("127.0.0.1:{}", r.port),
            // Behind Sentinel the link is not used.
            (None, Some(s)) => format!("127.0.0.1:{}", s.primary_port()?),
            (None, None) => unreachable!("one or the other"),
        };
        let slot = new_slot(i, boot_zones, &redis_addr, &self.pids)?;
        self.shards.push(slot);
        self.start_shard(i)?;
        Ok(i)
    }

    /// Start (or restart) shard `i` behind its front proxy, dialling Redis
    /// through its own link.
    pub fn start_shard(&mut self, i: usize) -> anyhow::Result<()> {
        let proc_ = self.spawn_shard(i)?;
        self.shards[i].proc_ = Some(proc_);
        Ok(())
    }

    /// A new incarnation of shard `i` on its current listen and metrics
    /// addresses, registered under its name. Ports are picked free and
    /// bound later by the shard: on a shared machine another process can
    /// take one meanwhile (overlap seed 749446916: `/metrics` `Address
    /// already in use`, the run could not be made). Such a start is made
    /// again on fresh ports (the front proxy leads to the new listener;
    /// the sampler scrapes the new metrics address).
    fn spawn_shard(&mut self, i: usize) -> anyhow::Result<Proc> {
        let mut attempt = 1;
        loop {
            match self.spawn_shard_once(i) {
                Err(e) if attempt < BIND_ATTEMPTS && format!("{e:#}").contains(PORT_TAKEN) => {
                    let name = self.shards[i].incarnation_name();
                    eprintln!(
                        "{name}: a port picked for it was taken meanwhile; starting it on fresh ports"
                    );
                    self.forget(&name);
                    let slot = &mut self.shards[i];
                    slot.listen = format!("127.0.0.1:{}", free_port());
                    slot.metrics = format!("127.0.0.1:{}", free_port());
                    slot.front.set_upstream(&slot.listen);
                    attempt += 1;
                }
                r => return r,
            }
        }
    }

    fn spawn_shard_once(&mut self, i: usize) -> anyhow::Result<Proc> {
        let slot = &mut self.shards[i];
        slot.incarnation += 1;
        let name = slot.incarnation_name();
        // Behind Sentinel a shard finds the primary itself (its Redis link
        // proxy is not used).
        let url = match &self.sentinel {
            Some(s) => s.url(),
            None => format!("redis://{}", slot.redis_link.addr),
        };
        let extra = [
            "--advertise-addr",
            slot.addr.as_str(),
            "--metrics-listen",
            slot.metrics.as_str(),
        ];
        let cmd = keyed_world_command(
            &slot.id,
            &url,
            &slot.boot_zones,
            &self.keys,
            Some(&slot.listen),
            &extra,
        );
        let log = self
            .run_dir
            .join("logs")
            .join(format!("{}.{}.log", slot.id, slot.incarnation));
        let metrics = slot.metrics.clone();
        let proc_ = Proc::spawn_logging_to(&name, self.configure(cmd), log)?;
        lock(&self.pids).insert(name.clone(), proc_.pid());
        lock(&self.metrics).insert(name, metrics);
        Ok(proc_)
    }

    fn forget(&self, name: &str) {
        lock(&self.pids).remove(name);
        lock(&self.metrics).remove(name);
    }

    pub fn shard_pid(&self, i: usize) -> Option<i32> {
        self.shards[i].proc_.as_ref().map(Proc::pid)
    }

    /// Send `sig` to shard `i` (SIGTERM, SIGSTOP, SIGCONT).
    pub fn signal_shard(&self, i: usize, sig: i32) {
        if let Some(p) = &self.shards[i].proc_ {
            p.signal(sig);
        }
    }

    /// Shard `i`'s exit status once it has exited (reaped, forgotten).
    pub fn shard_exit(&mut self, i: usize) -> anyhow::Result<Option<ExitStatus>> {
        let slot = &mut self.shards[i];
        let Some(p) = slot.proc_.as_mut() else {
            return Ok(None);
        };
        let status = p.child.try_wait()?;
        if status.is_some() {
            slot.proc_ = None;
            let name = slot.incarnation_name();
            self.forget(&name);
        }
        Ok(status)
    }

    /// SIGKILL shard `i` and reap it.
    pub fn kill_shard(&mut self, i: usize) {
        let slot = &mut self.shards[i];
        if let Some(mut p) = slot.proc_.take() {
            p.kill();
            let name = slot.incarnation_name();
            self.forget(&name);
        }
    }

    /// The text of shard `i`'s current (or last) incarnation's log.
    pub fn shard_log(&self, i: usize) -> String {
        let slot = &self.shards[i];
        let path = self
            .logs_dir()
            .join(format!("{}.{}.log", slot.id, slot.incarnation));
        std::fs::read_to_string(path).unwrap_or_default()
    }

    /// The text of the gate's current (or last) incarnation's log.
    pub fn gate_log(&self) -> String {
        let path = self
            .logs_dir()
            .join(format!("gate.{}.log", self.gate_incarnation));
        std::fs::read_to_string(path).unwrap_or_default()
    }

    /// Start (or restart) the gate on its pinned address, dialling the
    /// keyed shards with mutual TLS (its gate certificate).
    pub fn start_gate(&mut self) -> anyhow::Result<()> {
        self.gate_incarnation += 1;
        let burst = GATE_LOGIN_BURST.to_string();
        let extra = ["--login-ip-burst", &burst, "--login-ip-per-sec", &burst];
        let cmd = keyed_gate_command(&self.gate_addr, &self.redis_url, &self.keys, &extra);
        let name = format!("gate#{}", self.gate_incarnation);
        let log = self
            .logs_dir()
            .join(format!("gate.{}.log", self.gate_incarnation));
        let proc_ = Proc::spawn_logging_to(&name, self.configure(cmd), log)?;
        lock(&self.pids).insert(name, proc_.pid());
        self.gate = Some(proc_);
        Ok(())
    }

    /// SIGKILL the gate and reap it.
    pub fn kill_gate(&mut self) {
        if let Some(mut p) = self.gate.take() {
            p.kill();
            lock(&self.pids).remove(&format!("gate#{}", self.gate_incarnation));
        }
    }

    /// SIGKILL Redis (its AOF has every write it acknowledged).
    pub fn kill_redis(&mut self) -> anyhow::Result<()> {
        self.redis
            .as_mut()
            .context("the redis fault needs the one Redis, not Sentinel")?
            .kill();
        lock(&self.pids).remove(&format!("redis#{}", self.redis_incarnation));
        Ok(())
    }

    /// Start Redis again on the same port from the same folder.
    pub fn restart_redis(&mut self) -> anyhow::Result<()> {
        self.redis
            .as_mut()
            .context("the redis fault needs the one Redis, not Sentinel")?
            .restart()?;
        self.redis_incarnation += 1;
        self.publish_redis_pid();
        Ok(())
    }

    fn publish_redis_pid(&self) {
        if let Some(redis) = &self.redis {
            let pid = i32::try_from(redis.pid()).unwrap_or(-1);
            lock(&self.pids).insert(format!("redis#{}", self.redis_incarnation), pid);
        }
    }

    /// `telosctl transfer ZONE --to SHARD --wait`.
    pub fn transfer(&self, zone: &str, to: &str) -> anyhow::Result<Finished> {
        let mut cmd = clean_command("telosctl");
        cmd.arg("--redis-url").arg(&self.redis_url).args([
            "transfer",
            zone,
            "--to",
            to,
            "--wait",
            TRANSFER_WAIT_SECS,
        ]);
        run_to_exit("telosctl-transfer", cmd, TRANSFER_EXIT_TIMEOUT)
    }

    /// `telosctl status --json`, parsed.
    pub fn status(&self) -> anyhow::Result<StatusView> {
        let done = telosctl(&self.redis_url, &["status", "--json"])?;
        if !done.success() {
            bail!("telosctl status failed: {}", done.stderr.trim());
        }
        parse_status(&done.stdout)
    }

    /// Every process that should be running, and whether it is.
    pub fn processes_end(&mut self) -> Vec<ProcessEnd> {
        let mut out = Vec::new();
        for slot in &mut self.shards {
            let name = slot.incarnation_name();
            out.push(match slot.proc_.as_mut() {
                Some(p) => ProcessEnd {
                    name,
                    pid: p.pid(),
                    alive: matches!(p.child.try_wait(), Ok(None)),
                },
                None => ProcessEnd {
                    name,
                    pid: -1,
                    alive: false,
                },
            });
        }
        let gate = format!("gate#{}", self.gate_incarnation);
        out.push(match self.gate.as_mut() {
            Some(p) => ProcessEnd {
                name: gate,
                pid: p.pid(),
                alive: matches!(p.child.try_wait(), Ok(None)),
            },
            None => ProcessEnd {
                name: gate,
                pid: -1,
                alive: false,
            },
        });
        if let Some(redis) = &mut self.redis {
            out.push(ProcessEnd {
                name: format!("redis#{}", self.redis_incarnation),
                pid: i32::try_from(redis.pid()).unwrap_or(-1),
                alive: redis.is_running() && redis.is_ready(),
            });
        }
        out
    }

    /// The log level, and no `TELOS_*` setting of the soak's own
    /// environment: only the flags configure the processes.
    fn configure(&self, mut cmd: Command) -> Command {
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("TELOS_") {
                cmd.env_remove(key);
            }
        }
        cmd.env("RUST_LOG", &self.log_level);
        cmd
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
