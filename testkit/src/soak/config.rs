//! The soak's command line and the bounds it checks against, each with its
//! reason.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use serde::{Deserialize, Serialize};

/// Every command is answered within this much beyond the fault in progress
/// (issue 11's rule, ARCHITECTURE.md invariant 7).
pub const ANSWER_BOUND: Duration = Duration::from_secs(2);

/// A login is answered within this much beyond the fault in progress. Not
/// a command of the contract's table: it hashes a password (argon2, about
/// 19 MiB and tens of milliseconds each), and after a gate crash every bot
/// logs in at once, so a 2-core machine queues them for seconds.
pub const LOGIN_BOUND: Duration = Duration::from_secs(10);

/// The shards' save interval (`telos-world --save-interval-ms`, default
/// 2000): a dirty player is saved this often, so an acknowledged line is
/// durable within it (plus one answer bound) unless a fault stops saves.
pub const SAVE_INTERVAL: Duration = Duration::from_secs(2);

/// A bot stops waiting for an answer after this long and drops the
/// connection. Longer than any fault window the schedule makes (a drain may
/// take its whole 30 s deadline, a pause past the lease TTL about 15 s), so
/// a command is never given up while its bound still runs.
pub const ABANDON_AFTER: Duration = Duration::from_secs(60);

/// The shards' lease TTL (`telos-world --lease-ttl-ms`, default 6000): a
/// shard paused longer than this loses its zones to its peers.
pub const LEASE_TTL: Duration = Duration::from_secs(6);

/// How long a SIGTERMed shard may take to exit: its drain deadline
/// (`--drain-deadline`, default 30 s) plus a margin for the final saves.
pub const DRAIN_EXIT_TIMEOUT: Duration = Duration::from_secs(45);

/// After a fault is undone the cluster must be healthy again (every shard
/// live, every zone leased by a live shard, no transfer pending) within
/// this; otherwise the schedule stops and the run reports it.
pub const RECOVERY_TIMEOUT: Duration = Duration::from_secs(60);

/// How often the sampler reads lease generations, owner epochs and the
/// durable journals from Redis: often enough to see a generation that went
/// back before it is overwritten again, cheap enough for 2 cores.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(250);

/// How often process RSS is read from /proc.
pub const RSS_EVERY: Duration = Duration::from_secs(1);

/// At the end, `telosctl status` must agree with where the bots are within
/// this: presence is refreshed every second and expires after 3 s.
pub const STATUS_SETTLE: Duration = Duration::from_secs(10);

/// After the stop, bots have this long to finish what they are doing, log
/// back in if they are out, and read their final `where` and journal.
pub const FINAL_GRACE: Duration = Duration::from_secs(30);

/// Calm between two faults, drawn per gap: long enough for the bots to
/// cross a few boundaries between faults.
pub const CALM_MIN: Duration = Duration::from_secs(4);
pub const CALM_MAX: Duration = Duration::from_secs(10);

/// Play before the first fault: every bot has logged in and moved.
pub const WARM_UP: Duration = Duration::from_secs(5);

/// Login attempts per source IP the soak's gate allows: every bot connects
/// from 127.0.0.1, so the per-IP limit meant for one attacker would throttle
/// the whole population after a gate crash.
pub const GATE_LOGIN_BURST: u32 = 1000;

/// The bots' password (letters and a dash; any 8+ characters do).
pub const PASSWORD: &str = "soak-password";

/// The fault kinds of issue 11's schedule.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, ValueEnum, Serialize, Deserialize,
)]
pub enum FaultKind {
    /// SIGTERM a shard (drain), restart it when it has exited.
    Drain,
    /// SIGKILL a shard, restart it after a short outage.
    Kill,
    /// SIGSTOP a shard past the lease TTL, then SIGCONT.
    Stop,
    /// `telosctl transfer ZONE --to SHARD --wait`.
    Transfer,
    /// SIGKILL Redis, restart it on the same port from its AOF.
    Redis,
    /// SIGKILL the gate, restart it on the same port; bots log in again.
    Gate,
}

impl FaultKind {
    pub const ALL: [FaultKind; 6] = [
        FaultKind::Drain,
        FaultKind::Kill,
        FaultKind::Stop,
        FaultKind::Transfer,
        FaultKind::Redis,
        FaultKind::Gate,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Drain => "drain",
            FaultKind::Kill => "kill",
            FaultKind::Stop => "stop",
            FaultKind::Transfer => "transfer",
            FaultKind::Redis => "redis",
            FaultKind::Gate => "gate",
        }
    }
}

/// telos-soak: a seeded chaos soak of a real Telos cluster with a history
/// checker (docs/soak.md).
#[derive(Debug, Clone, Parser)]
#[command(name = "telos-soak", version)]
pub struct SoakArgs {
    /// Seed of the fault schedule and of every bot's choices [default:
    /// random; printed first either way].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Minutes of play and faults (fractions allowed).
    #[arg(long, default_value_t = 5.0)]
    pub minutes: f64,
    /// Bots playing through the gate (at least 20).
    #[arg(long, default_value_t = 24, value_parser = clap::value_parser!(u32).range(20..))]
    pub bots: u32,
    /// World shards splitting the starter world (at least 3).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(3..=26))]
    pub shards: u32,
    /// Fault kinds to draw from, comma separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "drain,kill,stop,transfer,redis,gate"
    )]
    pub faults: Vec<FaultKind>,
    /// Voluntary logouts and logins (`quit`, reconnect, `connect`) the
    /// population may make in the whole run. Every login costs a shard
    /// memory today (issue 11 item 6), so long runs keep them bounded.
    #[arg(long, default_value_t = 24)]
    pub relogins: u32,
    /// Where the run's data, logs and history go [default:
    /// target/soak/seed-<seed>]. Kept when a check fails.
    #[arg(long)]
    pub run_dir: Option<PathBuf>,
    /// Keep the run directory even when every check passes.
    #[arg(long)]
    pub keep: bool,
    /// RSS growth allowed per process from the end of setup to the end, MiB
    /// (issue 11 item 6's target: within 64 MiB after 2000 logins).
    #[arg(long, default_value_t = 64)]
    pub rss_growth_mib: u64,
    /// RUST_LOG of the shards and the gate.
    #[arg(long, default_value = "info")]
    pub log_level: String,
    /// Folder of the binaries under test [default: next to telos-soak].
    #[arg(long, env = "TELOS_BIN_DIR")]
    pub bin_dir: Option<PathBuf>,
    /// Print the schedule the seed draws for the run's length and exit.
    #[arg(long)]
    pub plan_only: bool,
    /// Check and report a kept run directory's history.json again instead
    /// of running (for work on the checker).
    #[arg(long, value_name = "RUN_DIR")]
    pub recheck: Option<PathBuf>,
}

impl SoakArgs {
    pub fn run_length(&self) -> Duration {
        Duration::from_secs_f64(self.minutes.max(0.0) * 60.0)
    }
}
