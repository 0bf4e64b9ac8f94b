//! Static world definitions: one JSON file per zone (the project contract, "World files"),
//! loaded and validated once at start. This is the only file of the game
//! model that touches the filesystem.
//!
//! Instances: a zone file with `"instanced": true` is a template; a live copy
//! is hosted as `<template>#<n>` and its rooms are named
//! `<template>#<n>:<name>` so a saved room id always says which copy it was in.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use crate::model::direction::Direction;
pub use crate::model::ids::{
    MAX_ZONE_ID_LEN, instance_room, is_instance_id, template_of, template_room, valid_zone_id,
    zone_of,
};
use serde::{Deserialize, Serialize};

/// The optional file naming the start room.
pub const WORLD_TOML: &str = "world.toml";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoomDef {
    pub id: String,
    pub name: String,
    pub description: String,
    #[serde(default)]
    pub exits: BTreeMap<Direction, String>,
}

/// Where a wearable item goes; the slot name is the key of
/// `Character::equipment`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WearSlot {
    Head,
    Neck,
    Body,
    Hands,
    Feet,
    Held,
}

impl WearSlot {
    pub fn name(&self) -> &'static str {
        match self {
            WearSlot::Head => "head",
            WearSlot::Neck => "neck",
            WearSlot::Body => "body",
            WearSlot::Hands => "hands",
            WearSlot::Feet => "feet",
            WearSlot::Held => "held",
        }
    }
}

