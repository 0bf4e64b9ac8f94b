//! A shard joins the running cluster (issue 19): a new `telos-world` with
//! one zone in its `--zones` (drawn with `zone_pick`) starts while the bots
//! play, and the rebalancer (on, in its shipped `load` mode) moves that
//! zone to it through the transfer path — no operator step. The window
//! ends when the joined shard serves the zone; the checker holds the run
//! to its usual rules (nothing lost, every command answered within the
//! bound beyond the window, never two writers).

use std::time::Duration;

use tokio::time::Instant;

use super::super::clock::secs;
use super::super::history::FaultRecord;
use super::super::schedule::Planned;
use super::{Driver, POLL};

/// How long the joined shard may wait for its zone: the rebalancer's
/// hysteresis (60 s: a zone it moved lately, say home after a drain, stays
/// put that long), two of its intervals (5 s each) and the transfer.
const JOIN_WITHIN: Duration = Duration::from_secs(80);

impl Driver<'_> {
    pub(super) async fn join(&mut self, p: &Planned, rec: &mut FaultRecord) -> anyhow::Result<()> {
        let zone = self.pick_zone(p);
        let i = tokio::task::block_in_place(|| self.cluster.add_shard(vec![zone.clone()]))?;
        let id = self.cluster.shards[i].id.clone();
        self.probe.add_shard(&id);
        rec.target = format!("{id} (home of {zone})");
        rec.restored = Some(self.clock.now());
        let until = Instant::now() + JOIN_WITHIN;
        loop {
            let view = self.view().await;
            if view.owners.get(&zone).and_then(|o| o.as_deref()) == Some(id.as_str())
                && view.transfers == 0
            {
                let t = self.clock.now();
                rec.window_end = Some(t);
                rec.notes
                    .push(format!("{zone} reached {id} after {}", secs(t - rec.start)));
                return Ok(());
            }
            anyhow::ensure!(
                Instant::now() < until,
                "{zone} did not move to the joined {id} within {}s: {view:?}",
                JOIN_WITHIN.as_secs()
            );
            tokio::time::sleep(POLL).await;
        }
    }
}
