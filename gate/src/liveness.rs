//! Noticing a shard that stopped answering (issue 11, defect 7), and
//! telling the shards which of them this gate reaches
//! ([`crate::reachability`], issue 30: a shard cut off from the gates but
//! not from Redis still heartbeats, so it is never a suspect here).
//!
//! A hung shard (SIGSTOP, a wedged host) keeps its TCP connections open, so
//! its players' streams neither end nor fail; the HTTP/2 keepalive
//! (`upstream_keepalive`, 10 s ping + 10 s timeout) ends them only after
//! ~20 s, while its peers serve its zones after its leases lapse (lease TTL
//! 6 s + up to one orphan-loop period): players stalled twice as long as
//! their zones. The gate now watches the shards it has links to:
//!
//! 1. At every read of the registry ([`crate::registry_feed`], every
//!    [`WATCH_PERIOD`]). A shard still
//!    heartbeating (listed, whatever its state: a draining shard is busy,
//!    not hung) is fine. A shard with links that is *not* listed has not
//!    heartbeated for a presence TTL (3 s): suspect.
//!    An address where a newer process of the shard now publishes than
//!    the one last seen there (`LiveShard::incarnation`) is not probed
//!    but condemned at once: a replacement started under the same id and
//!    address while its predecessor is only paused keeps the entry listed,
//!    the gate's links may still reach the predecessor, and a probe could
//!    reach either process behind the one address (issue 17).
//! 2. A suspect is probed on the very HTTP/2 connection its players use: one
//!    gRPC health check ([`HEALTH_CHECK`](crate::probe::HEALTH_CHECK); any gRPC answer, `Unimplemented`
//!    included, proves the process and the connection alive). Only a probe
//!    with no answer in [`PROBE_TIMEOUT`](crate::probe::PROBE_TIMEOUT) condemns the shard.
//! 3. A condemned shard's links end at once: each session resumes
//!    elsewhere, the world parks it until the zone is served again (or
//!    redirects it there), and the gate replays from the durable watermark.
//!    Its pooled connection is dropped, so a later dial starts fresh.
//!
//! Why not tear down on registry absence alone, or on a short keepalive: a
//! Redis restart empties the registry at once (every shard would be
//! suspect), and a loaded machine delays heartbeats and pings alike. Both
//! are answered by the probe: a live shard answers it in milliseconds. A
//! registry that cannot be read says nothing, and nothing is probed. A
//! false positive costs a resume and never input: the resume replays from
//! the world's durable watermark and the new owner epoch fences the old
//! session's saves.
//!
//! Timing with the defaults: the registry entry lapses 2–3 s after the
//! hang, is seen within a [`WATCH_PERIOD`], and the probe fails after
//! [`PROBE_TIMEOUT`](crate::probe::PROBE_TIMEOUT): the players are resuming within ~5 s, before the
//! peers can serve the zone (its lease outlives the hang by 4–6 s), so
//! they wait in the world's park and get in as soon as it is served.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

use crate::metrics as m;
use crate::probe::answers;
use crate::registry::LiveShard;
use crate::registry_feed::{self, Feed};
use crate::shared::Shared;

pub use crate::registry_feed::WATCH_PERIOD;

/// Watch the shards the gate has links to, at every listing of `feed`,
/// until `stop`; see the module docs.
pub async fn watch_shards(shared: Arc<Shared>, mut feed: Feed, stop: CancellationToken) {
    let liveness = shared.pool.liveness();
    // The process last seen publishing at each address, kept current while
    // no link is in use too: a link made while the gate has no view of the
    // registry yet (its first read after a quiet spell) could otherwise sit
    // on a paused predecessor whose replacement is the first process that
    // read ever saw, and never be condemned.
    let mut incarnations: HashMap<String, u64> = HashMap::new();
    while let Some(listing) = registry_feed::next(&mut feed, &stop).await {
        let replaced = replaced_at(&mut incarnations, &listing.shards);
        let read_at = listing.read_at;
        // Only links the read could know of: one made since may be to a
        // shard that registered after it (a redirect's target), and must
        // not be suspected for missing from an older listing.
        let in_use = liveness.in_use_before(read_at);
        if in_use.is_empty() {
            continue;
        }
        let listed: HashSet<&str> = listing.shards.iter().map(|s| s.addr.as_str()).collect();
        // Not probed: behind one address some connections reach the new
        // process (it answers) and the links may sit on the old one. Every
        // link made before this read may reach the predecessor (the
        // replacement published since the last read, and a link made just
        // before it could have been made to either); they end. The old
        // process is paused, superseded or dead; a link already on the new
        // one costs a resume, never input.
        for addr in in_use.iter().filter(|a| replaced.contains(*a)) {
            let links = liveness.condemn_older(addr, read_at);
            if links == 0 {
                continue;
            }
            shared.pool.evict(addr);
            tracing::warn!(
                addr,
                links,
                "a newer process of the shard publishes at this address; resuming its players there"
            );
        }
        let suspects: Vec<String> = in_use
            .into_iter()
            .filter(|a| !listed.contains(a.as_str()) && !replaced.contains(a))
            .collect();
        probe_suspects(&shared, suspects).await;
    }
}