/// What eating an item does: heals at once, then leaves a timed affect that
/// adds `regen` hit points per tick until it wears off.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Food {
    /// Adjective shown in messages: "You feel <affect>." / "You no longer feel <affect>."
    pub affect: String,
    pub ticks: u32,
    #[serde(default)]
    pub heal: u32,
    #[serde(default)]
    pub regen: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ItemDef {
    pub id: String,
    pub name: String,
    pub keywords: Vec<String>,
    /// Where the item lies at zone reset; `None` for items that only exist
    /// because a player carries one.
    #[serde(default)]
    pub room: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub slot: Option<WearSlot>,
    #[serde(default)]
    pub food: Option<Food>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MobDef {
    pub id: String,
    pub name: String,
    pub keywords: Vec<String>,
    pub room: String,
    #[serde(default)]
    pub wander: bool,
    #[serde(default)]
    pub description: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZoneDef {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub instanced: bool,
    pub rooms: Vec<RoomDef>,
    #[serde(default)]
    pub items: Vec<ItemDef>,
    #[serde(default)]
    pub mobs: Vec<MobDef>,
}

impl ZoneDef {
    pub fn room(&self, room_id: &str) -> Option<&RoomDef> {
        self.rooms.iter().find(|r| r.id == room_id)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorldDef {
    pub zones: BTreeMap<String, Arc<ZoneDef>>,
    pub start_room: String,
}

impl WorldDef {
    /// Any zone's room. An instance room (`crypt#3:hall`) resolves to its
    /// template's definition (`crypt:hall`).
    pub fn room(&self, room_id: &str) -> Option<&RoomDef> {
        let zone = self.zone(template_of(zone_of(room_id)))?;
        zone.room(&template_room(room_id))
    }

    pub fn zone(&self, zone_id: &str) -> Option<&Arc<ZoneDef>> {
        self.zones.get(zone_id)
    }
}

/// The name part of a room id: non-empty, no whitespace, no ':' or '#', so a
/// room id always splits one way.
fn valid_room_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[derive(Debug, thiserror::Error)]
pub enum WorldError {
    #[error("{}: cannot read: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: bad JSON: {source}", file.display())]
    Json {
        file: PathBuf,
        source: serde_json::Error,
    },
    #[error("{}: bad TOML: {message}", file.display())]
    Toml { file: PathBuf, message: String },
    #[error("{}: zone id {id:?} is not [a-z0-9_]{{1,32}}", file.display())]
    BadZoneId { file: PathBuf, id: String },
    #[error("{}: zone id {id} does not match the file name (expected {id}.json)", file.display())]
    FileNameMismatch { file: PathBuf, id: String },
    #[error("{}: zone {id} has no rooms", file.display())]
    NoRooms { file: PathBuf, id: String },
    #[error("{}: room id {id} must be {zone}:<name> with name [A-Za-z0-9_-]", file.display())]
    BadRoomId {
        file: PathBuf,
        id: String,
        zone: String,
    },
    #[error("{}: duplicate {kind} id {id}", file.display())]
    Duplicate {
        file: PathBuf,
        kind: &'static str,
        id: String,
    },
    #[error("{}: exit {dir} of room {room} leads to unknown room {target}", file.display())]
    UnknownExit {
        file: PathBuf,
        room: String,
        dir: Direction,
        target: String,
    },
    #[error("{}: {kind} {id} is placed in room {room}, which is not a room of zone {zone}", file.display())]
    Misplaced {
        file: PathBuf,
        kind: &'static str,
        id: String,
        room: String,
        zone: String,
    },
    #[error("{}: start_room {room} is not a room of any non-instanced zone", file.display())]
    BadStartRoom { file: PathBuf, room: String },
    #[error("{}: no zone files (*.json) with a non-instanced zone", dir.display())]
    NoZones { dir: PathBuf },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WorldToml {
    start_room: Option<String>,
}

/// Loads and validates every `*.json` zone file in `dir` (other files are
/// ignored) plus the optional `world.toml`.
pub fn load_world(dir: &Path) -> Result<WorldDef, WorldError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| WorldError::Io { path, source }
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io(dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json") && p.is_file())
        .collect();
    // Sorted so "alphabetically first zone file" and error order are stable.
    files.sort();

    let mut zones = BTreeMap::new();
    let mut owner: BTreeMap<&'static str, BTreeSet<String>> = BTreeMap::new();
    let mut zone_files = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).map_err(io(file))?;
        let zone: ZoneDef = serde_json::from_str(&text).map_err(|source| WorldError::Json {
            file: file.clone(),
            source,
        })?;
        check_zone(file, &zone, &mut owner)?;
        zone_files.push((file.clone(), zone.id.clone()));
        zones.insert(zone.id.clone(), Arc::new(zone));
    }

    let rooms = owner.remove("room").unwrap_or_default();
    for (file, id) in &zone_files {
        for room in &zones[id].rooms {
            for (dir, target) in &room.exits {
                if !rooms.contains(target) {
                    return Err(WorldError::UnknownExit {
                        file: file.clone(),
                        room: room.id.clone(),
                        dir: *dir,
                        target: target.clone(),
                    });
                }
            }
        }
    }

    let start_room = start_room(dir, &zones)?;
    Ok(WorldDef { zones, start_room })
}

/// Checks one zone on its own and records its ids in `owner` (kind → ids
/// seen so far) to catch duplicates across files.
fn check_zone(
    file: &Path,
    zone: &ZoneDef,
    owner: &mut BTreeMap<&'static str, BTreeSet<String>>,
) -> Result<(), WorldError> {
    let file_buf = || file.to_path_buf();
    if !valid_zone_id(&zone.id) {
        return Err(WorldError::BadZoneId {
            file: file_buf(),
            id: zone.id.clone(),
        });
    }
    if file.file_stem().and_then(|s| s.to_str()) != Some(zone.id.as_str()) {
        return Err(WorldError::FileNameMismatch {
            file: file_buf(),
            id: zone.id.clone(),
        });
    }
    if zone.rooms.is_empty() {
        return Err(WorldError::NoRooms {
            file: file_buf(),
            id: zone.id.clone(),
        });
    }
    let mut claim = |kind: &'static str, id: &str| {
        if owner.entry(kind).or_default().insert(id.to_string()) {
            Ok(())
        } else {
            Err(WorldError::Duplicate {
                file: file_buf(),
                kind,
                id: id.to_string(),
            })
        }
    };
    claim("zone", &zone.id)?;
    for room in &zone.rooms {
        let ok = room
            .id
            .split_once(':')
            .is_some_and(|(z, name)| z == zone.id && valid_room_name(name));
        if !ok {
            return Err(WorldError::BadRoomId {
                file: file_buf(),
                id: room.id.clone(),
                zone: zone.id.clone(),
            });
        }
        claim("room", &room.id)?;
    }
    let placed = |kind: &'static str, id: &str, room: &str| {
        if zone.room(room).is_some() {
            Ok(())
        } else {
            Err(WorldError::Misplaced {
                file: file_buf(),
                kind,
                id: id.to_string(),
                room: room.to_string(),
                zone: zone.id.clone(),
            })
        }
    };
    for item in &zone.items {
        claim("item", &item.id)?;
        if let Some(room) = &item.room {
            placed("item", &item.id, room)?;
        }
    }
    for mob in &zone.mobs {
        claim("mob", &mob.id)?;
        placed("mob", &mob.id, &mob.room)?;
    }
    Ok(())
}

fn start_room(dir: &Path, zones: &BTreeMap<String, Arc<ZoneDef>>) -> Result<String, WorldError> {
    let file = dir.join(WORLD_TOML);
    let configured = match std::fs::read_to_string(&file) {
        Ok(text) => {
            let parsed: WorldToml = toml::from_str(&text).map_err(|e| WorldError::Toml {
                file: file.clone(),
                message: e.message().to_string(),
            })?;
            parsed.start_room
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => return Err(WorldError::Io { path: file, source }),
    };
    match configured {
        Some(room) => {
            let ok = zones
                .get(zone_of(&room))
                .is_some_and(|z| !z.instanced && z.room(&room).is_some());
            if ok {
                Ok(room)
            } else {
                Err(WorldError::BadStartRoom { file, room })
            }
        }
        // BTreeMap order is the alphabetical order of the file stems.
        None => zones
            .values()
            .find(|z| !z.instanced)
            .map(|z| z.rooms[0].id.clone())
            .ok_or_else(|| WorldError::NoZones {
                dir: dir.to_path_buf(),
            }),
    }
}

#[cfg(test)]
#[path = "world_tests.rs"]
mod tests;
