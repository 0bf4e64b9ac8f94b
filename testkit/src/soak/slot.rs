//! One shard's place in the soak's cluster ([`ShardSlot`]): its id, its
//! proxies and its incarnations, and the process names the proxies
//! classify connections by.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::process::Proc;
use crate::proxy::{Classifier, Proxy};
use crate::redis::free_port;

/// Process name → pid of every process running now (`shard-a#2`), shared
/// with the sampler that reads their RSS.
pub type Pids = Arc<Mutex<BTreeMap<String, i32>>>;

/// Shard incarnation (`shard-a#2`) → its metrics address, for every shard
/// process running now (the sampler scrapes which zones each serves).
pub type MetricsAddrs = Arc<Mutex<BTreeMap<String, String>>>;

/// One shard's place in the cluster: its id, advertised address (its
/// front proxy), boot zones and links stay the same across restarts.
pub struct ShardSlot {
    pub id: String,
    /// The advertised address: the front proxy before its gRPC listener.
    pub addr: String,
    pub boot_zones: Vec<String>,
    /// Before the shard's gRPC listener: the gate and the peers dial this.
    pub front: Proxy,
    /// The shard's own way to Redis.
    pub redis_link: Proxy,
    /// The gRPC listener of the running incarnation (behind `front`).
    pub(super) listen: String,
    pub(super) metrics: String,
    pub(super) proc_: Option<Proc>,
    pub(super) incarnation: u32,
    /// A superseded incarnation still around (restart-paused): paused or
    /// stopping, never the one the front proxy leads to.
    pub(super) old: Option<(String, Proc)>,
    /// The log of the last superseded incarnation (kept after it exits).
    pub(super) old_log: Option<PathBuf>,
}

impl ShardSlot {
    /// `shard-a#2`.
    pub fn incarnation_name(&self) -> String {
        format!("{}#{}", self.id, self.incarnation)
    }
}

/// The process name without its incarnation: `shard-a#2` → `shard-a`.
fn base_name(name: &str) -> &str {
    name.split('#').next().unwrap_or(name)
}

/// Names a proxy's client connection by the process that opened it.
fn classifier(pids: &Pids) -> Classifier {
    let pids = pids.clone();
    Arc::new(move |client, server| {
        let now: Vec<(String, i32)> = lock(&pids)
            .iter()
            .map(|(n, p)| (base_name(n).to_string(), *p))
            .collect();
        crate::procfs::socket_owner(client, server, &now)
    })
}

/// Shard `i`'s slot (`shard-a` for 0), its proxies started, no process
/// yet. Blocks on the current runtime (call it through `block_in_place`).
pub(super) fn new_slot(
    i: usize,
    boot_zones: Vec<String>,
    redis_addr: &str,
    pids: &Pids,
) -> anyhow::Result<ShardSlot> {
    let rt = tokio::runtime::Handle::current();
    let listen = format!("127.0.0.1:{}", free_port());
    let front = rt.block_on(Proxy::start("127.0.0.1:0", &listen, Some(classifier(pids))))?;
    let redis_link = rt.block_on(Proxy::start("127.0.0.1:0", redis_addr, None))?;
    Ok(ShardSlot {
        id: format!("shard-{}", (b'a' + i as u8) as char),
        addr: front.addr.to_string(),
        boot_zones,
        front,
        redis_link,
        listen,
        metrics: format!("127.0.0.1:{}", free_port()),
        proc_: None,
        incarnation: 0,
        old: None,
        old_log: None,
    })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
