//! `telosctl`: the Telos operator CLI.

mod admin;
mod probe;
mod rebalance;
mod status_json;

use std::path::PathBuf;

use std::time::Duration;

use clap::{Parser, Subcommand};
use telos_redis::directory::Directory;
use telos_redis::directory::transfer::Proposal;
use telos_redis::status::{cluster_status, render};
use telos_redis::store::Store;
use telos_redis::target::RedisTarget;
use tokio::time::Instant;

/// Operate a Telos cluster.
#[derive(Parser)]
#[command(name = "telosctl", version, about)]
struct Cli {
    /// Redis URL of the cluster (`redis+sentinel://HOST:PORT,HOST:PORT/MASTER`
    /// finds the primary through Sentinel).
    #[arg(
        long,
        env = "TELOS_REDIS_URL",
        // Never shown in --help: it may hold the password.
        hide_env_values = true,
        default_value = "redis://127.0.0.1:6379",
        global = true
    )]
    redis_url: String,
    /// Sentinels (`HOST:PORT,HOST:PORT`) to find the Redis primary through,
    /// with --redis-master-name (instead of --redis-url).
    #[arg(long, env = "TELOS_REDIS_SENTINELS", global = true)]
    redis_sentinels: Option<String>,
    /// The name the Sentinels monitor the primary under (with --redis-sentinels).
    #[arg(long, env = "TELOS_REDIS_MASTER_NAME", global = true)]
    redis_master_name: Option<String>,
    /// File holding the Redis password (trailing newline trimmed); the URL's
    /// user, if any, stays the ACL user.
    #[arg(long, env = "TELOS_REDIS_PASSWORD_FILE", global = true)]
    redis_password_file: Option<PathBuf>,
    /// PEM CA that verifies a rediss:// Redis's certificate [default: the system's roots].
    #[arg(long, env = "TELOS_REDIS_CA", global = true)]
    redis_ca: Option<PathBuf>,
    /// Key folder with the operator certificate (`operator.crt`/`.key`,
    /// `ca.crt`): mutual TLS to a shard's Admin service (`--shard`).
    #[arg(long, env = "TELOS_KEYS", global = true, value_name = "DIR")]
    keys: Option<PathBuf>,
    /// Ask this shard's Admin service (`host:port`) instead of reading
    /// Redis: `status` and `transfer` (with `--keys` on a keyed cluster).
    #[arg(long, env = "TELOS_SHARD", global = true, value_name = "ADDR")]
    shard: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write the cluster handoff keypair, the snapshot keypair, a cluster
    /// CA and one certificate per role (shard, gate, operator) into DIR.
    Keygen { dir: PathBuf },
    /// Issue another certificate from the CA in DIR (`ca.crt`, `ca.key`)
    /// into a key folder of its own (`--out`, default DIR/NAME).
    Cert {
        dir: PathBuf,
        /// shard, gate or operator.
        #[arg(long)]
        role: telos_tls::Role,
        /// Who holds it (the certificate's common name). For a shard, its
        /// shard id: a shard certificate speaks for that shard only.
        #[arg(long)]
        name: String,
        /// The folder to write `<role>.crt`, `<role>.key` and `ca.crt` into.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Days the certificate is valid.
        #[arg(long, default_value_t = telos_tls::issue::DEFAULT_LEAF_DAYS)]
        days: u32,
    },
    /// Shards and zones of the cluster.
    Status {
        /// One JSON object instead of tables.
        #[arg(long)]
        json: bool,
    },
    /// Set a character's trust tier (takes effect at its next login or handoff).
    Tier { name: String, tier: String },
    /// Propose moving a zone to another shard (players see a short pause).
    Transfer {
        zone: String,
        /// Target shard id.
        #[arg(long)]
        to: String,
        /// Block until the transfer completes (exit 0) or fails; optional
        /// limit in seconds.
        #[arg(long, num_args = 0..=1, default_missing_value = "60")]
        wait: Option<u64>,
    },
    /// What the rebalancer would move now and why (`--plan`), or start
    /// those moves (`--apply`).
    Rebalance(rebalance::RebalanceArgs),
    /// GET a health endpoint (`http://HOST:PORT/readyz` or `/livez` of a
    /// world's or the gate's --metrics-listen): exit 0 when it answers 2xx.
    /// For probes in images without an HTTP client.
    Probe {
        url: String,
        /// Seconds to wait for the answer.
        #[arg(long, default_value_t = 3)]
        timeout: u64,
    },
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let cli = Cli::parse();
    if let Err(e) = run(cli).await {
        eprintln!("telosctl: {e:#}");
        std::process::exit(1);
    }
}

