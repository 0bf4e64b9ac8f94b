use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;
use crate::game::HUH;
use crate::game::character::MAX_INVENTORY;
use crate::game::tier::{Tier, WIZINVIS};
use crate::game::world::{Food, ItemDef, MobDef, RoomDef, WearSlot};
use crate::model::event::{Event, Location};
use crate::model::style::{ColourMode, plain};

fn room(id: &str, name: &str, exits: &[(Direction, &str)]) -> RoomDef {
    RoomDef {
        id: id.into(),
        name: name.into(),
        description: format!("The {name} description."),
        exits: exits.iter().map(|(d, t)| (*d, t.to_string())).collect(),
    }
}

fn item(id: &str, name: &str, kw: &str, room: Option<&str>) -> ItemDef {
    ItemDef {
        id: id.into(),
        name: name.into(),
        keywords: vec![kw.into()],
        room: room.map(String::from),
        description: None,
        slot: None,
        food: None,
    }
}

/// town:square <-> town:lane (north/south), town:square east -> field:gate,
/// town:lane down -> crypt:stairs (an instanced template).
fn world() -> Arc<WorldDef> {
    let mut cloak = item("town:cloak", "a wool cloak", "cloak", Some("town:square"));
    cloak.slot = Some(WearSlot::Body);
    let mut bread = item(
        "town:bread",
        "a loaf of bread",
        "bread",
        Some("town:square"),
    );
    bread.food = Some(Food {
        affect: "well-fed".into(),
        ticks: 2,
        heal: 5,
        regen: 3,
    });
    let town = ZoneDef {
        id: "town".into(),
        name: "Town".into(),
        instanced: false,
        rooms: vec![
            room(
                "town:square",
                "Town Square",
                &[
                    (Direction::North, "town:lane"),
                    (Direction::East, "field:gate"),
                ],
            ),
            room(
                "town:lane",
                "Narrow Lane",
                &[
                    (Direction::South, "town:square"),
                    (Direction::Down, "crypt:stairs"),
                ],
            ),
        ],
        items: vec![
            item("town:apple", "a red apple", "apple", Some("town:square")),
            cloak,
            bread,
        ],
        mobs: vec![MobDef {
            id: "town:cat".into(),
            name: "a grey cat".into(),
            keywords: vec!["cat".into()],
            room: "town:square".into(),
            wander: true,
            description: Some("A cat with opinions.".into()),
        }],
    };
    let field = ZoneDef {
        id: "field".into(),
        name: "Field".into(),
        instanced: false,
        rooms: vec![room(
            "field:gate",
            "Field Gate",
            &[(Direction::West, "town:square")],
        )],
        items: vec![],
        mobs: vec![],
    };
    let crypt = ZoneDef {
        id: "crypt".into(),
        name: "Crypt".into(),
        instanced: true,
        rooms: vec![
            room(
                "crypt:stairs",
                "Crypt Stairs",
                &[
                    (Direction::Up, "town:lane"),
                    (Direction::Down, "crypt:hall"),
                ],
            ),
            room(
                "crypt:hall",
                "Crypt Hall",
                &[(Direction::Up, "crypt:stairs")],
            ),
        ],
        items: vec![item("crypt:bone", "a bone", "bone", Some("crypt:hall"))],
        mobs: vec![],
    };
    let zones: BTreeMap<String, Arc<ZoneDef>> = [town, field, crypt]
        .into_iter()
        .map(|z| (z.id.clone(), Arc::new(z)))
        .collect();
    Arc::new(WorldDef {
        zones,
        start_room: "town:square".into(),
    })
}

fn zone(id: &str) -> ZoneState {
    let w = world();
    let def = Arc::clone(w.zone(crate::game::world::template_of(id)).unwrap());
    ZoneState::new(def, w, id)
}

const CTX: Ctx = Ctx {
    shard_id: "w1",
    zone_id: "town",
    chat: crate::model::chat::ChatAllowance::UNLIMITED,
};

