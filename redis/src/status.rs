//! The cluster as an operator sees it: shards, zones, pending transfers.
//! One builder shared by `telosctl status` and `Admin.Status`.

use serde::{Deserialize, Serialize};

use crate::directory::{Directory, DirectoryError};

#[derive(Debug, Serialize, Deserialize)]
pub struct ShardRow {
    pub id: String,
    pub addr: String,
    pub state: String,
    pub players: u64,
    pub capacity: u64,
    /// The process publishing the entry (one per start: a restart shows
    /// as a higher one).
    #[serde(default)]
    pub incarnation: u64,
    /// The build version that process announced, if any.
    #[serde(default)]
    pub version: Option<String>,
    /// The handoff protocol version it speaks.
    #[serde(default)]
    pub handoff_version: u32,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct TransferRow {
    pub from: String,
    pub to: String,
    /// Seconds since the record was written (Redis server clock).
    pub age_s: f64,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct ZoneRow {
    pub id: String,
    pub owner: Option<String>,
    /// The shard whose `--zones` lists it (or an operator's transfer
    /// made it): where the rebalancer brings it back.
    #[serde(default)]
    pub home: Option<String>,
    pub r#gen: u64,
    pub players: u64,
    pub transfer: Option<TransferRow>,
    /// Why the zone's last transfer was cancelled, if recently.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transfer_cancelled: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct ClusterStatus {
    pub shards: Vec<ShardRow>,
    pub zones: Vec<ZoneRow>,
}

pub async fn cluster_status(dir: &Directory) -> Result<ClusterStatus, DirectoryError> {
    let now = dir.server_time_ms().await?;
    // One registry read for both tables: their player counts agree.
    let (shards, zone_rows) = dir.shards_and_zones().await?;
    let ids: Vec<String> = shards.iter().map(|s| s.id.clone()).collect();
    let versions = dir.shard_versions(&ids).await?;
    let shards = shards
        .into_iter()
        .zip(versions)
        .map(|(s, version)| ShardRow {
            id: s.id,
            addr: s.addr,
            state: s.state.to_string(),
            players: s.players,
            capacity: s.capacity,
            incarnation: s.incarnation,
            version,
            handoff_version: s.handoff_version,
        })
        .collect();
    let zone_ids: Vec<String> = zone_rows.iter().map(|z| z.id.clone()).collect();
    let mut homes = dir.homes(&zone_ids).await?;
    let transfers = dir.transfers().await?;
    let mut zones = Vec::new();
    for z in zone_rows {
        let transfer = transfers
            .iter()
            .find(|t| t.zone == z.id)
            .map(|t| TransferRow {
                from: t.from.clone(),
                to: t.to.clone(),
                age_s: now.saturating_sub(t.created_ms) as f64 / 1000.0,
            });
        let transfer_cancelled = match transfer {
            Some(_) => None,
            None => dir.transfer_cancel_reason(&z.id).await?,
        };
        zones.push(ZoneRow {
            home: homes.remove(&z.id),
            id: z.id,
            owner: z.owner,
            r#gen: z.r#gen,
            players: z.players,
            transfer,
            transfer_cancelled,
        });
    }
    Ok(ClusterStatus { shards, zones })
}

/// The human-readable tables of `telosctl status`.
pub fn render(status: &ClusterStatus) -> String {
    let mut out = format!(
        "{:<20} {:<22} {:<9} {:>8} {:>9}\n",
        "SHARD", "ADDR", "STATE", "PLAYERS", "CAPACITY"
    );
    for s in &status.shards {
        out += &format!(
            "{:<20} {:<22} {:<9} {:>8} {:>9}\n",
            s.id, s.addr, s.state, s.players, s.capacity
        );
    }
    out += &format!(
        "\n{:<16} {:<20} {:>6} {:>8}  TRANSFER\n",
        "ZONE", "OWNER", "GEN", "PLAYERS"
    );
    for z in &status.zones {
        let transfer = match (&z.transfer, &z.transfer_cancelled) {
            (Some(t), _) => format!("{} -> {} (pending {:.1} s)", t.from, t.to, t.age_s),
            (None, Some(why)) => format!("cancelled: {why}"),
            (None, None) => "-".into(),
        };
        out += &format!(
            "{:<16} {:<20} {:>6} {:>8}  {}\n",
            z.id,
            z.owner.as_deref().unwrap_or("-"),
            z.r#gen,
            z.players,
            transfer
        );
    }
    out
}
