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

/// How long a gate takes, at most, to find a shard cut off from it (but
/// not from Redis) and to have said so for the bound after which the
/// shard gives its zones up: a watch period and a probe's timeout (the
/// look that finds it), the mark's bound
/// (`telos_redis::directory::reach::REACH_BOUND`), and one more round (a
/// watch period and a probe's timeout: the report that crosses the bound).
/// A `cut-service` fault's answers are judged from a window this long.
pub const CUT_DETECTION: Duration = Duration::from_millis(500 + 1500 + 3000 + 500 + 1500);

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

/// Calm between two faults in the overlap mode, counted from when the
/// previous fault was undone (restart ready, SIGCONT, transfer done): the
/// cluster is usually still re-homing or adopting zones then.
pub const OVERLAP_CALM_MAX: Duration = Duration::from_secs(3);

/// A superseded shard process (restart-paused), once continued, must stop
/// within this: its leases ran out while it was paused, so it fences at
/// once; the margin is for its shutdown.
pub const SUPERSEDED_EXIT: Duration = Duration::from_secs(20);

/// Two actors serving one zone (one shard or two) are a violation once
/// they are seen together for longer than this: a handover between two
/// shards may show both open for a moment to samplers that scrape one
/// shard after the other, never for seconds.
pub const SERVED_TWICE_GRACE: Duration = Duration::from_secs(2);

/// How often the sampler scrapes every shard's `/metrics` for the zones it
/// serves and their generations.
pub const ACTORS_EVERY: Duration = Duration::from_millis(500);

/// Login attempts per source IP the soak's gate allows: every bot connects
/// from 127.0.0.1, so the per-IP limit meant for one attacker would throttle
/// the whole population after a gate crash.
pub const GATE_LOGIN_BURST: u32 = 1000;

/// The bots' password (letters and a dash; any 8+ characters do).
pub const PASSWORD: &str = "soak-password";

/// How faults follow each other (docs/soak.md, "Modes").
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    ValueEnum,
    Serialize,
    Deserialize,
)]
pub enum Mode {
    /// One fault at a time, each after the cluster is healthy again.
    #[default]
    Healthy,
    /// The next fault may come before the cluster is healthy again (while
    /// zones are re-homed, adopted, transferred), often at the zone the
    /// last one hit; still at most one shard down at a time.
    Overlap,
    /// Cut, one-way, slow and reset links instead of process faults.
    Partition,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Healthy => "healthy",
            Mode::Overlap => "overlap",
            Mode::Partition => "partition",
        }
    }

    /// The kinds a mode draws from unless `--faults` says otherwise.
    pub fn default_kinds(self) -> Vec<FaultKind> {
        use FaultKind::*;
        match self {
            Mode::Healthy => vec![Drain, Kill, Stop, Transfer, Redis, Gate],
            Mode::Overlap => vec![
                Drain,
                Kill,
                Stop,
                Transfer,
                Retransfer,
                Redis,
                Gate,
                RestartPaused,
            ],
            Mode::Partition => vec![CutRedis, CutPeers, CutGate, CutService, OneWay, Slow, Reset],
        }
    }

    /// Whether each fault waits for a healthy cluster first.
    pub fn waits_for_health(self) -> bool {
        self != Mode::Overlap
    }
}

/// The fault kinds a schedule draws from.
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
    /// Transfer a zone A→B, then within seconds B→C.
    Retransfer,
    /// SIGSTOP a shard, start a second process with its id on a new port,
    /// later SIGCONT the first: it must stop and write nothing.
    RestartPaused,
    /// Cut one shard's link to Redis (both ways), past the lease TTL.
    CutRedis,
    /// Cut one shard from every peer (both ways), Redis and the gate still
    /// reachable.
    CutPeers,
    /// Cut the gate from one shard (both ways).
    CutGate,
    /// Cut one shard from the gate and every peer (both ways), Redis still
    /// reachable, past the lease TTL: the one-sided cut (issue 30). The
    /// gate marks it unreachable, its leases are refused and its players
    /// are served by a peer within the cut's detection, not its length.
    CutService,
    /// Hold one direction of one of a shard's links: requests land, their
    /// answers do not come back (or the other way round).
    OneWay,
    /// Delay every byte of one of a shard's links by seconds.
    Slow,
    /// Reset every connection of one shard's links for a moment.
    Reset,
    /// A new shard joins the running cluster with one zone in its
    /// `--zones`: the rebalancer moves that zone to it while bots play.
    Join,
    /// SIGKILL the Redis primary (Redis runs behind Sentinel with a
    /// replica when this kind is drawn); Sentinel promotes the replica, the
    /// old primary comes back as its replica.
    Failover,
}

