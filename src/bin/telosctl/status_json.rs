//! `telosctl status --json` prints exactly the shape CONTRACT.md gives, in
//! its order: `{"shards":[{"id","addr","state","players","capacity"}],
//! "zones":[{"id","owner","gen","players","transfer"}]}` (a zone whose last
//! transfer was cancelled lately also says why). The directory's rows carry
//! more (a shard's incarnation and version, a zone's home: the operator
//! page's); outside tools parse this shape, so it stays as written.

use serde::Serialize;
use telos_redis::status::{ClusterStatus, TransferRow};

#[derive(Serialize)]
struct Shard<'a> {
    id: &'a str,
    addr: &'a str,
    state: &'a str,
    players: u64,
    capacity: u64,
}

#[derive(Serialize)]
struct Zone<'a> {
    id: &'a str,
    owner: Option<&'a str>,
    r#gen: u64,
    players: u64,
    transfer: Option<&'a TransferRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    transfer_cancelled: Option<&'a str>,
}

#[derive(Serialize)]
struct Status<'a> {
    shards: Vec<Shard<'a>>,
    zones: Vec<Zone<'a>>,
}

pub fn contract_json(status: &ClusterStatus) -> String {
    let shards = status
        .shards
        .iter()
        .map(|s| Shard {
            id: &s.id,
            addr: &s.addr,
            state: &s.state,
            players: s.players,
            capacity: s.capacity,
        })
        .collect();
    let zones = status
        .zones
        .iter()
        .map(|z| Zone {
            id: &z.id,
            owner: z.owner.as_deref(),
            r#gen: z.r#gen,
            players: z.players,
            transfer: z.transfer.as_ref(),
            transfer_cancelled: z.transfer_cancelled.as_deref(),
        })
        .collect();
    serde_json::to_string(&Status { shards, zones }).expect("a status serializes")
}
