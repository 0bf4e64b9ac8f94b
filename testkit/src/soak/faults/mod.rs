//! The fault driver: carries out the schedule against the cluster, one
//! fault at a time (so at most one shard is ever down), each followed — in
//! the healthy and partition modes — by a wait until the cluster is
//! healthy again, and records every fault's window for the checker.
//!
//! # Layout
//! - this root: the driver, process faults (drain, kill, stop, Redis, the
//!   gate) and transfers;
//! - [`links`]: partitions through the cluster's proxies;
//! - [`replace`]: a restart while the old process is paused;
//! - [`join`]: a shard added to the running cluster;
//! - [`failover`]: the Redis primary lost, Sentinel promoting the replica.

mod failover;
mod join;
mod links;
mod replace;

use std::time::Duration;

use tokio::time::Instant;

use super::clock::{Clock, Ms};
use super::cluster::Cluster;
use super::config::{DRAIN_EXIT_TIMEOUT, FaultKind, Mode, RECOVERY_TIMEOUT, WARM_UP};
use super::history::FaultRecord;
use super::probe::{Probe, View};
use super::schedule::{Planned, Schedule};

/// How often the driver looks at Redis or at a process while it waits.
const POLL: Duration = Duration::from_millis(100);
/// A fault is not started this close to the end of play: it would spill
/// over into the final checks.
const LAST_START_MARGIN: Duration = Duration::from_secs(5);

pub struct Driver<'a> {
    pub cluster: &'a mut Cluster,
    pub probe: &'a Probe,
    pub clock: Clock,
    pub mode: Mode,
    /// The zone the last fault hit (a follower hits it again).
    pub last_zone: Option<String>,
}