impl FaultKind {
    pub const ALL: [FaultKind; 17] = [
        FaultKind::Drain,
        FaultKind::Kill,
        FaultKind::Stop,
        FaultKind::Transfer,
        FaultKind::Redis,
        FaultKind::Gate,
        FaultKind::Retransfer,
        FaultKind::RestartPaused,
        FaultKind::CutRedis,
        FaultKind::CutPeers,
        FaultKind::CutGate,
        FaultKind::CutService,
        FaultKind::OneWay,
        FaultKind::Slow,
        FaultKind::Reset,
        FaultKind::Join,
        FaultKind::Failover,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Drain => "drain",
            FaultKind::Kill => "kill",
            FaultKind::Stop => "stop",
            FaultKind::Transfer => "transfer",
            FaultKind::Redis => "redis",
            FaultKind::Gate => "gate",
            FaultKind::Retransfer => "retransfer",
            FaultKind::RestartPaused => "restart-paused",
            FaultKind::CutRedis => "cut-redis",
            FaultKind::CutPeers => "cut-peers",
            FaultKind::CutGate => "cut-gate",
            FaultKind::CutService => "cut-service",
            FaultKind::OneWay => "one-way",
            FaultKind::Slow => "slow",
            FaultKind::Reset => "reset",
            FaultKind::Join => "join",
            FaultKind::Failover => "failover",
        }
    }

    /// Whether a shard's lease is at stake: a player's answer may then
    /// wait for the lease TTL beyond the fault (defect 5's rule: the
    /// fault's duration plus the lease TTL plus 2 s). A transfer (a
    /// join's rebalancer move is one) hands a lease over in place and a
    /// gate crash holds none.
    pub fn touches_a_lease(self) -> bool {
        !matches!(
            self,
            FaultKind::Transfer | FaultKind::Retransfer | FaultKind::Gate | FaultKind::Join
        )
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
    /// How faults follow each other: `healthy` (each after the cluster is
    /// healthy again), `overlap` (the next before it is, often at the same
    /// zone), `partition` (links cut, held one way, slowed, reset).
    #[arg(long, value_enum, default_value = "healthy")]
    pub mode: Mode,
    /// Fault kinds to draw from, comma separated [default: the mode's:
    /// healthy drain,kill,stop,transfer,redis,gate; overlap adds
    /// retransfer,restart-paused; partition
    /// cut-redis,cut-peers,cut-gate,one-way,slow,reset; join and failover
    /// only when named here; failover runs Redis behind Sentinel and goes
    /// with neither redis nor the partition kinds].
    #[arg(long, value_enum, value_delimiter = ',')]
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
    /// The kinds to draw from: `--faults`, else the mode's.
    pub fn kinds(&self) -> Vec<FaultKind> {
        if self.faults.is_empty() {
            self.mode.default_kinds()
        } else {
            self.faults.clone()
        }
    }

    /// Whether Redis runs behind Sentinel (a `failover` is drawn from).
    pub fn sentinel(&self) -> bool {
        self.kinds().contains(&FaultKind::Failover)
    }

    /// The kinds that cannot run together: behind Sentinel the shards find
    /// the primary themselves, so there is neither one Redis to kill nor a
    /// Redis link through the soak's proxies to cut.
    pub fn check_kinds(&self) -> anyhow::Result<()> {
        use FaultKind::*;
        let kinds = self.kinds();
        if let Some(k) = kinds.iter().find(|k| {
            self.sentinel()
                && matches!(
                    k,
                    Redis | CutRedis | CutPeers | CutGate | CutService | OneWay | Slow | Reset
                )
        }) {
            anyhow::bail!(
                "--faults: failover (Redis behind Sentinel) does not go with {}",
                k.name()
            );
        }
        Ok(())
    }

    pub fn run_length(&self) -> Duration {
        Duration::from_secs_f64(self.minutes.max(0.0) * 60.0)
    }
}
