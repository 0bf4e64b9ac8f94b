//! The zone's keyed parts: only what changed is reported, and a zone
//! loaded from them is the zone that reported them.

use super::*;
use crate::game::zone_save::tests::zone;

fn keys(parts: &[StatePart]) -> Vec<&str> {
    parts.iter().map(|(k, _)| k.as_str()).collect()
}

/// What the store holds after `parts` were written over `held`.
fn apply(held: &mut BTreeMap<String, Vec<u8>>, parts: Vec<StatePart>) {
    for (k, v) in parts {
        match v {
            Some(v) => held.insert(k, v),
            None => held.remove(&k),
        };
    }
}

#[test]
fn a_fresh_zone_reports_every_part_once_then_only_what_changed() {
    let mut z = zone();
    let first = z.changed_parts();
    assert_eq!(
        keys(&first),
        [
            "floor:town:smithy",
            "floor:town:square",
            "mob:town:dog",
            "clock"
        ]
    );
    assert!(first[1].1.is_none(), "an empty floor is no part");
    assert!(z.changed_parts().is_empty(), "nothing changed since");

    // The helm moves from the smithy to the square: two floors, the clock
    // (the helm is out while carried) — not the dog.
    let helm = z.rooms.get_mut("town:smithy").unwrap().items.pop().unwrap();
    z.floor_changed("town:smithy");
    z.taken_out(std::slice::from_ref(&helm));
    z.rooms
        .get_mut("town:square")
        .unwrap()
        .items
        .push(helm.clone());
    z.floor_changed("town:square");
    z.put_back(std::slice::from_ref(&helm));
    let moved = z.changed_parts();
    assert_eq!(
        keys(&moved),
        ["floor:town:smithy", "floor:town:square", "clock"]
    );
    assert!(moved[0].1.is_none(), "the smithy's floor is gone");
}

#[test]
fn a_zone_loaded_from_its_parts_is_the_zone_that_wrote_them_and_reports_nothing() {
    let mut z = zone();
    let mut held = BTreeMap::new();
    apply(&mut held, z.changed_parts());
    z.mobs[0].hp = 7;
    z.mob_changed("town:dog");
    z.ticks = 41;
    z.clock_changed();
    apply(&mut held, z.changed_parts());
    let parts: Vec<(String, Vec<u8>)> = held.into_iter().collect();

    let mut fresh = zone();
    fresh.load_zone_parts(&parts).unwrap();
    assert_eq!(fresh.mobs()[0].hp, 7);
    assert_eq!(fresh.ticks, 41);
    assert_eq!(fresh.floor("town:smithy").len(), 1);
    assert!(
        fresh.changed_parts().is_empty(),
        "loaded: nothing to write back"
    );
    assert_eq!(fresh.dump_zone_json(), z.dump_zone_json());

    // A killed mob has no part: it stays gone until the reset.
    let without_dog: Vec<_> = parts
        .iter()
        .filter(|(k, _)| !k.starts_with("mob:"))
        .cloned()
        .collect();
    let mut fresh = zone();
    fresh.load_zone_parts(&without_dog).unwrap();
    assert!(fresh.mobs().is_empty());
    let before = fresh.dump_zone_json();
    assert!(
        fresh
            .load_zone_parts(&[("clock".into(), b"nope".to_vec())])
            .is_err()
    );
    assert_eq!(fresh.dump_zone_json(), before, "a bad part changes nothing");
}

#[test]
fn a_zone_loaded_whole_writes_every_part_at_its_first_commit() {
    let mut z = zone();
    z.changed_parts();
    let whole = z.dump_zone_json();
    let mut fresh = zone();
    fresh.changed_parts();
    fresh.load_zone_json(&whole).unwrap();
    assert_eq!(fresh.changed_parts().len(), 4, "every part, once");
}
