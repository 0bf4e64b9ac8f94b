use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A fresh, uniquely named scratch folder under the system temp dir.
struct TempDir(PathBuf);

impl TempDir {
    fn new(files: &[(&str, &str)]) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "telos-world-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text) in files {
            std::fs::write(dir.join(name), text).unwrap();
        }
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const CITY: &str = r#"{ "id": "city", "name": "City",
  "rooms": [ { "id": "city:gate", "name": "Gate", "description": "A gate.",
               "exits": { "east": "forest:edge" } },
             { "id": "city:square", "name": "Square", "description": "A square." } ] }"#;
const FOREST: &str = r#"{ "id": "forest", "name": "Forest",
  "rooms": [ { "id": "forest:edge", "name": "Edge", "description": "Pines.",
               "exits": { "west": "city:gate" } } ],
  "items": [ { "id": "forest:apple", "name": "a red apple", "keywords": ["apple"], "room": "forest:edge" } ],
  "mobs": [ { "id": "forest:fox", "name": "a red fox", "keywords": ["fox"], "room": "forest:edge", "wander": true } ] }"#;

fn load_err(files: &[(&str, &str)]) -> String {
    let dir = TempDir::new(files);
    load_world(&dir.0).unwrap_err().to_string()
}

#[test]
fn direction_parse_and_names() {
    for d in Direction::ALL {
        assert_eq!(Direction::parse(d.name()), Some(d));
        assert_eq!(Direction::parse(&d.name()[..1]), Some(d));
        assert_eq!(d.opposite().opposite(), d);
    }
    assert_eq!(Direction::parse("NORTH"), Some(Direction::North));
    assert_eq!(Direction::parse("no"), None);
    assert_eq!(Direction::parse(""), None);
    assert_eq!(Direction::parse("é"), None);
}

#[test]
fn id_helpers() {
    assert_eq!(zone_of("forest:edge"), "forest");
    assert_eq!(zone_of("crypt#3:hall"), "crypt#3");
    assert_eq!(zone_of("nocolon"), "nocolon");
    assert!(is_instance_id("crypt#3"));
    assert!(!is_instance_id("crypt"));
    assert_eq!(template_of("crypt#3"), "crypt");
    assert_eq!(instance_room("crypt:hall", "crypt#3"), "crypt#3:hall");
    assert_eq!(instance_room("hills:barrow", "crypt#3"), "hills:barrow");
    assert_eq!(template_room("crypt#3:hall"), "crypt:hall");
    assert!(valid_zone_id("a_1"));
    assert!(!valid_zone_id(""));
    assert!(!valid_zone_id("Forest"));
    assert!(!valid_zone_id("crypt#3"));
    assert!(!valid_zone_id(&"a".repeat(33)));
}

#[test]
fn loads_minimal_world_and_defaults_start_room() {
    let dir = TempDir::new(&[
        ("city.json", CITY),
        ("forest.json", FOREST),
        ("notes.txt", "not a zone"),
    ]);
    let world = load_world(&dir.0).unwrap();
    assert_eq!(world.zones.len(), 2);
    assert_eq!(world.start_room, "city:gate");
    assert_eq!(world.room("forest:edge").unwrap().name, "Edge");
    assert!(world.room("forest:nowhere").is_none());
    assert_eq!(world.zone("forest").unwrap().mobs.len(), 1);
}

#[test]
fn world_toml_sets_start_room() {
    let dir = TempDir::new(&[
        ("city.json", CITY),
        ("forest.json", FOREST),
        ("world.toml", "start_room = \"city:square\"\n"),
    ]);
    assert_eq!(load_world(&dir.0).unwrap().start_room, "city:square");
}

#[test]
fn world_toml_unknown_start_room_is_an_error() {
    let err = load_err(&[
        ("city.json", CITY),
        ("forest.json", FOREST),
        ("world.toml", "start_room = \"city:moon\"\n"),
    ]);
    assert!(
        err.contains("world.toml") && err.contains("city:moon"),
        "{err}"
    );
    let err = load_err(&[
        ("city.json", CITY),
        ("forest.json", FOREST),
        ("world.toml", "start_room = 3\n"),
    ]);
    assert!(err.contains("world.toml") && err.contains("TOML"), "{err}");
}

#[test]
fn bad_json_names_the_file() {
    let err = load_err(&[("city.json", "{ not json")]);
    assert!(
        err.contains("city.json") && err.contains("bad JSON"),
        "{err}"
    );
}

#[test]
fn unknown_fields_are_rejected() {
    let zone = CITY.replace("\"name\": \"City\"", "\"name\": \"City\", \"colour\": 1");
    let err = load_err(&[("city.json", &zone)]);
    assert!(err.contains("city.json") && err.contains("colour"), "{err}");
}

#[test]
fn exit_to_unknown_room_names_file_room_and_target() {
    let err = load_err(&[("city.json", CITY)]);
    assert!(
        err.ends_with("city.json: exit east of room city:gate leads to unknown room forest:edge"),
        "{err}"
    );
}

#[test]
fn bad_direction_is_rejected() {
    let zone = CITY.replace("\"east\"", "\"northeast\"");
    let err = load_err(&[("city.json", &zone), ("forest.json", FOREST)]);
    assert!(
        err.contains("city.json") && err.contains("northeast"),
        "{err}"
    );
}

