//! Room and zone ids, Telos's addressing (every process reads them): a room id is
//! `<zone>:<room>`, a private instance's zone id is `<template>#<n>`. One
//! rule, here: the runtime routes by it, every game names its rooms by it.

/// Longest zone id (the project contract: `[a-z0-9_]{1,32}`).
pub const MAX_ZONE_ID_LEN: usize = 32;

/// The zone part of a room id: everything before the first ':'.
pub fn zone_of(room_id: &str) -> &str {
    room_id.split_once(':').map_or(room_id, |(zone, _)| zone)
}

/// Instance-shaped ids (`crypt#3`) are never handoff or adoption targets.
pub fn is_instance_id(zone_id: &str) -> bool {
    zone_id.contains('#')
}

/// The template a zone id was made from: `crypt#3` → `crypt`; a plain zone
/// id is its own template.
pub fn template_of(zone_id: &str) -> &str {
    zone_id.split_once('#').map_or(zone_id, |(t, _)| t)
}

/// Renames a room into the hosted zone `zone_id` when it belongs to that
/// zone's template: (`crypt:hall`, `crypt#3`) → `crypt#3:hall`. Rooms of
/// other zones are returned unchanged.
pub fn instance_room(room_id: &str, zone_id: &str) -> String {
    match room_id.split_once(':') {
        Some((zone, rest)) if template_of(zone) == template_of(zone_id) => {
            format!("{zone_id}:{rest}")
        }
        _ => room_id.to_string(),
    }
}

/// The template room of a possibly instanced room id: `crypt#3:hall` → `crypt:hall`.
pub fn template_room(room_id: &str) -> String {
    match room_id.split_once(':') {
        Some((zone, rest)) => format!("{}:{rest}", template_of(zone)),
        None => room_id.to_string(),
    }
}

pub fn valid_zone_id(id: &str) -> bool {
    (1..=MAX_ZONE_ID_LEN).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}