impl Driver<'_> {
    /// Run `schedule` until it is done or play ends at `end`. Stops early
    /// (returning what was done) if the cluster does not recover.
    pub async fn run(&mut self, schedule: &Schedule, end: Instant) -> Vec<FaultRecord> {
        let mut done: Vec<FaultRecord> = Vec::new();
        tokio::time::sleep(WARM_UP).await;
        for p in &schedule.faults {
            tokio::time::sleep(p.calm_before).await;
            if Instant::now() + p.hold + LAST_START_MARGIN > end {
                break;
            }
            let rec = self.inject(p).await;
            let recovered = !self.mode.waits_for_health() || rec.healthy.is_some();
            println!("  {}", summary(&rec));
            done.push(rec);
            if !recovered {
                break;
            }
        }
        // Overlapping faults were not waited out: the last one is.
        if !self.mode.waits_for_health()
            && let Some(last) = done.last_mut()
            && self.wait_healthy().await.is_none()
        {
            let now = self.view().await;
            last.problems.push(format!(
                "the cluster was not healthy {}s after the last fault: {now:?}",
                RECOVERY_TIMEOUT.as_secs()
            ));
        }
        done
    }

    async fn inject(&mut self, p: &Planned) -> FaultRecord {
        let mut rec = FaultRecord {
            id: p.id,
            kind: p.kind,
            target: String::new(),
            start: self.clock.now(),
            restored: None,
            window_end: None,
            healthy: None,
            notes: Vec::new(),
            problems: Vec::new(),
        };
        let view = self.view().await;
        let result = match p.kind {
            FaultKind::Drain => self.drain(p, &view, &mut rec).await,
            FaultKind::Kill => self.kill(p, &view, &mut rec).await,
            FaultKind::Stop => self.stop(p, &view, &mut rec).await,
            FaultKind::Transfer => self.transfer(p, &view, &mut rec).await,
            FaultKind::Retransfer => self.retransfer(p, &view, &mut rec).await,
            FaultKind::Redis => self.redis(p, &mut rec).await,
            FaultKind::Gate => self.gate(p, &mut rec).await,
            FaultKind::RestartPaused => self.restart_paused(p, &view, &mut rec).await,
            FaultKind::CutRedis
            | FaultKind::CutPeers
            | FaultKind::CutGate
            | FaultKind::CutService
            | FaultKind::OneWay
            | FaultKind::Slow
            | FaultKind::Reset => self.link(p, &view, &mut rec).await,
            FaultKind::Join => self.join(p, &mut rec).await,
            FaultKind::Failover => self.failover(p, &mut rec).await,
        };
        if let Err(e) = result {
            rec.problems.push(format!("{e:#}"));
        }
        if !self.mode.waits_for_health() {
            // The next fault comes before the cluster is healthy again; the
            // window ends at the next healthy sample (filled in from the
            // sampler's record after the run).
            return rec;
        }
        rec.healthy = self.wait_healthy().await;
        if rec.healthy.is_none() {
            let now = self.view().await;
            rec.problems.push(format!(
                "the cluster was not healthy {}s after the fault: {now:?}",
                RECOVERY_TIMEOUT.as_secs()
            ));
        }
        if rec.window_end.is_none() {
            rec.window_end = rec.healthy;
        }
        rec
    }

    /// The current view (an empty one while Redis cannot be read).
    async fn view(&self) -> View {
        self.probe.view().await.unwrap_or_default()
    }

    async fn wait_healthy(&self) -> Option<Ms> {
        let until = Instant::now() + RECOVERY_TIMEOUT;
        while Instant::now() < until {
            if self.probe.view().await.is_ok_and(|v| v.healthy()) {
                return Some(self.clock.now());
            }
            tokio::time::sleep(POLL).await;
        }
        None
    }

    /// The shard a shard fault hits: a follower's the one serving the
    /// last fault's zone (if a live one does), else `pick` among the
    /// shards hosting a zone (a fault on an empty shard tests little), else
    /// among all.
    fn pick_shard(&self, p: &Planned, view: &View) -> usize {
        if p.follow
            && let Some(z) = &self.last_zone
            && let Some(Some(owner)) = view.owners.get(z)
            && view.is_live(owner)
            && let Some(i) = self.cluster.shard_index(owner)
        {
            return i;
        }
        let hosting: Vec<usize> = (0..self.cluster.shards.len())
            .filter(|i| !view.zones_of(&self.cluster.shards[*i].id).is_empty())
            .collect();
        let from = if hosting.is_empty() {
            (0..self.cluster.shards.len()).collect()
        } else {
            hosting
        };
        from[p.pick as usize % from.len()]
    }

    /// [`pick_shard`](Self::pick_shard), recorded as the fault's target
    /// with the zones it hosts (the first becomes the last zone hit).
    fn hit_shard(&mut self, p: &Planned, view: &View, rec: &mut FaultRecord) -> usize {
        let i = self.pick_shard(p, view);
        rec.target = self.cluster.shards[i].id.clone();
        let zones = view.zones_of(&rec.target);
        if let Some(z) = zones.first() {
            self.last_zone = Some(z.clone());
        }
        rec.notes.push(format!("zones {zones:?}"));
        i
    }

    /// The zone a transfer moves: a follower's the last fault's zone, else
    /// `zone_pick`'s.
    fn pick_zone(&mut self, p: &Planned) -> String {
        let zones = &self.cluster.zones;
        let zone = match (&self.last_zone, p.follow) {
            (Some(z), true) => z.clone(),
            _ => zones[p.zone_pick as usize % zones.len()].clone(),
        };
        self.last_zone = Some(zone.clone());
        zone
    }

    fn restart_shard(&mut self, i: usize, rec: &mut FaultRecord) -> anyhow::Result<()> {
        tokio::task::block_in_place(|| self.cluster.start_shard(i))?;
        rec.restored = Some(self.clock.now());
        Ok(())
    }

    async fn drain(
        &mut self,
        p: &Planned,
        view: &View,
        rec: &mut FaultRecord,
    ) -> anyhow::Result<()> {
        let i = self.hit_shard(p, view, rec);
        self.cluster.signal_shard(i, libc::SIGTERM);
        let until = Instant::now() + DRAIN_EXIT_TIMEOUT;
        let status = loop {
            if let Some(status) = self.cluster.shard_exit(i)? {
                break Some(status);
            }
            if Instant::now() > until {
                break None;
            }
            tokio::time::sleep(POLL).await;
        };
        match status {
            Some(s) => {
                rec.notes.push(format!(
                    "exited {s} after {}",
                    super::clock::secs(self.clock.now() - rec.start)
                ));
                if !s.success() {
                    rec.problems
                        .push(format!("the drained shard exited {s}, not 0"));
                }
            }
            None => {
                rec.problems.push(format!(
                    "did not exit within {}s of SIGTERM",
                    DRAIN_EXIT_TIMEOUT.as_secs()
                ));
                self.cluster.kill_shard(i);
            }
        }
        let log = self.cluster.shard_log(i);
        match drain_summary_problem(&log) {
            Ok(summary) => rec.notes.push(summary),
            Err(problem) => rec.problems.push(problem),
        }
        tokio::time::sleep(p.hold).await;
        self.restart_shard(i, rec)
    }

    async fn kill(
        &mut self,
        p: &Planned,
        view: &View,
        rec: &mut FaultRecord,
    ) -> anyhow::Result<()> {
        let i = self.hit_shard(p, view, rec);
        self.cluster.kill_shard(i);
        tokio::time::sleep(p.hold).await;
        self.restart_shard(i, rec)
    }

    /// SIGSTOP past the lease TTL. The window ends when the peers serve
    /// the stopped shard's zones (a player's stall may last 2 s longer than
    /// that, issue 11 item 7), or, if they never did, when it is healthy
    /// again after SIGCONT.
    async fn stop(
        &mut self,
        p: &Planned,
        view: &View,
        rec: &mut FaultRecord,
    ) -> anyhow::Result<()> {
        let i = self.hit_shard(p, view, rec);
        let id = rec.target.clone();
        let zones = view.zones_of(&id);
        self.cluster.signal_shard(i, libc::SIGSTOP);
        let until = Instant::now() + p.hold;
        while Instant::now() < until {
            if rec.window_end.is_none()
                && self
                    .probe
                    .view()
                    .await
                    .is_ok_and(|v| v.served_without(&zones, &id))
            {
                let t = self.clock.now();
                rec.window_end = Some(t);
                rec.notes.push(format!(
                    "peers served its zones after {}",
                    super::clock::secs(t - rec.start)
                ));
            }
            tokio::time::sleep(POLL).await;
        }
        self.cluster.signal_shard(i, libc::SIGCONT);
        rec.restored = Some(self.clock.now());
        Ok(())
    }

    async fn transfer(
        &mut self,
        p: &Planned,
        view: &View,
        rec: &mut FaultRecord,
    ) -> anyhow::Result<()> {
        let zone = self.pick_zone(p);
        let (owner, view) = self.owned(&zone, view).await?;
        let to = self.transfer_target(&view, &[&owner], p.pick)?;
        rec.target = format!("{zone} {owner}->{to}");
        self.move_zone(&zone, &to).await?;
        rec.restored = Some(self.clock.now());
        Ok(())
    }

    /// A zone moved A→B, then after `hold` B→C (C another than A when
    /// there is one): the second move lands while the first one's players
    /// are still arriving.
    async fn retransfer(
        &mut self,
        p: &Planned,
        view: &View,
        rec: &mut FaultRecord,
    ) -> anyhow::Result<()> {
        let zone = self.pick_zone(p);
        let (a, view) = self.owned(&zone, view).await?;
        let b = self.transfer_target(&view, &[&a], p.pick)?;
        rec.target = format!("{zone} {a}->{b}");
        self.move_zone(&zone, &b).await?;
        let first = self.clock.now();
        tokio::time::sleep(p.hold).await;
        let now = self.view().await;
        let c = self
            .transfer_target(&now, &[&b, &a], p.pick / 7)
            .or_else(|_| self.transfer_target(&now, &[&b], p.pick / 7))?;
        rec.target = format!("{zone} {a}->{b}->{c}");
        self.move_zone(&zone, &c).await?;
        let t = self.clock.now();
        rec.notes.push(format!(
            "moved to {b} at {}, to {c} at {}",
            super::clock::secs(first),
            super::clock::secs(t)
        ));
        rec.restored = Some(t);
        Ok(())
    }

    /// `zone`'s live owner, and the view it was read in. A transfer moves
    /// a zone from its owner; in the overlap mode one may come while the
    /// zone is between owners (a Redis restart or a shard's death just
    /// before: overlap seed 749446916), which telosctl rightly refuses
    /// ("no live owner to transfer from"). So it waits for one, as an
    /// operator would; none within the recovery bound is a problem.
    async fn owned(&self, zone: &str, view: &View) -> anyhow::Result<(String, View)> {
        let until = Instant::now() + RECOVERY_TIMEOUT;
        let mut view = view.clone();
        loop {
            let owner = owner_of(&view, zone);
            if !owner.is_empty() && view.shards.get(&owner).is_some_and(Option::is_some) {
                return Ok((owner, view));
            }
            anyhow::ensure!(
                Instant::now() < until,
                "{zone} had no live owner to transfer from for {RECOVERY_TIMEOUT:?}"
            );
            tokio::time::sleep(POLL).await;
            view = self.view().await;
        }
    }

    /// `pick` among the live shards not in `not`.
    fn transfer_target(&self, view: &View, not: &[&str], pick: u32) -> anyhow::Result<String> {
        let targets: Vec<String> = self
            .cluster
            .shards
            .iter()
            .map(|s| s.id.clone())
            .filter(|s| !not.contains(&s.as_str()) && view.is_live(s))
            .collect();
        anyhow::ensure!(!targets.is_empty(), "no live shard outside {not:?}");
        Ok(targets[pick as usize % targets.len()].clone())
    }

    /// `telosctl transfer ZONE --to SHARD --wait`, failing when it did. A
    /// transfer of the zone already pending (the rebalancer's, proposed
    /// since the zone was picked: overlap seed 242202344) is waited for as
    /// an operator would, then the zone is moved on unless it is at `to`
    /// already; still refused within the recovery bound is a problem.
    async fn move_zone(&self, zone: &str, to: &str) -> anyhow::Result<()> {
        let until = Instant::now() + RECOVERY_TIMEOUT;
        loop {
            let done = tokio::task::block_in_place(|| self.cluster.transfer(zone, to))?;
            if done.success() {
                return Ok(());
            }
            let pending = done
                .stderr
                .contains("a different transfer is already pending");
            if !pending || Instant::now() >= until {
                anyhow::bail!(
                    "telosctl transfer {zone} --to {to} --wait failed ({}): {}",
                    done.status,
                    done.stderr.trim()
                );
            }
            tokio::time::sleep(POLL).await;
            let view = self.view().await;
            if view.transfers == 0 && owner_of(&view, zone) == to {
                return Ok(());
            }
        }
    }

    async fn redis(&mut self, p: &Planned, rec: &mut FaultRecord) -> anyhow::Result<()> {
        rec.target = "redis".into();
        self.cluster.kill_redis()?;
        tokio::time::sleep(p.hold).await;
        tokio::task::block_in_place(|| self.cluster.restart_redis())?;
        rec.restored = Some(self.clock.now());
        Ok(())
    }

    async fn gate(&mut self, p: &Planned, rec: &mut FaultRecord) -> anyhow::Result<()> {
        rec.target = "gate".into();
        self.cluster.kill_gate();
        tokio::time::sleep(p.hold).await;
        tokio::task::block_in_place(|| self.cluster.start_gate())?;
        let t = self.clock.now();
        rec.restored = Some(t);
        rec.window_end = Some(t);
        Ok(())
    }
}