/// Room ids carry their zone, so a room can only be duplicated inside its
/// own file; another file naming it is refused as a foreign room id.
#[test]
fn duplicate_room_ids() {
    let extra = "\"rooms\": [ { \"id\": \"forest:x\", \"name\": \"X\", \"description\": \"x\" },";
    let forest = FOREST.replace("\"rooms\": [", extra);
    let city = CITY.replace("\"rooms\": [", extra);
    let err = load_err(&[("city.json", &city), ("forest.json", &forest)]);
    assert!(
        err.contains("city.json") && err.contains("forest:x"),
        "{err}"
    );
    let forest2 = forest.replace("\"rooms\": [", extra);
    let err = load_err(&[("city.json", CITY), ("forest.json", &forest2)]);
    assert!(
        err.ends_with("forest.json: duplicate room id forest:x"),
        "{err}"
    );
}

#[test]
fn duplicate_item_and_mob_across_files() {
    let city = CITY.replace(
        "\"rooms\"",
        r#""items": [ { "id": "forest:apple", "name": "an apple", "keywords": ["apple"] } ], "rooms""#,
    );
    let err = load_err(&[("city.json", &city), ("forest.json", FOREST)]);
    assert!(
        err.ends_with("forest.json: duplicate item id forest:apple"),
        "{err}"
    );
    let city = CITY.replace(
        "\"rooms\"",
        r#""mobs": [ { "id": "forest:fox", "name": "a fox", "keywords": ["fox"], "room": "city:gate" } ], "rooms""#,
    );
    let err = load_err(&[("city.json", &city), ("forest.json", FOREST)]);
    assert!(
        err.ends_with("forest.json: duplicate mob id forest:fox"),
        "{err}"
    );
}

#[test]
fn file_name_must_match_zone_id() {
    let err = load_err(&[("town.json", CITY), ("forest.json", FOREST)]);
    assert!(err.contains("town.json") && err.contains("city"), "{err}");
}

#[test]
fn bad_zone_id() {
    let zone = CITY.replace("\"id\": \"city\"", "\"id\": \"Ci ty\"");
    let err = load_err(&[("city.json", &zone)]);
    assert!(err.contains("city.json") && err.contains("Ci ty"), "{err}");
}

#[test]
fn room_prefix_must_be_the_files_zone() {
    let zone = CITY.replace("city:square", "town:square");
    let err = load_err(&[("city.json", &zone), ("forest.json", FOREST)]);
    assert!(
        err.contains("city.json") && err.contains("town:square"),
        "{err}"
    );
}

#[test]
fn item_or_mob_in_foreign_room() {
    let forest = FOREST.replace(
        "\"room\": \"forest:edge\", \"wander\"",
        "\"room\": \"city:gate\", \"wander\"",
    );
    let err = load_err(&[("city.json", CITY), ("forest.json", &forest)]);
    assert!(
        err.contains("forest.json") && err.contains("mob forest:fox") && err.contains("city:gate"),
        "{err}"
    );
    let forest = FOREST.replace("\"room\": \"forest:edge\" }", "\"room\": \"forest:void\" }");
    let err = load_err(&[("city.json", CITY), ("forest.json", &forest)]);
    assert!(
        err.contains("item forest:apple") && err.contains("forest:void"),
        "{err}"
    );
}

#[test]
fn empty_dir_is_an_error() {
    let err = load_err(&[]);
    assert!(err.contains("no zone files"), "{err}");
}

#[test]
fn missing_dir_is_an_error() {
    let err = load_world(Path::new("/definitely/not/here"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("/definitely/not/here"), "{err}");
}

/// The shipped starter world: big enough to enjoy, every exit has a way back.
#[test]
fn starter_world_loads_and_is_walkable_both_ways() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/world");
    let world = load_world(&dir).unwrap_or_else(|e| panic!("{e}"));
    let open: Vec<_> = world.zones.values().filter(|z| !z.instanced).collect();
    assert!(open.len() >= 6, "{} zones", open.len());
    let rooms: usize = open.iter().map(|z| z.rooms.len()).sum();
    assert!(rooms >= 60, "{rooms} rooms");
    assert!(
        world
            .zones
            .values()
            .flat_map(|z| &z.mobs)
            .filter(|m| m.wander)
            .count()
            >= 5
    );
    assert!(world.zones.values().flat_map(|z| &z.items).count() >= 15);
    assert_eq!(zone_of(&world.start_room), "city");

    let mut cross = 0;
    for zone in world.zones.values() {
        for room in &zone.rooms {
            for (dir, target) in &room.exits {
                if zone_of(target) != zone.id {
                    cross += 1;
                }
                let back = world.room(target).unwrap();
                assert_eq!(
                    back.exits.get(&dir.opposite()),
                    Some(&room.id),
                    "{} {dir} -> {target} has no way back",
                    room.id
                );
            }
        }
    }
    assert!(cross >= 10, "{cross} cross-zone exits");

    // Every room is reachable from the start room.
    let mut seen = BTreeSet::from([world.start_room.clone()]);
    let mut todo = vec![world.start_room.clone()];
    while let Some(id) = todo.pop() {
        for target in world.room(&id).unwrap().exits.values() {
            if seen.insert(target.clone()) {
                todo.push(target.clone());
            }
        }
    }
    let all: usize = world.zones.values().map(|z| z.rooms.len()).sum();
    assert_eq!(seen.len(), all, "unreachable rooms");
}