/// A command's outcome with its text as the wire carries it: styles
/// taken out (`marks_*` tests check them).
fn run(z: &mut ZoneState, key: &str, line: &str) -> Outcome {
    plain_outcome(z.execute(key, line, &CTX))
}

fn run_marked(z: &mut ZoneState, key: &str, line: &str) -> Outcome {
    z.execute(key, line, &CTX)
}

fn plain_outcome(mut out: Outcome) -> Outcome {
    for d in &mut out.deliveries {
        d.text = plain(&d.text);
    }
    match &mut out.action {
        Action::Tell(t) => {
            t.heard.text = plain(&t.heard.text);
            t.said.text = plain(&t.said.text);
        }
        Action::Broadcast(b) => b.text = plain(&b.text),
        _ => {}
    }
    out
}

/// The text delivered to `key`, concatenated, styles taken out.
fn text_for(out: &[Delivery], key: &str) -> String {
    out.iter()
        .filter(|d| d.to == key)
        .map(|d| plain(&d.text))
        .collect()
}

fn town_with(names: &[&str]) -> ZoneState {
    let mut z = zone("town");
    for n in names {
        z.enter(Character::new(n, "town:square"), None);
    }
    z
}

const SQUARE: &str = "Town Square\nThe Town Square description.\nExits: north east\n\
A red apple lies here.\nA wool cloak lies here.\nA loaf of bread lies here.\nA grey cat is here.\n";

#[test]
fn look_shows_room_exactly() {
    let mut z = town_with(&["alice", "bob"]);
    let out = run(&mut z, "alice", "look");
    assert_eq!(out.deliveries.len(), 1);
    assert_eq!(out.deliveries[0].text, format!("{SQUARE}Bob is here.\n"));
    // Beside the text, the room as a client's mapper reads it.
    let Event::Room(room) = &out.deliveries[0].events[0] else {
        panic!("the room first: {:?}", out.deliveries[0].events)
    };
    assert_eq!(
        (room.id.as_str(), room.area.as_str()),
        ("town:square", "Town")
    );
    assert!(room.exits.contains(&("east".into(), "field:gate".into())));
    assert!(matches!(
        &out.deliveries[0].events[1],
        Event::Items { location: Location::Room, items } if items.len() == 3
    ));
    assert!(!out.dirty);
    assert_eq!(run(&mut z, "alice", "l").deliveries, out.deliveries);
}

#[test]
fn enter_shows_room_and_announces() {
    let mut z = town_with(&["alice"]);
    let out = z.enter(
        Character::new("bob", "nowhere:at-all"),
        Some(Direction::East),
    );
    assert_eq!(text_for(&out, "alice"), "Bob arrives from the west.\n");
    assert_eq!(text_for(&out, "bob"), format!("{SQUARE}Alice is here.\n"));
    assert_eq!(z.character("bob").unwrap().room, "town:square");
    assert_eq!(z.player_count(), 2);
    let out = z.enter(Character::new("carol", "town:lane"), None);
    assert_eq!(z.character("carol").unwrap().room, "town:lane");
    assert_eq!(text_for(&out, "alice"), "");
}

#[test]
fn leave_announces_and_returns_character() {
    let mut z = town_with(&["alice", "bob"]);
    let (ch, out) = z.leave("bob", Some(Direction::East)).unwrap();
    assert_eq!(ch.name, "Bob");
    assert_eq!(out, vec![Delivery::new("alice", "Bob leaves east.\n")]);
    let (_, out) = z.leave("alice", None).unwrap();
    assert!(out.is_empty());
    assert!(z.leave("alice", None).is_none());
}