impl Cli {
    /// Redis and its credentials, from the flags (read only by the commands
    /// that talk to Redis: `keygen` needs no password file).
    fn redis(&self) -> anyhow::Result<RedisTarget> {
        // --redis-url has a default: the Sentinel flags replace it.
        let url = match (&self.redis_sentinels, &self.redis_master_name) {
            (None, None) => self.redis_url.clone(),
            (sentinels, master) => telos_redis::sentinel::url_from_flags(
                None,
                sentinels.clone(),
                master.clone(),
                &self.redis_url,
            )
            .map_err(anyhow::Error::msg)?,
        };
        Ok(RedisTarget::from_files(
            url,
            self.redis_password_file.as_deref(),
            self.redis_ca.as_deref(),
        )?)
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let admin = match (&cli.shard, &cli.command) {
        (Some(_), Command::Status { .. } | Command::Transfer { .. }) => {
            Some(admin::connect(&cli).await?)
        }
        _ => None,
    };
    if let Some(admin) = admin {
        return match cli.command {
            Command::Status { json } => admin::status(&admin, json).await,
            Command::Transfer { zone, to, wait } => admin::transfer(&admin, &zone, &to, wait).await,
            _ => unreachable!("only status and transfer connect to a shard"),
        };
    }
    let redis = cli.redis();
    if let (
        Ok(target),
        Command::Status { .. }
        | Command::Transfer { .. }
        | Command::Tier { .. }
        | Command::Rebalance(_),
    ) = (&redis, &cli.command)
    {
        reachable(target).await?;
    }
    match cli.command {
        Command::Keygen { dir } => keygen(&dir)?,
        Command::Cert {
            dir,
            role,
            name,
            out,
            days,
        } => {
            let out = out.unwrap_or_else(|| dir.join(&name));
            let leaf = telos_tls::issue::Leaf {
                role,
                name: &name,
                days,
            };
            for file in telos_tls::issue::issue(&dir, &leaf, &out)? {
                println!("wrote {}", file.display());
            }
        }
        Command::Status { json } => status(&redis?, json).await?,
        Command::Transfer { zone, to, wait } => transfer(&redis?, &zone, &to, wait).await?,
        Command::Rebalance(args) => rebalance::rebalance(&redis?, args).await?,
        Command::Probe { url, timeout } => {
            println!(
                "{}",
                probe::probe(&url, Duration::from_secs(timeout)).await?
            );
        }
        Command::Tier { name, tier } => {
            let tier: telos_world::game::Tier = tier.parse().map_err(|_| {
                anyhow::anyhow!("unknown tier {tier:?}: use player, builder or admin")
            })?;
            let store = Store::connect(redis?).await?;
            store
                .set_tier(&name, &tier.to_string())
                .await
                .map_err(|e| anyhow::anyhow!("{e}: {name}"))?;
            println!("{name} is now {tier} (from their next login or handoff)");
        }
    }
    Ok(())
}

/// Fail at once, in one line, when Redis is not there: which URL was tried
/// and how to name another (the self-reconnecting connection would wait
/// out its first-connect deadline and repeat the refusal in its chain).
async fn reachable(target: &RedisTarget) -> anyhow::Result<()> {
    use telos_redis::directory::connection::{ConnectError, probe};
    match probe(target).await {
        Ok(()) => Ok(()),
        Err(e @ ConnectError::Unreachable { .. }) => anyhow::bail!("{e}"),
        Err(e) => Err(e.into()),
    }
}

/// Write whatever of the key folder is missing: a folder written before
/// keygen wrote certificates gets its CA and certificates, its keypairs
/// untouched. Nothing is ever overwritten.
fn keygen(dir: &std::path::Path) -> anyhow::Result<()> {
    if telos_world::handoff::keys::exists(dir) {
        println!(
            "{} already holds the handoff and snapshot keypairs; kept",
            dir.display()
        );
    } else {
        telos_world::handoff::keys::generate(dir)?;
        println!(
            "wrote the handoff and snapshot keypairs to {}",
            dir.display()
        );
    }
    telos_tls::issue::generate(dir)?;
    println!(
        "wrote the cluster CA (ca.crt, ca.key) and the shard, gate and operator certificates to {}",
        dir.display()
    );
    Ok(())
}

async fn status(redis: &RedisTarget, json: bool) -> anyhow::Result<()> {
    let dir = Directory::connect(redis).await?;
    let status = cluster_status(&dir).await?;
    if json {
        println!("{}", status_json::contract_json(&status));
    } else {
        print!("{}", render(&status));
    }
    Ok(())
}

/// How often `transfer --wait` re-reads the directory.
const WAIT_POLL: Duration = Duration::from_millis(100);

async fn transfer(
    redis: &RedisTarget,
    zone: &str,
    to: &str,
    wait: Option<u64>,
) -> anyhow::Result<()> {
    let dir = Directory::connect(redis).await?;
    match dir.propose_operator_transfer(zone, to).await? {
        Ok(Proposal::Recorded { from }) => {
            println!("transfer of {zone} from {from} to {to} recorded")
        }
        Ok(Proposal::AlreadyPending { from }) => {
            println!("transfer of {zone} from {from} to {to} is already pending")
        }
        Ok(Proposal::AlreadyThere) => {
            println!("{zone} is already on {to}");
            return Ok(());
        }
        Err(rejected) => anyhow::bail!("transfer refused: {rejected}"),
    }
    let Some(secs) = wait else { return Ok(()) };
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let pending = dir.transfer(zone).await?;
        let owner = dir.zone_owner(zone).await?.map(|(o, _)| o);
        if pending.is_none() {
            if owner.as_deref() == Some(to) {
                println!("transfer of {zone} to {to} completed");
                return Ok(());
            }
            if let Some(why) = dir.transfer_cancel_reason(zone).await? {
                anyhow::bail!("transfer of {zone} was cancelled: {why}");
            }
        }
        if Instant::now() >= deadline {
            anyhow::bail!("transfer of {zone} to {to} did not complete within {secs} s");
        }
        tokio::time::sleep(WAIT_POLL).await;
    }
}
