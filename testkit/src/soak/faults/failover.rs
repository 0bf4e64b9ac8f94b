//! The Redis primary fails over (issue 22): SIGKILL the primary of the
//! Sentinel-managed pair, wait for Sentinel to promote the replica, `hold`,
//! then start the old primary again as a replica of the new one. The
//! checker is unchanged: nothing acknowledged may be lost (every fenced
//! write waited for the replica), never two writers, every command answered
//! within the bound beyond the window.

use tokio::time::Instant;

use super::super::clock::secs;
use super::super::history::FaultRecord;
use super::super::schedule::Planned;
use super::Driver;

impl Driver<'_> {
    pub(super) async fn failover(
        &mut self,
        p: &Planned,
        rec: &mut FaultRecord,
    ) -> anyhow::Result<()> {
        rec.target = "redis primary".into();
        let old = tokio::task::block_in_place(|| self.cluster.sentinel_mut()?.kill_primary())?;
        let killed = Instant::now();
        let new = tokio::task::block_in_place(|| self.cluster.sentinel_mut()?.wait_promoted(old))?;
        rec.notes.push(format!(
            "primary :{old} killed, :{new} promoted after {:.1}s",
            killed.elapsed().as_secs_f64()
        ));
        tokio::time::sleep(p.hold).await;
        tokio::task::block_in_place(|| self.cluster.sentinel_mut()?.rejoin_as_replica(old, new))?;
        let t = self.clock.now();
        rec.restored = Some(t);
        rec.notes
            .push(format!(":{old} a replica of :{new} again at {}", secs(t)));
        Ok(())
    }
}