#[test]
fn walking_within_zone() {
    let mut z = town_with(&["alice", "bob"]);
    z.enter(Character::new("carol", "town:lane"), None);
    let out = run(&mut z, "alice", "n");
    assert!(out.dirty);
    assert_eq!(out.action, Action::None);
    assert_eq!(text_for(&out.deliveries, "bob"), "Alice leaves north.\n");
    assert_eq!(
        text_for(&out.deliveries, "carol"),
        "Alice arrives from the south.\n"
    );
    let lane = "Narrow Lane\nThe Narrow Lane description.\nExits: south down\nCarol is here.\n";
    assert_eq!(text_for(&out.deliveries, "alice"), lane);
    assert_eq!(run(&mut z, "alice", "look").deliveries[0].text, lane);
    assert_eq!(z.character("alice").unwrap().room, "town:lane");
    assert_eq!(z.character("alice").unwrap().vitals.moves, 99);
}

#[test]
fn no_exit() {
    let mut z = town_with(&["alice"]);
    let out = run(&mut z, "alice", "west");
    assert_eq!(
        out.deliveries,
        vec![Delivery::new("alice", "You can't go that way.\n")]
    );
    assert!(!out.dirty);
}

#[test]
fn exit_into_other_zone_is_left_to_the_actor() {
    let mut z = town_with(&["alice", "bob"]);
    let out = run(&mut z, "alice", "e");
    assert_eq!(
        out,
        Outcome {
            deliveries: vec![],
            action: Action::LeaveZone {
                to_room: "field:gate".into(),
                dir: Direction::East
            },
            dirty: false,
            chat_spent: 0,
        }
    );
    assert_eq!(z.character("alice").unwrap().room, "town:square");
}

#[test]
fn say_exact_shapes() {
    let mut z = town_with(&["alice", "bob"]);
    z.enter(Character::new("carol", "town:lane"), None);
    let out = run(&mut z, "alice", "say Hello  there, é!");
    let channel = |text: &str| Event::Channel {
        channel: "say".into(),
        talker: "Alice".into(),
        text: text.into(),
    };
    assert_eq!(
        out.deliveries,
        vec![
            Delivery::new("alice", "You say, 'Hello  there, é!'\n")
                .with(channel("You say, 'Hello  there, é!'")),
            Delivery::new("bob", "Alice says, 'Hello  there, é!'\n")
                .with(channel("Alice says, 'Hello  there, é!'")),
        ]
    );
    assert_eq!(
        run(&mut z, "alice", "say").deliveries[0].text,
        "Say what?\n"
    );
    assert_eq!(
        run(&mut z, "alice", "say \x1b[2J\r").deliveries[0].text,
        "You say, '[2J'\n"
    );
}

#[test]
fn say_never_carries_bidi_or_zero_width_characters_to_others() {
    let mut z = town_with(&["alice", "bob"]);
    // A right-to-left override that would show "evil.exe" as "exe.live",
    // a zero-width space inside a look-alike name, an isolate.
    let out = run(
        &mut z,
        "alice",
        "say see \u{202E}exe.live\u{202C} from B\u{200B}ob \u{2067}x\u{2069}",
    );
    let texts: Vec<(&str, &str)> = out
        .deliveries
        .iter()
        .map(|d| (d.to.as_str(), d.text.as_str()))
        .collect();
    assert_eq!(
        texts,
        vec![
            ("alice", "You say, 'see exe.live from Bob x'\n"),
            ("bob", "Alice says, 'see exe.live from Bob x'\n"),
        ]
    );
}

#[test]
fn where_exact() {
    let mut z = town_with(&["alice"]);
    let out = run(&mut z, "alice", "where");
    assert_eq!(
        out.deliveries[0].text,
        "where: zone=town room=town:square shard=w1\n"
    );
}

