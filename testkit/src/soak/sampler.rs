//! The sampler: while the run plays, reads the fences (zone generation
//! counters, lease owners and generations, owner epochs), the cluster's
//! health and the tail of every durable journal from Redis, the zones every
//! shard process serves from its `/metrics`, and every process's RSS from
//! /proc, recording each change for the checker.

use tokio::sync::watch;

use super::census::{Tracked, anomalies};
use super::clock::Clock;
use super::cluster::{MetricsAddrs, Pids};
use super::config::{ACTORS_EVERY, RSS_EVERY, SAMPLE_EVERY};
use super::history::{Samples, journal_number, record_change, record_if_changed};
use super::probe::Probe;
use super::stop::until_set;

/// Journal tails are read every this many rounds: they decode a whole
/// character row on the server, fences are one small reply each.
const TAIL_EVERY_ROUNDS: u64 = 4;

/// Sample until `stop` turns true; returns everything recorded.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    probe: Probe,
    tracked: Tracked,
    names: Vec<String>,
    pids: Pids,
    metrics: MetricsAddrs,
    clock: Clock,
    mut stop: watch::Receiver<bool>,
) -> Samples {
    let mut samples = Samples::default();
    let mut fences = tokio::time::interval(SAMPLE_EVERY);
    let mut rss = tokio::time::interval(RSS_EVERY);
    let mut actors = tokio::time::interval(ACTORS_EVERY);
    fences.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    rss.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    actors.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut tick: u64 = 0;
    loop {
        tokio::select! {
            _ = until_set(&mut stop) => break,
            _ = fences.tick() => {
                tick += 1;
                let tails = tick % TAIL_EVERY_ROUNDS == 1;
                // Redis down (a fault) or slow: nothing to record this round.
                let mut healthy = false;
                if let Ok(view) = probe.view().await {
                    healthy = view.healthy();
                    record_if_changed(&mut samples.healthy, clock.now(), healthy);
                }
                if healthy && tails {
                    take_census(&probe, &tracked, &names, clock, &mut samples).await;
                }
                if let Ok(round) = probe.round(&names, tails).await {
                    let t = clock.now();
                    samples.rounds += 1;
                    for (z, owner) in &round.lease_owner {
                        let generation = round.lease_gen.get(z).copied().flatten();
                        let lease = owner.clone().zip(generation);
                        record_if_changed(samples.lease.entry(z.clone()).or_default(), t, lease);
                    }
                    for (z, v) in round.zone_gen {
                        record_change(samples.zone_gen.entry(z).or_default(), t, v);
                    }
                    for (z, v) in round.lease_gen {
                        record_change(samples.lease_gen.entry(z).or_default(), t, v);
                    }
                    for (n, v) in round.owner_epoch {
                        record_change(samples.owner_epoch.entry(n).or_default(), t, v);
                    }
                    for (n, tail) in round.journal_tail {
                        let v = tail.as_deref().and_then(journal_number);
                        record_change(samples.durable_tail.entry(n).or_default(), t, v);
                    }
                }
            }
            _ = actors.tick() => {
                samples.actors.push(super::actors::scrape_round(&metrics, clock).await);
            }
            _ = rss.tick() => {
                let t = clock.now();
                let now: Vec<(String, i32)> = pids
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .iter()
                    .map(|(n, p)| (n.clone(), *p))
                    .collect();
                for (name, pid) in now {
                    if let Some(kib) = rss_kib(pid) {
                        samples.rss_kib.entry(name).or_default().push((t, kib));
                    }
                }
            }
        }
    }
    samples
}

/// One census while the cluster is healthy: no item in two places.
async fn take_census(
    probe: &Probe,
    tracked: &Tracked,
    names: &[String],
    clock: Clock,
    samples: &mut Samples,
) {
    if let Ok(counts) = probe.census(tracked, names).await {
        samples.censuses += 1;
        let found = anomalies(&counts, false);
        if !found.is_empty() {
            samples.census_anomalies.push((clock.now(), found));
        }
    }
}

/// `VmRSS` of `pid` from /proc/<pid>/status, KiB.
pub fn rss_kib(pid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_vm_rss(&status)
}

fn parse_vm_rss(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rss_is_read_from_proc_status() {
        assert_eq!(
            parse_vm_rss("Name:\tx\nVmRSS:\t   12345 kB\nThreads: 3\n"),
            Some(12345)
        );
        assert_eq!(parse_vm_rss("Name:\tx\n"), None);
        let me = i32::try_from(std::process::id()).unwrap();
        assert!(rss_kib(me).unwrap() > 0);
    }
}
