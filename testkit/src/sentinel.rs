//! Redis with a replica and three Sentinels on loopback, for failover tests:
//! a primary, one replica of it, and three `redis-sentinel`s monitoring it
//! as [`MASTER_NAME`] with quorum 2, each on a free port, each stopped by
//! pid on drop.
//!
//! Sentinel's timing is short so that a test's failover takes about two
//! seconds: the primary is judged down after [`DOWN_AFTER`] without an
//! answer, and a failover that stalls is tried again after twice
//! [`FAILOVER_TIMEOUT`].

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::redis::{RedisOptions, RedisServer, free_port};

/// The name the Sentinels monitor the primary under.
pub const MASTER_NAME: &str = "telos";
/// `sentinel down-after-milliseconds`.
pub const DOWN_AFTER: Duration = Duration::from_millis(1000);
/// `sentinel failover-timeout`.
pub const FAILOVER_TIMEOUT: Duration = Duration::from_millis(3000);

/// Bounds a broken install (a Sentinel that never learns of its peers),
/// not a performance claim: peers find each other within ~2 s (hello
/// messages every 2 s).
const READY_TIMEOUT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(50);
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// One `redis-sentinel` process.
#[derive(Debug)]
struct SentinelProcess {
    port: u16,
    child: Child,
}

/// A primary, a replica and three Sentinels. Which node is the primary
/// changes with each failover: ask [`SentinelCluster::primary_port`].
#[derive(Debug)]
pub struct SentinelCluster {
    /// The data nodes: the first primary, then its replica.
    nodes: Vec<RedisServer>,
    sentinels: Vec<SentinelProcess>,
    dir: PathBuf,
}

impl SentinelCluster {
    /// Starts the primary, its replica (in sync) and three Sentinels, and
    /// returns once every Sentinel knows the replica and both other
    /// Sentinels (so a failover can be voted).
    pub fn start() -> anyhow::Result<SentinelCluster> {
        let dir = std::env::temp_dir().join(format!(
            "telos-sentinel-{}-{}",
            std::process::id(),
            crate::unique()
        ));
        std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        let primary = RedisServer::start_with(RedisOptions {
            log: Some(dir.join("node-0.log")),
            ..RedisOptions::default()
        })?;
        let replica = RedisServer::start_with(RedisOptions {
            replica_of: Some(primary.port),
            log: Some(dir.join("node-1.log")),
            ..RedisOptions::default()
        })?;
        let mut cluster = SentinelCluster {
            nodes: vec![primary, replica],
            sentinels: Vec::new(),
            dir,
        };
        let (primary_port, replica_port) = (cluster.nodes[0].port, cluster.nodes[1].port);
        cluster.wait_replica_of(replica_port, primary_port, READY_TIMEOUT)?;
        for i in 0..3 {
            let sentinel = cluster.spawn_sentinel(i, primary_port)?;
            cluster.sentinels.push(sentinel);
        }
        cluster.wait_ready()?;
        Ok(cluster)
    }

