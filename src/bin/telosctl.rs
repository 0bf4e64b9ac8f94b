//! `telosctl`: the Telos operator CLI.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use telos_world::directory::Directory;
use telos_world::store::Store;

/// Operate a Telos cluster.
#[derive(Parser)]
#[command(name = "telosctl", version, about)]
struct Cli {
    /// Redis URL of the cluster.
    #[arg(
        long,
        env = "TELOS_REDIS_URL",
        default_value = "redis://127.0.0.1:6379",
        global = true
    )]
    redis_url: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write the cluster handoff keypair and the snapshot keypair into DIR.
    Keygen { dir: PathBuf },
    /// Shards and zones of the cluster.
    Status {
        /// One JSON object instead of tables.
        #[arg(long)]
        json: bool,
    },
    /// Set a character's trust tier (takes effect at its next login or handoff).
    Tier { name: String, tier: String },
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let cli = Cli::parse();
    if let Err(e) = run(cli).await {
        eprintln!("telosctl: {e:#}");
        std::process::exit(1);
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Keygen { dir } => {
            telos_world::handoff::keys::generate(&dir)?;
            println!(
                "wrote the handoff and snapshot keypairs to {}",
                dir.display()
            );
        }
        Command::Status { json } => status(&cli.redis_url, json).await?,
        Command::Tier { name, tier } => {
            let tier: telos_world::game::Tier = tier.parse().map_err(|_| {
                anyhow::anyhow!("unknown tier {tier:?}: use player, builder or admin")
            })?;
            let store = Store::connect(&cli.redis_url).await?;
            store.set_tier(&name, &tier.to_string()).await?;
            println!("{name} is now {tier} (from their next login or handoff)");
        }
    }
    Ok(())
}

async fn status(redis_url: &str, json: bool) -> anyhow::Result<()> {
    let dir = Directory::connect(redis_url).await?;
    let shards = dir.shards().await?;
    let zones = dir.zones().await?;
    if json {
        let value = serde_json::json!({
            "shards": shards.iter().map(|s| serde_json::json!({
                "id": s.id, "addr": s.addr, "state": s.state.to_string(),
                "players": s.players, "capacity": s.capacity,
            })).collect::<Vec<_>>(),
            "zones": zones.iter().map(|z| serde_json::json!({
                "id": z.id, "owner": z.owner, "gen": z.r#gen, "players": z.players,
                "transfer": serde_json::Value::Null,
            })).collect::<Vec<_>>(),
        });
        println!("{value}");
        return Ok(());
    }
    println!(
        "{:<20} {:<22} {:<9} {:>8} {:>9}",
        "SHARD", "ADDR", "STATE", "PLAYERS", "CAPACITY"
    );
    for s in &shards {
        println!(
            "{:<20} {:<22} {:<9} {:>8} {:>9}",
            s.id, s.addr, s.state, s.players, s.capacity
        );
    }
    println!();
    println!(
        "{:<20} {:<20} {:>6} {:>8} TRANSFER",
        "ZONE", "OWNER", "GEN", "PLAYERS"
    );
    for z in &zones {
        println!(
            "{:<20} {:<20} {:>6} {:>8} -",
            z.id,
            z.owner.as_deref().unwrap_or("-"),
            z.r#gen,
            z.players
        );
    }
    Ok(())
}