/// The shard leasing `zone` in `view` ("" when none does).
fn owner_of(view: &View, zone: &str) -> String {
    view.owners.get(zone).cloned().flatten().unwrap_or_default()
}

/// CONTRACT.md: a drained shard's last log line is its drain summary.
/// `Ok(summary line)`, or what is wrong with it.
pub fn drain_summary_problem(log: &str) -> Result<String, String> {
    let log = crate::process::strip_ansi(log);
    let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    let Some(at) = lines.iter().rposition(|l| l.contains("drain summary")) else {
        return Err("the drained shard logged no drain summary".into());
    };
    let summary = lines[at];
    let counts = summary.split("drain summary").nth(1).unwrap_or(summary);
    let counts = counts.trim_start_matches(':').trim();
    let mut problems = Vec::new();
    if summary.matches("redirected=").count() > 1 {
        problems.push(format!(
            "the drain summary prints its counts twice ({counts})"
        ));
    }
    if at + 1 < lines.len() {
        problems.push(format!(
            "the drain summary is not the last log line: {} line(s) follow it, the last: {}",
            lines.len() - at - 1,
            lines[lines.len() - 1]
        ));
    }
    if problems.is_empty() {
        Ok(format!("drain summary: {counts}"))
    } else {
        Err(problems.join("; "))
    }
}