#[test]
fn journal_append_and_list() {
    let mut z = town_with(&["alice"]);
    let out = run(&mut z, "alice", "journal  found the \x07square ");
    assert_eq!(out.deliveries[0].text, "Noted.\n");
    assert!(out.dirty);
    run(&mut z, "alice", "journal second");
    let out = run(&mut z, "alice", "journal");
    assert!(!out.dirty);
    assert_eq!(
        out.deliveries[0].text,
        "journal 1: found the square\njournal 2: second\njournal end 2\n"
    );
    z.character_mut("alice").unwrap().journal.clear();
    assert_eq!(
        run(&mut z, "alice", "journal").deliveries[0].text,
        "journal end 0\n"
    );
}

#[test]
fn score_has_tier_line() {
    let mut z = town_with(&["alice"]);
    z.character_mut("alice").unwrap().tier = Tier::Builder;
    let text = run(&mut z, "alice", "score").deliveries[0].text.clone();
    assert!(text.lines().any(|l| l == "Tier: builder"), "{text}");
    assert!(text.contains("HP: 20/20"), "{text}");
}

#[test]
fn wizinvis_admin_only_and_hides() {
    let mut z = town_with(&["alice", "bob", "carol"]);
    let out = run(&mut z, "bob", "wizinvis");
    assert_eq!(out.deliveries[0].text, "You can't do that.\n");
    assert!(!out.dirty);
    z.character_mut("carol").unwrap().tier = Tier::Admin;
    z.character_mut("alice").unwrap().tier = Tier::Admin;
    let out = run(&mut z, "carol", "wizinvis");
    assert!(out.dirty);
    assert_eq!(out.deliveries[0].text, "You fade from mortal sight.\n");
    assert!(z.character("carol").unwrap().flags.contains(WIZINVIS));
    // Bob can't see Carol; Alice (admin) can, tagged.
    let bob = run(&mut z, "bob", "look").deliveries[0].text.clone();
    assert!(!bob.contains("Carol"), "{bob}");
    let alice = run(&mut z, "alice", "look").deliveries[0].text.clone();
    assert!(alice.contains("Carol is here. (wizinvis)\n"), "{alice}");
    // Her speech and movement don't reach Bob either.
    let out = run(&mut z, "carol", "north");
    assert_eq!(text_for(&out.deliveries, "bob"), "");
    assert_eq!(text_for(&out.deliveries, "alice"), "Carol leaves north.\n");
    let out = run(&mut z, "carol", "wizinvis");
    assert_eq!(out.deliveries[0].text, "You step back into view.\n");
}

#[test]
fn who_and_quit_are_actions() {
    let mut z = town_with(&["alice"]);
    let out = run(&mut z, "alice", "who");
    assert_eq!(
        out.action,
        Action::Who {
            viewer_is_admin: false
        }
    );
    assert!(out.deliveries.is_empty());
    z.character_mut("alice").unwrap().tier = Tier::Admin;
    assert_eq!(
        run(&mut z, "alice", "who").action,
        Action::Who {
            viewer_is_admin: true
        }
    );
    let out = run(&mut z, "alice", "quit");
    assert_eq!(out.action, Action::Quit);
    assert_eq!(out.deliveries, vec![Delivery::new("alice", "Goodbye.\n")]);
}

