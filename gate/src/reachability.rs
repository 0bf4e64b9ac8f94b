//! What this gate reaches, told to the shards through Redis (issue 30).
//!
//! A shard cut off from the gates but not from Redis goes on renewing its
//! leases: nobody may serve its zones, and the gate cannot reach it — its
//! players wait for the whole cut. [`crate::liveness`] only suspects a
//! shard that stopped heartbeating, and this one has not. So every
//! [`crate::liveness::WATCH_PERIOD`] the gate probes every shard the
//! registry lists, and for one that gives no answer while another does
//! (this gate's own network is fine: it is that shard it cannot reach) it
//! says so in the shard's reachability mark
//! (`telos_redis::directory::reach`). Once a mark has stood for
//! `REACH_BOUND` the shard's leases are refused: its zones fence, go back,
//! and peers claim them; the gate then ends its links to that shard, and
//! its players resume where their zones went (the world parks them until
//! then). An answer again takes the mark back.
//!
//! A gate that reaches no shard at all marks nothing: it is the one cut
//! off, and only its own players can be helped — by their reconnecting
//! through another gate.

use std::collections::HashSet;
use std::sync::Arc;

use telos_redis::directory::reach::REACH_BOUND;

use crate::metrics as m;
use crate::probe::answers;
use crate::registry::LiveShard;
use crate::shared::Shared;

/// The shards this gate has marked unreachable, by id.
#[derive(Debug, Default)]
pub struct Reachability {
    marked: HashSet<String>,
}

impl Reachability {
    /// Probe every one of `listed` at once and tell the registry what this
    /// gate reaches; end the links to a shard once its mark has stood long
    /// enough that it gives its zones up.
    pub async fn look(&mut self, shared: &Arc<Shared>, listed: &[LiveShard]) {
        let mut probes = tokio::task::JoinSet::new();
        for shard in listed {
            let channel = shared.pool.channel(&shard.addr, 0);
            let shard = shard.clone();
            probes.spawn(async move {
                let answered = match channel {
                    Ok(channel) => answers(channel).await,
                    Err(_) => false,
                };
                (shard, answered)
            });
        }
        let mut reached = Vec::new();
        let mut unreached = Vec::new();
        while let Some(probed) = probes.join_next().await {
            match probed {
                Ok((shard, true)) => reached.push(shard),
                Ok((shard, false)) => unreached.push(shard),
                Err(_) => {}
            }
        }
        for shard in &reached {
            self.reached(shared, shard).await;
        }
        // This gate reaches nothing: its own link is what is cut.
        if reached.is_empty() {
            return;
        }
        for shard in &unreached {
            self.unreached(shared, shard).await;
        }
        // A shard gone from the registry needs no mark of ours.
        let listed: HashSet<&str> = listed.iter().map(|s| s.id.as_str()).collect();
        self.marked.retain(|id| listed.contains(id.as_str()));
    }

    async fn reached(&mut self, shared: &Arc<Shared>, shard: &LiveShard) {
        if !self.marked.contains(&shard.id) {
            return;
        }
        match shared.registry.report_reach(&shard.id, true).await {
            Ok(_) => {
                self.marked.remove(&shard.id);
                tracing::info!(shard = %shard.id, addr = %shard.addr, "the shard answers again");
            }
            Err(e) => {
                tracing::warn!(shard = %shard.id, error = %e, "taking back an unreachable mark failed; it lapses by itself")
            }
        }
    }

    async fn unreached(&mut self, shared: &Arc<Shared>, shard: &LiveShard) {
        let held = match shared.registry.report_reach(&shard.id, false).await {
            Ok(held) => held,
            Err(e) => {
                return tracing::warn!(shard = %shard.id, error = %e, "marking a shard unreachable failed");
            }
        };
        if self.marked.insert(shard.id.clone()) {
            tracing::warn!(
                shard = %shard.id,
                addr = %shard.addr,
                "the shard heartbeats but does not answer this gate, which reaches others; marked unreachable"
            );
        }
        if held < REACH_BOUND {
            return;
        }
        // Its leases are refused from now: its players resume where the
        // zones go.
        shared.pool.evict(&shard.addr);
        let links = shared.pool.liveness().condemn(&shard.addr);
        if links > 0 {
            metrics::counter!(m::UNREACHABLE_SHARDS_TOTAL).increment(1);
            tracing::warn!(
                shard = %shard.id,
                addr = %shard.addr,
                links,
                "the shard has been unreachable from this gate for {} s: it gives its zones up; resuming its players where they go",
                held.as_secs()
            );
        }
    }
}