/// One line per fault as it finished, printed while the run goes.
fn summary(r: &FaultRecord) -> String {
    let t = |v: Option<Ms>| v.map_or("-".into(), super::clock::secs);
    format!(
        "{} at {}: restored {}, healthy {}{}",
        r.label(),
        super::clock::secs(r.start),
        t(r.restored),
        t(r.healthy),
        if r.problems.is_empty() {
            String::new()
        } else {
            format!(" PROBLEMS: {}", r.problems.join("; "))
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drain_summary_must_be_the_last_line_and_say_its_counts_once() {
        let good = "x\nINFO drain summary: redirected=3 reclaimed=0 client_fault=0\n\n";
        assert_eq!(
            drain_summary_problem(good).unwrap(),
            "drain summary: redirected=3 reclaimed=0 client_fault=0"
        );
        let twice = "INFO drain summary: redirected=3 reclaimed=0 client_fault=0 redirected=3 reclaimed=0\n";
        assert!(drain_summary_problem(twice).unwrap_err().contains("twice"));
        let followed =
            "INFO drain summary: redirected=3 redirected=3\nINFO shutting down\nINFO stopped\n";
        let err = drain_summary_problem(followed).unwrap_err();
        assert!(
            err.contains("2 line(s) follow") && err.contains("stopped"),
            "{err}"
        );
        assert!(err.contains("twice"), "both problems are told: {err}");
        assert!(drain_summary_problem("INFO stopped\n").is_err());
    }
}