#[test]
fn get_drop_inventory() {
    let mut z = town_with(&["alice", "bob"]);
    assert_eq!(
        run(&mut z, "alice", "i").deliveries[0].text,
        "You are carrying nothing.\n"
    );
    let out = run(&mut z, "alice", "get app");
    assert!(out.dirty);
    assert_eq!(
        text_for(&out.deliveries, "alice"),
        "You pick up a red apple.\n"
    );
    assert_eq!(
        text_for(&out.deliveries, "bob"),
        "Alice picks up a red apple.\n"
    );
    assert_eq!(
        run(&mut z, "alice", "get apple").deliveries[0].text,
        "You don't see that here.\n"
    );
    assert_eq!(
        run(&mut z, "alice", "get cat").deliveries[0].text,
        "You can't take a grey cat.\n"
    );
    assert_eq!(
        run(&mut z, "alice", "get").deliveries[0].text,
        "Get what?\n"
    );
    let out = run(&mut z, "alice", "get all");
    assert_eq!(
        text_for(&out.deliveries, "alice"),
        "You pick up a wool cloak.\nYou pick up a loaf of bread.\n"
    );
    assert!(z.floor("town:square").is_empty());
    assert_eq!(
        run(&mut z, "alice", "inventory").deliveries[0].text,
        "You are carrying:\n  a red apple\n  a wool cloak\n  a loaf of bread\n"
    );
    let out = run(&mut z, "alice", "drop apple");
    assert_eq!(
        text_for(&out.deliveries, "bob"),
        "Alice drops a red apple.\n"
    );
    assert_eq!(z.floor("town:square").len(), 1);
    assert_eq!(
        run(&mut z, "alice", "drop apple").deliveries[0].text,
        "You aren't carrying that.\n"
    );
    run(&mut z, "alice", "drop all");
    assert!(z.character("alice").unwrap().inventory.is_empty());
    assert_eq!(z.floor("town:square").len(), 3);
}

#[test]
fn inventory_is_bounded() {
    let mut z = town_with(&["alice"]);
    let apple = z.floor("town:square")[0].clone();
    z.character_mut("alice").unwrap().inventory = vec![apple; MAX_INVENTORY - 1];
    let out = run(&mut z, "alice", "get all");
    assert_eq!(
        out.deliveries[0].text,
        "You pick up a red apple.\nYou can't carry any more.\n"
    );
    assert_eq!(z.character("alice").unwrap().inventory.len(), MAX_INVENTORY);
    assert_eq!(z.floor("town:square").len(), 2);
    assert!(
        run(&mut z, "alice", "i").deliveries[0]
            .text
            .contains("a red apple (x50)")
    );
}

#[test]
fn wear_remove_equipment() {
    let mut z = town_with(&["alice"]);
    run(&mut z, "alice", "get all");
    assert_eq!(
        run(&mut z, "alice", "wear apple").deliveries[0].text,
        "You can't wear a red apple.\n"
    );
    let out = run(&mut z, "alice", "wear cloak");
    assert!(out.dirty);
    assert_eq!(
        out.deliveries[0].text,
        "You wear a wool cloak on your body.\n"
    );
    assert_eq!(
        run(&mut z, "alice", "eq").deliveries[0].text,
        "You are using:\n  <body> A wool cloak\n"
    );
    assert!(
        run(&mut z, "alice", "look cloak").deliveries[0]
            .text
            .contains("nothing special")
    );
    assert_eq!(
        run(&mut z, "alice", "remove cloak").deliveries[0].text,
        "You remove a wool cloak.\n"
    );
    assert_eq!(
        run(&mut z, "alice", "eq").deliveries[0].text,
        "You are using nothing.\n"
    );
}

#[test]
fn eating_gives_an_affect_that_wears_off() {
    let mut z = town_with(&["alice"]);
    run(&mut z, "alice", "get bread");
    z.character_mut("alice").unwrap().vitals.hp = 5;
    let out = run(&mut z, "alice", "eat bread");
    assert!(out.dirty);
    assert_eq!(
        out.deliveries[0].text,
        "You eat a loaf of bread.\nYou feel well-fed.\n"
    );
    let ch = z.character("alice").unwrap();
    assert_eq!(ch.vitals.hp, 10);
    assert_eq!(ch.affects.len(), 1);
    assert!(ch.inventory.is_empty());
    let mut never = |_n: u32| 1;
    let out = z.tick(&mut never);
    assert!(text_for(&out, "alice").is_empty());
    assert_eq!(
        z.character("alice").unwrap().vitals.hp,
        14,
        "1 regen + 3 from the affect"
    );
    let out = z.tick(&mut never);
    assert_eq!(text_for(&out, "alice"), "You no longer feel well-fed.\n");
    assert!(z.character("alice").unwrap().affects.is_empty());
    assert_eq!(z.character("alice").unwrap().vitals.hp, 18);
    assert_eq!(
        run(&mut z, "alice", "eat apple").deliveries[0].text,
        "You aren't carrying that.\n"
    );
}

