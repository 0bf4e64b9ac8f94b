//! `telosctl status --json` read into the checker's view of it.

use anyhow::Context;

use super::history::{StatusShard, StatusView, StatusZone};

/// `telosctl status --json` → the checker's view of it.
pub fn parse_status(json: &str) -> anyhow::Result<StatusView> {
    let v: serde_json::Value = serde_json::from_str(json.trim()).context("status JSON")?;
    let text = |v: &serde_json::Value, k: &str| v[k].as_str().unwrap_or_default().to_string();
    let shards = v["shards"]
        .as_array()
        .context("status: no shards")?
        .iter()
        .map(|s| StatusShard {
            id: text(s, "id"),
            state: text(s, "state"),
            players: s["players"].as_u64().unwrap_or(0),
        })
        .collect();
    let zones = v["zones"]
        .as_array()
        .context("status: no zones")?
        .iter()
        .map(|z| StatusZone {
            id: text(z, "id"),
            owner: z["owner"].as_str().map(str::to_string),
            players: z["players"].as_u64().unwrap_or(0),
            transfer: !z["transfer"].is_null(),
        })
        .collect();
    Ok(StatusView { shards, zones })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_json_parses_as_the_contract_shapes_it() {
        let json = r#"{"shards":[{"id":"shard-a","addr":"127.0.0.1:1","state":"live","players":2,"capacity":2000}],
            "zones":[{"id":"city","owner":"shard-a","gen":3,"players":2,"transfer":null},
                     {"id":"hills","owner":null,"gen":1,"players":0,"transfer":{"from":"a","to":"b","age_s":0.1}}]}"#;
        let s = parse_status(json).unwrap();
        assert_eq!(s.shards[0].state, "live");
        assert_eq!(s.zones[0].owner.as_deref(), Some("shard-a"));
        assert!(!s.zones[0].transfer);
        assert_eq!(s.zones[1].owner, None);
        assert!(s.zones[1].transfer);
        assert!(parse_status("{}").is_err());
    }
}
