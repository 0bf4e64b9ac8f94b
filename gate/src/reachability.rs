//! What this gate reaches, told to the shards through Redis (issue 30).
//!
//! A shard cut off from the gates but not from Redis goes on renewing its
//! leases: nobody may serve its zones, and the gate cannot reach it — its
//! players wait for the whole cut. [`crate::liveness`] only suspects a
//! shard that stopped heartbeating, and this one has not. So at every read
//! of the registry ([`crate::registry_feed`]) the gate probes every shard it
//! lists, and for one that gives no answer while another does
//! (this gate's own network is fine: it is that shard it cannot reach) it
//! says so in the shard's reachability mark
//! (`telos_redis::directory::reach`). Once a mark has stood for
//! `REACH_BOUND` the shard's leases are refused: its zones fence, go back,
//! and peers claim them; the gate then ends its links to that shard, and
//! its players resume where their zones went (the world parks them until
//! then). An answer again takes the mark back.
//!
//! A gate that reaches fewer shards than it cannot marks nothing: it is
//! the one cut off (or most of its links are), and marking would pile every
//! zone onto the few it reaches; only its own players can be helped — by
//! their reconnecting through another gate. It runs as its own task, so a
//! slow probe or a slow Redis never delays [`crate::liveness`].

use std::collections::HashSet;
use std::sync::Arc;

use telos_redis::directory::reach::REACH_BOUND;
use tokio_util::sync::CancellationToken;

use crate::metrics as m;
use crate::probe::answers;
use crate::registry::LiveShard;
use crate::registry_feed::{self, Feed};
use crate::shared::Shared;

/// Probe every listed shard at every listing of `feed` until `stop` (an
/// unreadable registry, Redis down, sends none: nothing to say, nowhere to
/// say it).
pub async fn watch(shared: Arc<Shared>, mut feed: Feed, stop: CancellationToken) {
    let mut reach = Reachability::default();
    while let Some(listing) = registry_feed::next(&mut feed, &stop).await {
        reach.look(&shared, &listing.shards).await;
    }
}

/// The shards this gate has marked unreachable, by id.
#[derive(Debug, Default)]
struct Reachability {
    marked: HashSet<String>,
}

impl Reachability {
    /// Probe every one of `listed` at once and tell the registry what this
    /// gate reaches; end the links to a shard once its mark has stood long
    /// enough that it gives its zones up.
    async fn look(&mut self, shared: &Arc<Shared>, listed: &[LiveShard]) {
        let (reached, unreached) = probe_all(shared, listed).await;
        let gone: Vec<String> = self
            .marked
            .iter()
            .filter(|id| !listed.iter().any(|s| &s.id == *id))
            .cloned()
            .collect();
        let mut reports = tokio::task::JoinSet::new();
        // Taken back: those it reaches again, and those that left the
        // registry (a field left behind must not lengthen a later run).
        for id in reached.iter().map(|s| s.id.clone()).chain(gone) {
            if self.marked.remove(&id) {
                let shared = shared.clone();
                reports.spawn(async move { take_back(&shared, &id).await });
            }
        }
        if marks_count(reached.len(), unreached.len()) {
            for shard in unreached {
                // Remembered before it is said: a lost reply is taken back
                // all the same once the shard answers.
                if self.marked.insert(shard.id.clone()) {
                    tracing::warn!(
                        shard = %shard.id,
                        addr = %shard.addr,
                        "the shard heartbeats but does not answer this gate, which reaches others; marked unreachable"
                    );
                }
                let shared = shared.clone();
                reports.spawn(async move { mark(&shared, &shard).await });
            }
        }
        while reports.join_next().await.is_some() {}
    }
}

/// Whether this gate's view may mark anyone: it reaches at least as many
/// listed shards as it cannot (so a gate whose own links are mostly cut
/// never piles every zone onto the few it reaches).
fn marks_count(reached: usize, unreached: usize) -> bool {
    reached > 0 && reached >= unreached
}

/// Probe every listed shard at once: those that answered, those that did
/// not.
async fn probe_all(shared: &Arc<Shared>, listed: &[LiveShard]) -> (Vec<LiveShard>, Vec<LiveShard>) {
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
    let (mut reached, mut unreached) = (Vec::new(), Vec::new());
    while let Some(probed) = probes.join_next().await {
        match probed {
            Ok((shard, true)) => reached.push(shard),
            Ok((shard, false)) => unreached.push(shard),
            Err(_) => {}
        }
    }
    (reached, unreached)
}

async fn take_back(shared: &Arc<Shared>, shard: &str) {
    match shared.registry.report_reach(shard, true).await {
        Ok(_) => tracing::info!(
            shard,
            "the shard answers again (or left the registry); mark taken back"
        ),
        Err(e) => {
            tracing::warn!(shard, error = %e, "taking back an unreachable mark failed; it lapses by itself")
        }
    }
}

/// Say (again) that `shard` is unreachable; once this gate has said so
/// for the bound, end its links: its leases are refused from now, and its
/// players resume where the zones go.
async fn mark(shared: &Arc<Shared>, shard: &LiveShard) {
    let held = match shared.registry.report_reach(&shard.id, false).await {
        Ok(held) => held,
        Err(e) => {
            return tracing::warn!(shard = %shard.id, error = %e, "marking a shard unreachable failed");
        }
    };
    if held < REACH_BOUND {
        return;
    }
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

#[cfg(test)]
mod tests {
    use super::marks_count;

    #[test]
    fn a_gate_that_reaches_fewer_than_it_cannot_marks_nobody() {
        assert!(marks_count(1, 1), "two shards, one cut off");
        assert!(marks_count(2, 1));
        assert!(!marks_count(1, 2), "this gate's own links are mostly cut");
        assert!(!marks_count(0, 3), "this gate reaches nothing");
        assert!(marks_count(3, 0), "nothing to mark");
    }
}
