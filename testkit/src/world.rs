//! Facts about the starter world that tests need without hard-coding it:
//! its zones and rooms ([`WorldMap`]), and routes through it (the one path
//! finder, [`WorldMap::path`]).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::process::repo_root;

/// The starter world folder.
pub fn world_dir() -> PathBuf {
    repo_root().join("config/world")
}

/// Ids of the non-instanced zones of the starter world, sorted.
pub fn starter_zones() -> Vec<String> {
    WorldMap::starter()
        .zones()
        .into_iter()
        .map(str::to_string)
        .collect()
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
/// Panics on an unreadable world (a test fixture is wrong).
pub fn exits_in(dir: &Path) -> BTreeMap<String, BTreeMap<String, String>> {
    WorldMap::load(dir)
        .unwrap_or_else(|e| panic!("{}: {e:#}", dir.display()))
        .rooms
        .into_iter()
        .map(|(id, room)| (id, room.exits))
        .collect()
}

/// The zone part of a room id (`city:square` → `city`).
pub fn zone_of(room: &str) -> &str {
    room.split_once(':').map_or(room, |(z, _)| z)
}

/// Directions in the order a path search tries them, so paths are stable.
pub const DIRECTIONS: [&str; 6] = ["north", "south", "east", "west", "up", "down"];

/// The direction back (`north` → `south`). Panics on a word that is not a
/// direction (a test fixture is wrong).
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

/// One room of a [`WorldMap`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomInfo {
    /// The name `look` prints on its own line.
    pub name: String,
    /// Direction → target room id.
    pub exits: BTreeMap<String, String>,
}

/// An exit from one zone into another: walking `dir` from `from` arrives
/// in `to`, a room of another zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crossing {
    pub from: String,
    pub dir: String,
    pub to: String,
}

/// Every room of a world folder, with names and exits, and which zones are
/// instanced templates.
#[derive(Debug, Clone, Default)]
pub struct WorldMap {
    rooms: BTreeMap<String, RoomInfo>,
    /// Zone ids that are not instanced templates.
    zones: BTreeSet<String>,
    instanced: BTreeSet<String>,
}

impl WorldMap {
    /// Read the zone files of `dir`.
    pub fn load(dir: &Path) -> anyhow::Result<WorldMap> {
        let mut map = WorldMap::default();
        let entries = std::fs::read_dir(dir).with_context(|| format!("{}", dir.display()))?;
        for entry in entries {
            let path = entry?.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let text = std::fs::read_to_string(&path)?;
            let zone: serde_json::Value = serde_json::from_str(&text)
                .with_context(|| format!("{}: bad JSON", path.display()))?;
            let id = zone["id"].as_str().context("zone id")?.to_string();
            if zone["instanced"].as_bool() == Some(true) {
                map.instanced.insert(id);
            } else {
                map.zones.insert(id);
            }
            for room in zone["rooms"].as_array().context("rooms")? {
                let id = room["id"].as_str().context("room id")?.to_string();
                let name = room["name"].as_str().unwrap_or_default().to_string();
                let mut exits = BTreeMap::new();
                for (d, t) in room["exits"].as_object().into_iter().flatten() {
                    exits.insert(d.clone(), t.as_str().context("exit target")?.to_string());
                }
                map.rooms.insert(id, RoomInfo { name, exits });
            }
        }
        Ok(map)
    }

    /// The starter world (panics if its files are unreadable).
    pub fn starter() -> WorldMap {
        WorldMap::load(&world_dir()).expect("the starter world")
    }

    /// The ids of the zones that are not instanced templates, sorted.
    pub fn zones(&self) -> Vec<&str> {
        self.zones.iter().map(String::as_str).collect()
    }

    pub fn room(&self, id: &str) -> Option<&RoomInfo> {
        self.rooms.get(id)
    }

    /// The room `dir` leads to from `room`.
    pub fn exit(&self, room: &str, dir: &str) -> Option<&str> {
        self.rooms.get(room)?.exits.get(dir).map(String::as_str)
    }

    /// The id of the room called `name` (the first, should two share it).
    pub fn room_named(&self, name: &str) -> Option<&str> {
        self.rooms
            .iter()
            .find(|(_, r)| r.name == name)
            .map(|(id, _)| id.as_str())
    }

    /// The ids of `zone`'s rooms, in order.
    pub fn rooms_in(&self, zone: &str) -> Vec<&str> {
        self.rooms
            .keys()
            .filter(|id| zone_of(id) == zone)
            .map(String::as_str)
            .collect()
    }

    /// Whether `room` belongs to an instanced zone template.
    pub fn is_instanced(&self, room: &str) -> bool {
        self.instanced.contains(zone_of(room))
    }

    /// Every exit from a zone into another one, both ends outside instanced
    /// templates, in room order.
    pub fn crossings(&self) -> Vec<Crossing> {
        let mut out = Vec::new();
        for (from, room) in &self.rooms {
            for (dir, to) in &room.exits {
                if zone_of(from) != zone_of(to)
                    && !self.is_instanced(from)
                    && !self.is_instanced(to)
                {
                    out.push(Crossing {
                        from: from.clone(),
                        dir: dir.clone(),
                        to: to.clone(),
                    });
                }
            }
        }
        out
    }

