//! The rebalancer's knobs (docs/operations.md, "Placement"). Flags and
//! environment only; the defaults are the production values.

use std::time::Duration;

use clap::{Args, ValueEnum};

use super::error::{ConfigError, bad};

/// What the rebalancer does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum RebalanceMode {
    /// Nothing: zones stay where they are until an operator moves them.
    Off,
    /// Boot zones come home: a zone listed in a live shard's `--zones`
    /// moves back to it.
    Home,
    /// `home`, and load spread: players per shard against `--capacity`
    /// evened out when uneven beyond `--rebalance-threshold`, and zones
    /// whose home is gone spread over the live shards.
    #[default]
    Load,
}

#[derive(Debug, Args, Default)]
pub struct RebalanceFlags {
    /// The rebalancer: off | home | load [default: load].
    #[arg(long, env = "TELOS_REBALANCE", value_enum)]
    pub rebalance: Option<RebalanceMode>,
    /// How often the leading shard looks at the placement, milliseconds [default: 5000].
    #[arg(long, env = "TELOS_REBALANCE_INTERVAL_MS")]
    pub rebalance_interval_ms: Option<u64>,
    /// Moves of zones with players started per look, at most, and per shard
    /// (empty zones move at once, uncounted) [default: 3].
    #[arg(long, env = "TELOS_REBALANCE_MAX_MOVES")]
    pub rebalance_max_moves: Option<usize>,
    /// A zone the rebalancer moved is not moved again for this many
    /// seconds (hysteresis) [default: 60].
    #[arg(long, env = "TELOS_REBALANCE_HYSTERESIS_SECS")]
    pub rebalance_hysteresis_secs: Option<u64>,
    /// Load spread tolerated, as a fraction of capacity between the most
    /// and the least loaded shard (0.2: 20 points) [default: 0.2].
    #[arg(long, env = "TELOS_REBALANCE_THRESHOLD")]
    pub rebalance_threshold: Option<f64>,
}

/// The resolved knobs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rebalance {
    pub mode: RebalanceMode,
    pub interval: Duration,
    pub max_moves: usize,
    pub hysteresis: Duration,
    pub threshold: f64,
}

impl Default for Rebalance {
    fn default() -> Self {
        Rebalance {
            mode: RebalanceMode::Load,
            interval: Duration::from_secs(5),
            max_moves: 3,
            hysteresis: Duration::from_secs(60),
            threshold: 0.2,
        }
    }
}

impl RebalanceFlags {
    pub fn resolve(&self) -> Result<Rebalance, ConfigError> {
        let d = Rebalance::default();
        let interval = match self.rebalance_interval_ms {
            Some(0) => {
                return Err(bad(
                    "--rebalance-interval-ms (TELOS_REBALANCE_INTERVAL_MS)",
                    "must be positive",
                ));
            }
            Some(ms) => Duration::from_millis(ms),
            None => d.interval,
        };
        let threshold = self.rebalance_threshold.unwrap_or(d.threshold);
        if !(0.0..=1.0).contains(&threshold) {
            return Err(bad(
                "--rebalance-threshold (TELOS_REBALANCE_THRESHOLD)",
                "must be between 0 and 1",
            ));
        }
        Ok(Rebalance {
            mode: self.rebalance.unwrap_or(d.mode),
            interval,
            max_moves: self.rebalance_max_moves.unwrap_or(d.max_moves),
            hysteresis: self
                .rebalance_hysteresis_secs
                .map_or(d.hysteresis, Duration::from_secs),
            threshold,
        })
    }
}
