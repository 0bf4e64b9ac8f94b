//! Facts about the starter world that tests need without hard-coding it.

use std::path::PathBuf;

use crate::process::repo_root;

/// The starter world folder.
pub fn world_dir() -> PathBuf {
    repo_root().join("config/world")
}

/// Ids of the non-instanced zones of the starter world, sorted.
pub fn starter_zones() -> Vec<String> {
    let mut zones = Vec::new();
    for entry in std::fs::read_dir(world_dir()).expect("config/world") {
        let path = entry.expect("dir entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("zone file");
        let value: serde_json::Value = serde_json::from_str(&text).expect("zone json");
        if value["instanced"].as_bool() == Some(true) {
            continue;
        }
        zones.push(value["id"].as_str().expect("zone id").to_string());
    }
    zones.sort();
    zones
}

/// The first exit listed in a `look` output's "Exits:" line, if any.
pub fn first_exit(look: &str) -> Option<String> {
    let line = look
        .lines()
        .find(|l| l.trim_start().starts_with("Exits:"))?;
    line.split_once(':')?
        .1
        .split([' ', ','])
        .map(|w| w.trim_matches(|c: char| !c.is_ascii_alphabetic()))
        .find(|w| !w.is_empty() && *w != "none")
        .map(str::to_string)
}