    /// A shortest walk from `from` to the first room satisfying `goal`
    /// (other than `from`): the directions to type. Breadth first, trying
    /// directions in a fixed order, so the same world always gives the same
    /// path; never through an instanced zone (walking in makes a private
    /// instance). `None` when no such room can be reached.
    pub fn path(&self, from: &str, goal: impl Fn(&str) -> bool) -> Option<Vec<String>> {
        let mut came_from: BTreeMap<String, (String, String)> = BTreeMap::new();
        let mut queue = VecDeque::from([from.to_string()]);
        let mut seen = BTreeSet::from([from.to_string()]);
        while let Some(room) = queue.pop_front() {
            if room != from && goal(&room) {
                let mut path = Vec::new();
                let mut at = room;
                while let Some((prev, dir)) = came_from.get(&at) {
                    path.push(dir.clone());
                    at = prev.clone();
                }
                path.reverse();
                return Some(path);
            }
            let Some(out) = self.rooms.get(&room) else {
                continue;
            };
            for dir in DIRECTIONS {
                if let Some(to) = out.exits.get(dir)
                    && !self.is_instanced(to)
                    && seen.insert(to.clone())
                {
                    came_from.insert(to.clone(), (room.clone(), dir.to_string()));
                    queue.push_back(to.clone());
                }
            }
        }
        None
    }
}

/// Every room's exits in the starter world (see [`exits_in`]).
pub fn exits() -> BTreeMap<String, BTreeMap<String, String>> {
    exits_in(&world_dir())
}

/// A shortest walk in the starter world from `from` to the first room
/// satisfying `goal` ([`WorldMap::path`]). Panics when there is none.
pub fn path(from: &str, goal: impl Fn(&str) -> bool) -> Vec<String> {
    WorldMap::starter()
        .path(from, goal)
        .unwrap_or_else(|| panic!("no path from {from}"))
}

/// A shortest walk in the starter world from `from_room` to any room of
/// `zone`: the directions to type, the last one crossing into `zone`.
/// Panics when `zone` cannot be reached (a test fixture is wrong).
pub fn path_to_zone(from_room: &str, zone: &str) -> Vec<String> {
    path_to_zone_in(&world_dir(), from_room, zone)
}

/// [`path_to_zone`] over the zone files of `dir` ([`WorldMap::path`]).
pub fn path_to_zone_in(dir: &Path, from_room: &str, zone: &str) -> Vec<String> {
    WorldMap::load(dir)
        .unwrap_or_else(|e| panic!("{}: {e:#}", dir.display()))
        .path(from_room, |r| zone_of(r) == zone)
        .unwrap_or_else(|| {
            panic!(
                "no path from {from_room} into zone {zone} in {}",
                dir.display()
            )
        })
}

/// The room reached by walking `dirs` from `from_room` in the starter world.
/// Panics on a direction with no exit.
pub fn walk(from_room: &str, dirs: &[String]) -> String {
    let map = WorldMap::starter();
    dirs.iter().fold(from_room.to_string(), |room, dir| {
        map.exit(&room, dir)
            .unwrap_or_else(|| panic!("no exit {dir} from {room}"))
            .to_string()
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

/// A copy of the starter world in a temp folder, removed on drop: a world
/// a test or bench changes (a zone made instanced, zones added) and runs
/// shards on ([`WorldOpts::world`](crate::process::WorldOpts::world)).
pub struct WorldCopy {
    dir: tempfile::TempDir,
}

impl WorldCopy {
    pub fn new() -> anyhow::Result<WorldCopy> {
        let dir = tempfile::Builder::new()
            .prefix("telos-test-world-")
            .tempdir()?;
        copy_world(dir.path())?;
        Ok(WorldCopy { dir })
    }

    /// The folder holding the copy.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
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

    #[test]
    fn the_map_knows_names_crossings_and_avoids_instances() {
        let map = WorldMap::starter();
        assert!(map.zones().contains(&"city") && !map.zones().contains(&"crypt"));
        assert_eq!(map.room("city:square").unwrap().name, "Market Square");
        assert_eq!(map.room_named("Market Square"), Some("city:square"));
        assert_eq!(map.exit("city:east_gate", "east"), Some("hills:foot"));
        let crossings = map.crossings();
        assert!(crossings.iter().all(|c| zone_of(&c.from) != zone_of(&c.to)));
        assert!(crossings.iter().all(|c| !c.to.starts_with("crypt:")));
        // Every crossing can be walked back.
        for c in &crossings {
            assert_eq!(
                map.exit(&c.to, opposite(&c.dir)),
                Some(c.from.as_str()),
                "{c:?}"
            );
        }
        // The instanced crypt is never on a path, even as a shortcut.
        assert_eq!(map.path("keep:chapel", |r| r.starts_with("crypt:")), None);
        assert_eq!(path("city:square", |r| r == "keep:chapel").len(), 8);
    }
}