/// Probe every suspect at once (after a Redis restart every shard is a
/// suspect) and condemn the links of each that does not answer.
async fn probe_suspects(shared: &Arc<Shared>, suspects: Vec<String>) {
    let liveness = shared.pool.liveness();
    let mut probes = tokio::task::JoinSet::new();
    for addr in suspects {
        // Any one connection: a hung shard answers on none.
        let channel = shared.pool.channel(&addr, 0);
        probes.spawn(async move {
            let answered = match channel {
                Ok(channel) => answers(channel).await,
                Err(_) => false,
            };
            (addr, answered)
        });
    }
    while let Some(probed) = probes.join_next().await {
        let Ok((addr, answered)) = probed else {
            continue;
        };
        if answered {
            tracing::debug!(
                addr,
                "shard missing from the registry still answers; keeping its links"
            );
            continue;
        }
        shared.pool.evict(&addr);
        let links = liveness.condemn(&addr);
        metrics::counter!(m::HUNG_SHARDS_TOTAL).increment(1);
        tracing::warn!(
            addr,
            links,
            "shard stopped answering (no heartbeat, no answer to a probe); resuming its players elsewhere"
        );
    }
}

/// Addresses where a newer process now publishes than the one last seen
/// there: a replacement started under the same shard id at the same
/// address (an orchestrator that does not wait for a stalled process to
/// die, a service address in front of both). The entry stays listed, so
/// absence never makes its predecessor suspect, yet the gate's links may
/// still reach the predecessor, paused; they are probed like an absent
/// shard's. `seen` becomes what is listed now.
fn replaced_at(seen: &mut HashMap<String, u64>, listed: &[LiveShard]) -> HashSet<String> {
    let now: HashMap<String, u64> = listed
        .iter()
        .filter(|s| s.incarnation != 0)
        .map(|s| (s.addr.clone(), s.incarnation))
        .collect();
    let replaced = now
        .iter()
        .filter(|(addr, inc)| seen.get(*addr).is_some_and(|before| before < inc))
        .map(|(addr, _)| addr.clone())
        .collect();
    *seen = now;
    replaced
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(addr: &str, incarnation: u64) -> LiveShard {
        LiveShard {
            id: "shard-a".into(),
            addr: addr.into(),
            incarnation,
        }
    }

    #[test]
    fn a_newer_process_at_a_known_address_is_a_replacement() {
        let mut seen = HashMap::new();
        let first = [entry("10.0.0.1:7000", 3)];
        assert!(replaced_at(&mut seen, &first).is_empty(), "first sight");
        assert!(
            replaced_at(&mut seen, &first).is_empty(),
            "the same process"
        );
        let replaced = replaced_at(&mut seen, &[entry("10.0.0.1:7000", 4)]);
        assert_eq!(replaced, HashSet::from(["10.0.0.1:7000".to_string()]));
        assert!(replaced_at(&mut seen, &[entry("10.0.0.1:7000", 4)]).is_empty());
        // Unknown incarnations (an old shard) say nothing.
        assert!(replaced_at(&mut seen, &[entry("10.0.0.1:7000", 0)]).is_empty());
        assert!(replaced_at(&mut seen, &[entry("10.0.0.1:7000", 5)]).is_empty());
    }
}