    /// `redis+sentinel://` URL of the three Sentinels.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect();
        format!("redis+sentinel://{}/{MASTER_NAME}", hosts.join(","))
    }

    /// The Sentinels' ports.
    pub fn sentinel_ports(&self) -> Vec<u16> {
        self.sentinels.iter().map(|s| s.port).collect()
    }

    /// The port of the primary as the first Sentinel that answers names it.
    pub fn primary_port(&self) -> anyhow::Result<u16> {
        for sentinel in &self.sentinels {
            if let Ok(port) = master_port(sentinel.port) {
                return Ok(port);
            }
        }
        bail!("no Sentinel named a primary")
    }

    /// The data node on `port` (to kill, pause or restart it by pid).
    pub fn node(&mut self, port: u16) -> anyhow::Result<&mut RedisServer> {
        self.nodes
            .iter_mut()
            .find(|n| n.port == port)
            .with_context(|| format!("no data node on port {port}"))
    }

    /// The data nodes' ports.
    pub fn node_ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.port).collect()
    }

    /// Waits until every Sentinel names a primary other than `old` and that
    /// node answers `ROLE` as master; returns its port.
    pub fn wait_for_failover(&self, old: u16, timeout: Duration) -> anyhow::Result<u16> {
        let deadline = Instant::now() + timeout;
        loop {
            let named: Vec<Option<u16>> = self
                .sentinels
                .iter()
                .map(|s| master_port(s.port).ok())
                .collect();
            if let Some(Some(new)) = named.first()
                && *new != old
                && named.iter().all(|n| *n == Some(*new))
                && role(*new).is_ok_and(|r| r == "master")
            {
                return Ok(*new);
            }
            if Instant::now() >= deadline {
                bail!("no failover from port {old} after {timeout:?}: Sentinels name {named:?}");
            }
            std::thread::sleep(POLL);
        }
    }

    /// Waits until the node on `port` is a replica of `primary` with its
    /// link up (in sync).
    pub fn wait_replica_of(
        &self,
        port: u16,
        primary: u16,
        timeout: Duration,
    ) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let info = info_replication(port).unwrap_or_default();
            if info.contains("role:slave")
                && info.contains(&format!("master_port:{primary}"))
                && info.contains("master_link_status:up")
            {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!("node {port} is no replica of {primary} after {timeout:?}: {info}");
            }
            std::thread::sleep(POLL);
        }
    }

    fn spawn_sentinel(&self, i: usize, primary: u16) -> anyhow::Result<SentinelProcess> {
        let port = free_port();
        let conf = self.dir.join(format!("sentinel-{i}.conf"));
        // Sentinel rewrites its config file (it must be writable).
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {dir}\nlogfile {dir}/sentinel-{i}.log\n\
                 sentinel monitor {MASTER_NAME} 127.0.0.1 {primary} 2\n\
                 sentinel down-after-milliseconds {MASTER_NAME} {down}\n\
                 sentinel failover-timeout {MASTER_NAME} {failover}\n\
                 sentinel parallel-syncs {MASTER_NAME} 1\n",
                dir = self.dir.display(),
                down = DOWN_AFTER.as_millis(),
                failover = FAILOVER_TIMEOUT.as_millis(),
            ),
        )?;
        let child = Command::new("redis-sentinel")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("spawn redis-sentinel (scripts/ensure-tools redis-sentinel)")?;
        Ok(SentinelProcess { port, child })
    }

    /// Every Sentinel answers, knows the other two and the replica.
    fn wait_ready(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let mut ready = true;
            for s in &mut self.sentinels {
                if let Some(status) = s.child.try_wait()? {
                    bail!("redis-sentinel on port {} exited: {status}", s.port);
                }
                let fields = sentinel_master(s.port).unwrap_or_default();
                let field = |name: &str| {
                    fields
                        .windows(2)
                        .find(|w| w[0] == name)
                        .map(|w| w[1].clone())
                        .unwrap_or_default()
                };
                ready &= field("num-other-sentinels") == "2" && field("num-slaves") == "1";
            }
            if ready {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "Sentinels not ready after {READY_TIMEOUT:?} (logs in {})",
                    self.dir.display()
                );
            }
            std::thread::sleep(POLL);
        }
    }
}

impl Drop for SentinelCluster {
    fn drop(&mut self) {
        for s in &mut self.sentinels {
            let _ = s.child.kill();
            let _ = s.child.wait();
        }
        // The nodes stop themselves (RedisServer's Drop, by pid).
        self.nodes.clear();
        if std::env::var_os("TELOS_KEEP_SENTINEL_LOGS").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn connect(port: u16) -> anyhow::Result<redis::Connection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let conn = client.get_connection_with_timeout(PROBE_TIMEOUT)?;
    conn.set_read_timeout(Some(PROBE_TIMEOUT))?;
    Ok(conn)
}

/// `SENTINEL get-master-addr-by-name` on the Sentinel at `port`.
fn master_port(port: u16) -> anyhow::Result<u16> {
    let (_, master): (String, String) = redis::cmd("SENTINEL")
        .arg("get-master-addr-by-name")
        .arg(MASTER_NAME)
        .query(&mut connect(port)?)?;
    Ok(master.parse()?)
}

/// `SENTINEL master` as flat name/value pairs.
fn sentinel_master(port: u16) -> anyhow::Result<Vec<String>> {
    Ok(redis::cmd("SENTINEL")
        .arg("master")
        .arg(MASTER_NAME)
        .query(&mut connect(port)?)?)
}

/// The node's `ROLE` (`master`, `slave`).
pub fn role(port: u16) -> anyhow::Result<String> {
    let reply: Vec<redis::Value> = redis::cmd("ROLE").query(&mut connect(port)?)?;
    match reply.first() {
        Some(redis::Value::BulkString(b)) => Ok(String::from_utf8_lossy(b).into_owned()),
        Some(redis::Value::SimpleString(s)) => Ok(s.clone()),
        other => bail!("unexpected ROLE reply {other:?}"),
    }
}

/// `INFO replication` of the node on `port`.
pub fn info_replication(port: u16) -> anyhow::Result<String> {
    Ok(redis::cmd("INFO")
        .arg("replication")
        .query(&mut connect(port)?)?)
}
