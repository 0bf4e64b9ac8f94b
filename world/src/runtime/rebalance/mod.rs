//! # The rebalancer
//! Placement converges by itself: one shard at a time (the holder of a
//! short leader lease in Redis) looks at the cluster every interval and
//! moves zones through the operator transfer path — a pending transfer
//! record, which the source closes (saving the zone's state) and the
//! target opens — toward their homes and an even load ([`plan`] says which
//! and why). Every move is logged with its reason and counted in
//! `telos_rebalance_moves_total{reason}`; a zone it moved is left alone
//! for the hysteresis window, whichever shard leads next. The two shards
//! of a move are left out of decisions while it runs and for [`SETTLE`]
//! after it completed: their registry entries count the moved players
//! only once the players have followed the zone and a heartbeat has
//! published them, and a decision on the old counts overshoots (a shard
//! that joins empty would keep looking empty and receive every zone).
//! `telosctl rebalance --plan | --apply` runs the same planner.
//!
//! - [`plan`]: the pure decision.
//! - this file: reading the cluster ([`view`]), starting moves
//!   ([`start_moves`]) and the leading shard's loop ([`rebalance_loop`]).

pub mod plan;

use std::collections::BTreeSet;
use std::time::Duration;

use tracing::{debug, info, warn};

pub use plan::{Move, Reason, View};

use super::shard::Shard;
use crate::config::rebalance::{Rebalance, RebalanceMode};
use telos_redis::directory::events::Cause;
use telos_redis::directory::transfer::Proposal;
use telos_redis::directory::{Directory, DirectoryError, ShardState};

/// The leader lease lasts this many intervals, so one slow round never
/// hands the decision to another shard; a dead leader is replaced within it.
const LEADER_INTERVALS: u32 = 3;

/// How long the shards of a completed move stay out of decisions: the
/// presence TTL, three registry heartbeats, so the entries count the
/// players who followed the zone.
pub const SETTLE: Duration = super::presence::PRESENCE_TTL;

/// The cluster as the rebalancer of a shard speaking `handoff_version`
/// sees it: shards of another version (a rolling upgrade's skew) are
/// neither sources nor targets.
pub async fn view(dir: &Directory, handoff_version: u32) -> Result<View, DirectoryError> {
    let (shards, zones) = dir.shards_and_zones().await?;
    let transfers = dir.transfers().await?;
    let ids: Vec<String> = zones.iter().map(|z| z.id.clone()).collect();
    let homes = dir.homes(&ids).await?;
    let recent = dir.rebalanced_lately(&ids).await?;
    let shard_ids: Vec<String> = shards.iter().map(|s| s.id.clone()).collect();
    let settling = dir.settling(&shard_ids).await?;
    let moving: BTreeSet<&str> = transfers.iter().map(|t| t.zone.as_str()).collect();
    Ok(View {
        shards: shards
            .into_iter()
            .filter(|s| s.handoff_version == handoff_version)
            .map(|s| plan::ShardView {
                // A cut-off shard (the gates cannot reach it) is no target either.
                draining: s.state != ShardState::Live,
                id: s.id,
                players: s.players,
                capacity: s.capacity,
            })
            .collect(),
        zones: zones
            .into_iter()
            .map(|z| plan::ZoneView {
                home: homes.get(&z.id).cloned(),
                moving: moving.contains(z.id.as_str()),
                recent: recent.contains(&z.id),
                owner: z.owner,
                players: z.players,
                id: z.id,
            })
            .collect(),
        busy: transfers
            .iter()
            .flat_map(|t| [t.from.clone(), t.to.clone()])
            .chain(settling)
            .collect(),
    })
}

/// Propose each move as a transfer and mark it for the hysteresis window.
/// Returns the moves recorded. A proposal refused (the cluster changed
/// since the view: a race, retried next round) is logged at INFO.
pub async fn start_moves(dir: &Directory, moves: &[Move], hysteresis: Duration) -> Vec<Move> {
    let mut started = Vec::new();
    for m in moves {
        match dir.propose_transfer(&m.zone, &m.to, Cause::Rebalance).await {
            Ok(Ok(Proposal::Recorded { .. })) => {
                if let Err(e) = dir.mark_rebalanced(&m.zone, hysteresis).await {
                    warn!(zone = %m.zone, error = %e, "marking a rebalanced zone failed; its hysteresis is lost");
                }
                metrics::counter!("telos_rebalance_moves_total", "reason" => m.reason.as_str())
                    .increment(1);
                info!(
                    zone = %m.zone,
                    from_shard = %m.from,
                    to_shard = %m.to,
                    reason = %m.reason.as_str(),
                    "rebalance: moving a zone"
                );
                started.push(m.clone());
            }
            Ok(Ok(other)) => debug!(zone = %m.zone, ?other, "rebalance: nothing to move"),
            Ok(Err(refused)) => {
                info!(zone = %m.zone, to_shard = %m.to, %refused, "rebalance: move not proposed (the cluster changed); next round looks again")
            }
            Err(e) => warn!(zone = %m.zone, error = %e, "rebalance: proposing a move failed"),
        }
    }
    started
}

/// Record this shard's boot zones as their homes, then, unless the
/// rebalancer is off, decide every interval while this shard leads.
pub async fn rebalance_loop(shard: &Shard) {
    let knobs: Rebalance = shard.cfg.rebalance;
    let dir = &shard.env.directory;
    let mut homes_recorded = false;
    // Moves this shard started and has not yet seen complete.
    let mut in_flight: Vec<Move> = Vec::new();
    loop {
        if !homes_recorded {
            match dir.set_homes(shard.id(), &shard.cfg.zones).await {
                Ok(()) => homes_recorded = true,
                Err(e) => {
                    warn!(error = %e, "recording this shard's boot zones as their homes failed; retrying")
                }
            }
        }
        if homes_recorded && knobs.mode == RebalanceMode::Off {
            return;
        }
        tokio::select! {
            _ = shard.env.root.cancelled() => return,
            _ = tokio::time::sleep(knobs.interval) => {}
        }
        if shard.is_draining() || knobs.mode == RebalanceMode::Off {
            continue;
        }
        match dir
            .lead_rebalance(shard.id(), knobs.interval * LEADER_INTERVALS)
            .await
        {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) => {
                debug!(error = %e, "rebalance: the leader lease could not be read");
                continue;
            }
        }
        let mut view = match view(dir, shard.cfg.handoff_version).await {
            Ok(v) => v,
            Err(e) => {
                warn!(error = %e, "rebalance: reading the cluster failed");
                continue;
            }
        };
        in_flight = settle_completed(dir, &mut view, in_flight).await;
        let moves = plan::plan(&view, &knobs);
        if !moves.is_empty() {
            in_flight.extend(start_moves(dir, &moves, knobs.hysteresis).await);
        }
    }
}

/// Mark the shards of each move with players of `in_flight` that `view`
/// shows complete (no transfer of its zone pending) as settling, in Redis for whichever
/// shard leads next and in `view` for this round; returns the rest.
async fn settle_completed(dir: &Directory, view: &mut View, in_flight: Vec<Move>) -> Vec<Move> {
    let mut still = Vec::new();
    for m in in_flight {
        let pending = view.zones.iter().any(|z| z.id == m.zone && z.moving);
        if pending {
            still.push(m);
            continue;
        }
        if !m.carries_players() {
            continue;
        }
        if let Err(e) = dir.mark_settling(&[&m.from, &m.to], SETTLE).await {
            warn!(zone = %m.zone, error = %e, "rebalance: marking a move's shards as settling failed");
        }
        view.busy.extend([m.from, m.to]);
    }
    still
}
