//! Facts about the starter world that tests need without hard-coding it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

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

/// Every room's exits in the zone files of `dir`: room id → (direction →
/// target room id). Directions are the JSON keys (`north` … `down`).
pub fn exits_in(dir: &Path) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut exits = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("dir entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("zone file");
        let value: serde_json::Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{}: bad JSON: {e}", path.display()));
        for room in value["rooms"].as_array().expect("rooms") {
            let id = room["id"].as_str().expect("room id").to_string();
            let out = room["exits"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(d, t)| (d.clone(), t.as_str().expect("exit target").to_string()))
                        .collect()
                })
                .unwrap_or_default();
            exits.insert(id, out);
        }
    }
    exits
}

/// The zone part of a room id (`city:square` → `city`).
pub fn zone_of(room: &str) -> &str {
    room.split_once(':').map_or(room, |(z, _)| z)
}

/// Directions in the order a path search tries them, so paths are stable.
const DIRECTIONS: [&str; 6] = ["north", "south", "east", "west", "up", "down"];

/// A shortest walk in the starter world from `from_room` to any room of
/// `zone`: the directions to type, the last one crossing into `zone`.
/// Panics when `zone` cannot be reached (a test fixture is wrong).
pub fn path_to_zone(from_room: &str, zone: &str) -> Vec<String> {
    path_to_zone_in(&world_dir(), from_room, zone)
}

/// [`path_to_zone`] over the zone files of `dir`. Breadth first, trying
/// directions in a fixed order, so the same world always gives the same path.
pub fn path_to_zone_in(dir: &Path, from_room: &str, zone: &str) -> Vec<String> {
    let exits = exits_in(dir);
    let mut came_from: BTreeMap<String, (String, String)> = BTreeMap::new();
    let mut queue = VecDeque::from([from_room.to_string()]);
    let mut seen = BTreeSet::from([from_room.to_string()]);
    while let Some(room) = queue.pop_front() {
        if zone_of(&room) == zone && room != from_room {
            let mut path = Vec::new();
            let mut at = room;
            while let Some((prev, dir)) = came_from.get(&at) {
                path.push(dir.clone());
                at = prev.clone();
            }
            path.reverse();
            return path;
        }
        let Some(out) = exits.get(&room) else {
            continue;
        };
        for dir in DIRECTIONS {
            if let Some(to) = out.get(dir)
                && seen.insert(to.clone())
            {
                came_from.insert(to.clone(), (room.clone(), dir.to_string()));
                queue.push_back(to.clone());
            }
        }
    }
    panic!(
        "no path from {from_room} into zone {zone} in {}",
        dir.display()
    )
}

/// The room reached by walking `dirs` from `from_room` in the starter world.
/// Panics on a direction with no exit.
pub fn walk(from_room: &str, dirs: &[String]) -> String {
    let exits = exits_in(&world_dir());
    dirs.iter().fold(from_room.to_string(), |room, dir| {
        exits
            .get(&room)
            .and_then(|out| out.get(dir))
            .unwrap_or_else(|| panic!("no exit {dir} from {room}"))
            .clone()
    })
}

/// `start_room` from the starter world's `world.toml`.
pub fn start_room() -> String {
    let text = std::fs::read_to_string(world_dir().join("world.toml")).expect("world.toml");
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("start_room"))
        .filter_map(|rest| rest.trim_start().strip_prefix('='))
        .map(|v| v.trim().trim_matches('"').to_string())
        .next()
        .expect("start_room in world.toml")
}

/// Copy the starter world's files into `dest` (created), for tests that
/// break one of them.
pub fn copy_world(dest: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dest)?;
    for entry in std::fs::read_dir(world_dir())? {
        let path = entry?.path();
        if path.is_file() {
            std::fs::copy(&path, dest.join(path.file_name().expect("file name")))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_reach_the_zone_and_cross_only_on_the_last_step() {
        let start = start_room();
        for zone in starter_zones() {
            if zone == zone_of(&start) {
                continue;
            }
            let path = path_to_zone(&start, &zone);
            assert!(!path.is_empty(), "{zone}");
            assert_eq!(zone_of(&walk(&start, &path)), zone);
            let before = walk(&start, &path[..path.len() - 1]);
            assert_ne!(zone_of(&before), zone, "{path:?}");
        }
        assert_eq!(
            path_to_zone("city:square", "forest"),
            ["west", "west", "west"]
        );
    }
}
