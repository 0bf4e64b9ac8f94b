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

/// A room's number for clients (GMCP `Room.Info` `num`, what a mapper keys
/// on): FNV-1a (32-bit) of the template room id, folded into
/// `1..=i32::MAX` (Mudlet's room ids are positive 32-bit integers). It is a
/// function of the id alone, so a room has the same number on every shard,
/// after every transfer and restart, and in every copy of an instance (the
/// same layout maps the same). Two ids may collide (about one chance in 20
/// for a world of 10 000 rooms): a mapper then merges two rooms, which the
/// id (sent beside the number) tells apart.
pub fn room_num(room_id: &str) -> u32 {
    const FNV_OFFSET: u32 = 0x811c_9dc5;
    const FNV_PRIME: u32 = 0x0100_0193;
    let hash = template_room(room_id).bytes().fold(FNV_OFFSET, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(FNV_PRIME)
    });
    (hash & 0x7fff_ffff).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_num_is_fixed_by_the_id_and_shared_by_instances() {
        // Pinned: a client's saved map depends on these never changing.
        assert_eq!(room_num("forest:edge"), room_num("forest:edge"));
        assert_eq!(room_num("crypt#3:hall"), room_num("crypt:hall"));
        assert_ne!(room_num("forest:edge"), room_num("forest:clearing"));
        assert_eq!(room_num(""), 0x811c_9dc5 & 0x7fff_ffff);
        assert!((1..=i32::MAX as u32).contains(&room_num("city:gate")));
    }
}