#[test]
fn aliases_via_commands() {
    let mut z = town_with(&["alice", "bob"]);
    assert_eq!(
        run(&mut z, "alice", "alias").deliveries[0].text,
        "You have no aliases.\n"
    );
    let out = run(&mut z, "alice", "alias hi say hello");
    assert!(out.dirty);
    assert_eq!(out.deliveries[0].text, "Alias 'hi' set.\n");
    let out = run(&mut z, "alice", "hi there");
    assert_eq!(
        text_for(&out.deliveries, "bob"),
        "Alice says, 'hello there'\n"
    );
    assert_eq!(
        run(&mut z, "alice", "alias look quit").deliveries[0].text,
        "'look' is a command and can't be an alias.\n"
    );
    assert_eq!(
        run(&mut z, "alice", "alias").deliveries[0].text,
        "Your aliases:\n  hi = say hello\n"
    );
    assert_eq!(
        run(&mut z, "alice", "alias hi").deliveries[0].text,
        "Alias 'hi' removed.\n"
    );
    assert_eq!(run(&mut z, "alice", "hi").deliveries[0].text, HUH);
}

#[test]
fn unknown_and_empty_lines() {
    let mut z = town_with(&["alice"]);
    assert_eq!(
        run(&mut z, "alice", "dance wildly").deliveries[0].text,
        "Huh? Type 'help' for commands.\n"
    );
    assert_eq!(run(&mut z, "alice", "  \r\n").deliveries, vec![]);
    assert!(
        run(&mut z, "alice", "help").deliveries[0]
            .text
            .contains("journal")
    );
    assert_eq!(run(&mut z, "ghost", "look"), Outcome::default());
}

#[test]
fn garbage_never_panics_and_replies_end_in_newline() {
    let mut z = town_with(&["alice", "bob"]);
    let mut lines: Vec<String> = vec![
        "x".repeat(100_000),
        format!("say {}", "日本".repeat(5000)),
        format!("journal {}", "é".repeat(3000)),
        format!("alias {} {}", "a".repeat(5000), "b".repeat(5000)),
        "\0\0\0".into(),
        "'".into(),
        "get \u{202e}".into(),
        "look 🦊".into(),
        "alias é say".into(),
        "drop all".into(),
        "wear".into(),
        "remove".into(),
        "eat".into(),
        "look north".into(),
        "exits".into(),
        "l d".into(),
    ];
    // Every byte value as a tiny line.
    lines.extend((0u8..=255).map(|b| String::from_utf8_lossy(&[b, b'a']).into_owned()));
    for line in &lines {
        for d in run(&mut z, "alice", line).deliveries {
            assert!(d.text.ends_with('\n'), "{line:?} -> {:?}", d.text);
        }
    }
    assert!(z.character("alice").unwrap().journal.back().unwrap().len() <= 1000);
}

#[test]
fn mobs_wander_inside_the_zone_only() {
    let mut z = town_with(&["alice"]);
    z.enter(Character::new("bob", "town:lane"), None);
    // Scripted roller: first roll "move" (0), second picks exit 0 (north,
    // the only exit staying in the zone).
    let mut rolls = vec![0u32, 0].into_iter();
    let mut roll = |_n: u32| rolls.next().unwrap_or(1);
    let out = z.tick(&mut roll);
    assert_eq!(text_for(&out, "alice"), "A grey cat leaves north.\n");
    assert_eq!(
        text_for(&out, "bob"),
        "A grey cat arrives from the south.\n"
    );
    assert_eq!(z.mobs()[0].room, "town:lane");
    // From the lane, "down" leads to another zone: only south is eligible.
    let mut roll = |_n: u32| 0;
    for _ in 0..20 {
        z.tick(&mut roll);
        assert!(z.has_room(&z.mobs()[0].room));
    }
    // A roller that returns nonsense is reduced, not trusted.
    let mut wild = |_n: u32| u32::MAX;
    z.tick(&mut wild);
}

