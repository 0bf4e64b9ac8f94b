//! Routes through the starter world, computed from the zone files.

use std::collections::{BTreeMap, HashMap, VecDeque};

use telos_testkit::world::world_dir;

/// room id -> (direction -> room id), over every zone file.
pub fn exits() -> HashMap<String, BTreeMap<String, String>> {
    let mut map = HashMap::new();
    for entry in std::fs::read_dir(world_dir()).expect("world dir") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let zone: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
        for room in zone["rooms"].as_array().expect("rooms") {
            let mut ex = BTreeMap::new();
            if let Some(obj) = room["exits"].as_object() {
                for (d, t) in obj {
                    ex.insert(d.clone(), t.as_str().expect("exit").to_string());
                }
            }
            map.insert(room["id"].as_str().expect("id").to_string(), ex);
        }
    }
    map
}

/// Directions from `from` to the first room satisfying `goal`.
pub fn path(from: &str, goal: impl Fn(&str) -> bool) -> Vec<String> {
    let exits = exits();
    let mut prev: HashMap<String, (String, String)> = HashMap::new();
    let mut queue = VecDeque::from([from.to_string()]);
    while let Some(room) = queue.pop_front() {
        if goal(&room) && room != from {
            let mut dirs = Vec::new();
            let mut at = room;
            while let Some((p, d)) = prev.get(&at) {
                dirs.push(d.clone());
                at = p.clone();
            }
            dirs.reverse();
            return dirs;
        }
        for (d, t) in exits.get(&room).into_iter().flatten() {
            if t != from && !prev.contains_key(t) && !t.starts_with("crypt:") {
                prev.insert(t.clone(), (room.clone(), d.clone()));
                queue.push_back(t.clone());
            }
        }
    }
    panic!("no path from {from}");
}

/// Directions from `from` into zone `zone`.
pub fn path_to_zone(from: &str, zone: &str) -> Vec<String> {
    let prefix = format!("{zone}:");
    path(from, |r| r.starts_with(&prefix))
}

pub fn opposite(dir: &str) -> &'static str {
    match dir {
        "north" => "south",
        "south" => "north",
        "east" => "west",
        "west" => "east",
        "up" => "down",
        "down" => "up",
        other => panic!("bad direction {other}"),
    }
}
