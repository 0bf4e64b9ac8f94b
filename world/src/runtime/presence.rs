//! The shard's presence: its registry entry (heartbeat, with per-zone
//! player counts), the online list `who` reads, and what a refused
//! heartbeat means — a newer process of this shard id took over.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use super::shard::Shard;
use crate::model::ids::{is_instance_id, template_of};
use telos_redis::directory::reach::REACH_BOUND;
use telos_redis::directory::{DirectoryError, Reach, ShardInfo, ShardState};

/// Registry heartbeat period.
const HEARTBEAT: Duration = Duration::from_secs(1);

/// Presence TTL: three heartbeats, so one slow Redis round trip never makes
/// a live shard look dead, while a dead one disappears within 3 s.
pub const PRESENCE_TTL: Duration = Duration::from_secs(3);

/// Coalesce roster changes this long before publishing the online list.
const ONLINE_DEBOUNCE: Duration = Duration::from_millis(50);

impl Shard {
    /// This shard's registry entry and the players it hosts per zone, both
    /// counted from one roster snapshot so they always agree. Every hosted
    /// (non-instance) zone is listed, 0 when empty; an instance's players
    /// count for its template.
    fn presence(&self) -> (ShardInfo, Vec<(String, u64)>) {
        let players = self.env.roster.snapshot();
        let mut counts: std::collections::BTreeMap<String, u64> = self
            .env
            .hosted
            .ids()
            .into_iter()
            .filter(|z| !is_instance_id(z))
            .map(|z| (z, 0))
            .collect();
        for p in &players {
            let zone = template_of(&p.zone).to_string();
            *counts.entry(zone).or_default() += 1;
        }
        let info = ShardInfo {
            id: self.cfg.shard_id.clone(),
            addr: self.addr.clone(),
            state: if self.is_draining() {
                ShardState::Draining
            } else {
                ShardState::Live
            },
            players: players.len() as u64,
            capacity: self.cfg.capacity,
            handoff_version: self.cfg.handoff_version,
            // Written as this process's own by the heartbeat itself.
            incarnation: 0,
        };
        (info, counts.into_iter().collect())
    }

    /// Publish the registry entry, with its per-zone counts, now (e.g.
    /// `draining` at once); it replaces the previous entry whole.
    pub async fn heartbeat_now(&self) {
        let (info, zone_players) = self.presence();
        metrics::gauge!("telos_players", "shard" => self.cfg.shard_id.clone())
            .set(info.players as f64);
        match self
            .env
            .directory
            .heartbeat_with_zones(&info, &zone_players, PRESENCE_TTL)
            .await
        {
            Ok(reach) => {
                self.ready.heartbeat(true);
                self.reached(reach);
            }
            Err(e @ DirectoryError::Superseded { .. }) => {
                error!(error = %e, "superseded by a newer process of this shard id: stopping");
                self.superseded.cancel();
            }
            Err(e) => {
                self.ready.heartbeat(false);
                metrics::counter!("telos_redis_errors_total", "op" => "heartbeat").increment(1);
                warn!(error = %e, "registry heartbeat failed");
            }
        }
    }

    /// Say when the gates' view of this shard changes: cut off, its zones
    /// fence at their next renew and go to peers (`reach` in the
    /// directory); reached again, it claims and takes players again.
    fn reached(&self, reach: Reach) {
        let cut_off = reach == Reach::CutOff;
        if !self.ready.cut_off(cut_off) {
            return;
        }
        metrics::gauge!("telos_shard_cut_off").set(f64::from(u8::from(cut_off)));
        if cut_off {
            error!(
                "a gate has not reached this shard for {} s while it reaches others: giving every zone up to the peers (their leases are refused from now) until the gates reach it again",
                REACH_BOUND.as_secs()
            );
        } else {
            info!("the gates reach this shard again: it takes zones and players again");
        }
    }

    /// Cancelled once a newer process of this shard id owns the registry
    /// entry (this one was paused past its leases, or started twice): the
    /// process stops. Its leases are already the newer one's or lapse; its
    /// saves are fenced by owner epochs.
    pub fn superseded(&self) -> &CancellationToken {
        &self.superseded
    }

    pub async fn heartbeat_loop(&self) {
        let mut every = tokio::time::interval(HEARTBEAT);
        loop {
            tokio::select! {
                _ = self.env.root.cancelled() => return,
                _ = every.tick() => {}
            }
            self.heartbeat_now().await;
        }
    }

    pub async fn online_loop(&self) {
        loop {
            tokio::select! {
                _ = self.env.root.cancelled() => return,
                _ = self.env.roster.changed() => tokio::time::sleep(ONLINE_DEBOUNCE).await,
                _ = tokio::time::sleep(HEARTBEAT) => {}
            }
            let players = self.env.roster.snapshot();
            if let Err(e) = self
                .env
                .directory
                .publish_online(&self.cfg.shard_id, &players, PRESENCE_TTL)
                .await
            {
                metrics::counter!("telos_redis_errors_total", "op" => "publish_online")
                    .increment(1);
                warn!(error = %e, "publishing the online list failed");
            }
        }
    }
}