#[test]
fn items_reset_after_interval_without_duplicating() {
    let mut z = town_with(&["alice"]);
    run(&mut z, "alice", "get apple");
    run(&mut z, "alice", "n");
    run(&mut z, "alice", "drop apple");
    let mut no = |_n: u32| 1;
    for _ in 0..RESET_TICKS {
        z.tick(&mut no);
    }
    // The apple lies in the lane, so no new one appears in the square.
    assert_eq!(z.floor("town:square").len(), 2);
    // Carried, it still exists: no second one either.
    run(&mut z, "alice", "get apple");
    for _ in 0..RESET_TICKS {
        z.tick(&mut no);
    }
    assert_eq!(z.floor("town:square").len(), 2);
    // Food eaten is gone everywhere: the reset puts one back.
    run(&mut z, "alice", "s");
    run(&mut z, "alice", "get bread");
    run(&mut z, "alice", "eat bread");
    assert_eq!(z.floor("town:square").len(), 1);
    for _ in 0..RESET_TICKS {
        z.tick(&mut no);
    }
    let square: Vec<&str> = z
        .floor("town:square")
        .iter()
        .map(|i| i.id.as_str())
        .collect();
    assert_eq!(square, ["town:cloak", "town:bread"]);
}

#[test]
fn vitals_regenerate_to_max() {
    let mut z = town_with(&["alice"]);
    let v = &mut z.character_mut("alice").unwrap().vitals;
    v.hp = 1;
    v.moves = 99;
    let mut no = |_n: u32| 1;
    z.tick(&mut no);
    let v = &z.character("alice").unwrap().vitals;
    assert_eq!((v.hp, v.moves), (2, 100));
}

#[test]
fn instance_rooms_are_renamed() {
    let mut z = zone("crypt#7");
    assert!(z.has_room("crypt#7:stairs"));
    assert_eq!(z.floor("crypt#7:hall").len(), 1);
    let mut ch = Character::new("alice", "crypt:stairs");
    ch.instance_return = Some("town:lane".into());
    z.enter(ch, Some(Direction::Down));
    let alice = z.character("alice").unwrap();
    assert_eq!(alice.room, "crypt#7:stairs");
    assert_eq!(alice.instance_return.as_deref(), Some("town:lane"));
    let ctx = Ctx {
        shard_id: "w1",
        zone_id: "crypt#7",
        chat: crate::model::chat::ChatAllowance::UNLIMITED,
    };
    let out = plain_outcome(z.execute("alice", "d", &ctx));
    assert!(out.deliveries[0].text.starts_with("Crypt Hall\n"));
    let out = z.execute("alice", "where", &ctx);
    assert_eq!(
        out.deliveries[0].text,
        "where: zone=crypt#7 room=crypt#7:hall shard=w1\n"
    );
    z.execute("alice", "u", &ctx);
    let out = z.execute("alice", "u", &ctx);
    assert_eq!(
        out.action,
        Action::LeaveZone {
            to_room: "town:lane".into(),
            dir: Direction::Up
        }
    );
    // Leaving for a regular zone clears the way back.
    let (ch, _) = z.leave("alice", Some(Direction::Up)).unwrap();
    let mut town = zone("town");
    town.enter(ch, Some(Direction::Up));
    assert_eq!(town.character("alice").unwrap().instance_return, None);
}

