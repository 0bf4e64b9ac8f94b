//! `telosctl rebalance --plan | --apply`: what the rebalancer would move
//! now and why, and starting those moves — the same planner and knobs the
//! leading shard uses (docs/operations.md, "Placement").

use std::time::Duration;

use clap::Args;
use telos_redis::directory::Directory;
use telos_redis::target::RedisTarget;
use telos_world::config::rebalance::{Rebalance, RebalanceMode};
use telos_world::runtime::rebalance::{plan, start_moves, view};

#[derive(Args)]
pub struct RebalanceArgs {
    /// Print the moves the rebalancer would start now, and why (the default).
    #[arg(long, conflicts_with = "apply")]
    plan: bool,
    /// Start those moves (transfers, marked for the hysteresis window).
    #[arg(long)]
    apply: bool,
    /// off | home | load, as `telos-world --rebalance`.
    #[arg(long, value_enum, default_value_t = RebalanceMode::Load)]
    mode: RebalanceMode,
    /// Moves of zones with players at most, and per shard (empty zones
    /// move uncounted).
    #[arg(long, default_value_t = Rebalance::default().max_moves)]
    max_moves: usize,
    /// Load spread tolerated, a fraction of capacity.
    #[arg(long, default_value_t = Rebalance::default().threshold)]
    threshold: f64,
    /// Seconds a zone moved by `--apply` is left alone.
    #[arg(long, default_value_t = Rebalance::default().hysteresis.as_secs())]
    hysteresis_secs: u64,
}

pub async fn rebalance(redis: &RedisTarget, args: RebalanceArgs) -> anyhow::Result<()> {
    let knobs = Rebalance {
        mode: args.mode,
        max_moves: args.max_moves,
        threshold: args.threshold,
        hysteresis: Duration::from_secs(args.hysteresis_secs),
        ..Rebalance::default()
    };
    let dir = Directory::connect(redis).await?;
    let view = view(&dir, telos_world::handoff::HANDOFF_VERSION).await?;
    let moves = plan::plan(&view, &knobs);
    if moves.is_empty() {
        println!("placement is settled: nothing to move");
        return Ok(());
    }
    for m in &moves {
        println!(
            "move {} from {} to {} ({})",
            m.zone,
            m.from,
            m.to,
            m.reason.as_str()
        );
    }
    if args.apply {
        let started = start_moves(&dir, &moves, knobs.hysteresis).await;
        println!("{} of {} moves started", started.len(), moves.len());
        if started.len() < moves.len() {
            anyhow::bail!("some moves were not proposed (the cluster changed); run again");
        }
    }
    Ok(())
}
