//! A process restart while the old one is paused (issue 17, defect 2): an
//! orchestrator that starts a replacement before the old process is really
//! gone. SIGSTOP shard X, start a second `telos-world --shard-id X` on new
//! ports (the front proxy leads the gate and the peers to it), SIGCONT the
//! first later: it must stop by itself and write nothing — its leases ran
//! out while it was paused, and the replacement holds generations it never
//! held. One process of X remains.

use std::time::Duration;

use tokio::time::Instant;

use super::super::clock::secs;
use super::super::config::SUPERSEDED_EXIT;
use super::super::history::FaultRecord;
use super::super::probe::View;
use super::super::schedule::Planned;
use super::{Driver, POLL};

/// A superseded process that logs this after it was continued took a
/// lease again: a second writer.
const LEASE_ACQUIRED: &str = "lease acquired";

impl Driver<'_> {
    pub(super) async fn restart_paused(
        &mut self,
        p: &Planned,
        view: &View,
        rec: &mut FaultRecord,
    ) -> anyhow::Result<()> {
        let i = self.hit_shard(p, view, rec);
        let until = Instant::now() + p.hold;
        let old = self.cluster.shards[i].incarnation_name();
        self.cluster.signal_shard(i, libc::SIGSTOP);
        // The replacement comes while the old leases are still live.
        tokio::time::sleep(Duration::from_millis(500 + u64::from(p.zone_pick % 1_000))).await;
        tokio::task::block_in_place(|| self.cluster.start_replacement(i))?;
        let new = self.cluster.shards[i].incarnation_name();
        rec.notes.push(format!(
            "{new} started at {} while {old} was paused",
            secs(self.clock.now())
        ));
        tokio::time::sleep_until(until).await;
        let log_before = self.cluster.old_log(i).len();
        self.cluster.signal_old(i, libc::SIGCONT);
        let continued = self.clock.now();
        rec.restored = Some(continued);
        let exit_by = Instant::now() + SUPERSEDED_EXIT;
        let mut acquired = None;
        let status = loop {
            let exited = self.cluster.old_exit(i)?;
            // Read after the exit check, so the last lines are seen too.
            let log = self.cluster.old_log(i);
            if acquired.is_none()
                && let Some(line) = log
                    .get(log_before..)
                    .and_then(|after| after.lines().find(|l| l.contains(LEASE_ACQUIRED)))
            {
                acquired = Some(crate::process::strip_ansi(line).trim().to_string());
            }
            if let Some(status) = exited {
                break Some(status);
            }
            if Instant::now() > exit_by {
                break None;
            }
            tokio::time::sleep(POLL).await;
        };
        match status {
            Some(s) => rec.notes.push(format!(
                "{old} exited {s} {} after SIGCONT",
                secs(self.clock.now() - continued)
            )),
            None => {
                rec.problems.push(format!(
                    "{old}, superseded by {new}, still ran {}s after SIGCONT (killed)",
                    SUPERSEDED_EXIT.as_secs()
                ));
                self.cluster.kill_old(i);
            }
        }
        if let Some(line) = acquired {
            rec.problems.push(format!(
                "{old}, superseded by {new}, acquired a lease after SIGCONT: {line}"
            ));
        }
        Ok(())
    }
}