#[test]
fn look_at_things() {
    let mut z = town_with(&["alice", "bob"]);
    assert_eq!(
        run(&mut z, "alice", "look cat").deliveries[0].text,
        "A cat with opinions.\nA grey cat is in perfect health.\n"
    );
    assert_eq!(
        run(&mut z, "alice", "look north").deliveries[0].text,
        "To the north lies Narrow Lane.\n"
    );
    assert_eq!(
        run(&mut z, "alice", "look east").deliveries[0].text,
        "To the east lies Field Gate.\n"
    );
    assert_eq!(
        run(&mut z, "alice", "look bo").deliveries[0].text,
        "You see Bob, a level 1 adventurer.\n"
    );
    assert_eq!(
        run(&mut z, "alice", "look dragon").deliveries[0].text,
        "You don't see that here.\n"
    );
}

#[test]
fn a_player_moved_out_of_the_zone_by_the_actor_is_healed() {
    let mut z = town_with(&["alice"]);
    z.character_mut("alice").unwrap().room = "field:gate".into();
    let out = run(&mut z, "alice", "north");
    assert!(out.deliveries[0].text.starts_with("Narrow Lane\n"));
}

#[test]
fn arrival_gives_the_whole_character_and_get_moves_items_between_lists() {
    let mut z = zone("town");
    let out = z.enter(Character::new("alice", "town:square"), None);
    assert_eq!(out[0].events, [Event::Colour(ColourMode::Auto)]);
    let kinds: Vec<&str> = out[1]
        .events
        .iter()
        .map(|e| match e {
            Event::Room(_) => "room",
            Event::Items { location, .. } => location.as_str(),
            Event::Vitals(_) => "vitals",
            Event::Status(_) => "status",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["room", "room", "vitals", "status", "inv"]);
    let out = run(&mut z, "alice", "get apple");
    let events = &out.deliveries[0].events;
    assert!(
        matches!(&events[0], Event::ItemRemoved { location: Location::Room, item } if item.id == "town:apple")
    );
    assert!(
        matches!(&events[1], Event::ItemAdded { location: Location::Inventory, item } if item.id == "town:apple")
    );
}

#[test]
fn a_tick_says_vitals_only_when_they_change() {
    let mut z = zone("town");
    z.enter(Character::new("alice", "town:square"), None);
    let mut never = |_| 1;
    // Full health: nothing to say.
    assert!(z.tick(&mut never).iter().all(|d| d.events.is_empty()));
    z.character_mut("alice").unwrap().vitals.hp = 1;
    let out = z.tick(&mut never);
    assert!(matches!(&out[0].events[0], Event::Vitals(v) if v[0] == ("hp".into(), 2)));
}

#[path = "comm_tests.rs"]
mod comm;

#[path = "style_tests.rs"]
mod style;

#[test]
fn an_item_of_the_world_outside_is_not_dropped_on_an_instances_floor() {
    let mut z = zone("crypt#7");
    let mut ch = Character::new("alice", "crypt:stairs");
    let apple = crate::game::character::Item {
        id: "town:apple".into(),
        name: "a red apple".into(),
        keywords: vec!["apple".into()],
        description: None,
        slot: None,
        food: None,
    };
    ch.inventory.push(apple);
    z.enter(ch, None);
    let out = run(&mut z, "alice", "drop apple");
    assert!(
        out.deliveries[0].text.starts_with("You keep it"),
        "{:?}",
        out.deliveries[0].text
    );
    assert_eq!(z.character("alice").unwrap().inventory.len(), 1);
    assert!(z.floor("crypt#7:stairs").is_empty());
    // The instance's own items come and go as anywhere.
    run(&mut z, "alice", "d");
    let here = z.character("alice").unwrap().room.clone();
    run(&mut z, "alice", "get all");
    let carried = z.character("alice").unwrap().inventory.len();
    assert!(carried > 1, "took the hall's items");
    run(&mut z, "alice", "drop all");
    assert_eq!(
        z.character("alice").unwrap().inventory.len(),
        1,
        "kept the apple"
    );
    assert_eq!(z.floor(&here).len(), carried - 1);
}
