//! What parts of the text are (room name, exits, speech) and the
//! player's `colour` choice: what the game marks and tells the gate.

use super::*;
use crate::model::style::{ColourMode, Style, split};

#[test]
fn marks_name_the_room_its_exits_and_speech() {
    let mut z = town_with(&["alice", "bob"]);
    let out = run_marked(&mut z, "alice", "look");
    let (text, spans) = split(&out.deliveries[0].text);
    let styled: Vec<(&str, Style)> = spans.iter().map(|(r, s)| (&text[r.clone()], *s)).collect();
    assert_eq!(
        styled,
        [
            ("Town Square", Style::RoomName),
            ("Exits: north east", Style::Exits)
        ]
    );
    let out = run_marked(&mut z, "alice", "say hi");
    for d in &out.deliveries {
        let (text, spans) = split(&d.text);
        assert_eq!(spans, [(0..text.len() - 1, Style::Speech)], "{text:?}");
    }
    // The channel event carries the plain line.
    let Event::Channel { text, .. } = &out.deliveries[1].events[0] else {
        panic!("{:?}", out.deliveries[1].events);
    };
    assert_eq!(text, "Alice says, 'hi'");
}

#[test]
fn colour_is_the_characters_choice_told_to_the_gate_and_saved() {
    let mut z = town_with(&["alice"]);
    let out = run(&mut z, "alice", "colour");
    assert!(
        out.deliveries[0].text.starts_with("Colour: on"),
        "{:?}",
        out.deliveries
    );
    assert!(!out.dirty);
    let out = run(&mut z, "alice", "color OFF");
    assert!(out.dirty);
    assert_eq!(out.deliveries[0].text, "Colour: off.\n");
    assert_eq!(out.deliveries[0].events, [Event::Colour(ColourMode::Off)]);
    let ch = z.character("alice").unwrap();
    assert_eq!(ch.colour, ColourMode::Off);
    let saved = crate::game::to_state_json(ch);
    let loaded = crate::game::from_state_json(&saved).unwrap();
    assert_eq!(loaded.colour, ColourMode::Off);
    // Every arrival tells the gate again, before the room it renders.
    assert_eq!(z.view("alice")[0].events, [Event::Colour(ColourMode::Off)]);
    let (ch, _) = z.leave("alice", None).unwrap();
    let out = z.enter(ch, None);
    let mine: Vec<&Delivery> = out.iter().filter(|d| d.to == "alice").collect();
    assert_eq!(mine[0].events, [Event::Colour(ColourMode::Off)]);
    assert!(mine[1].text.contains("Town Square"));
    assert_eq!(
        run(&mut z, "alice", "col 256").deliveries[0].events,
        [Event::Colour(ColourMode::Xterm256)]
    );
    let out = run(&mut z, "alice", "colour purple");
    assert!(out.deliveries[0].text.starts_with("Colour how?"));
    assert_eq!(z.character("alice").unwrap().colour, ColourMode::Xterm256);
    // A character that never chose saves as before.
    run(&mut z, "alice", "colour on");
    let saved = crate::game::to_state_json(z.character("alice").unwrap());
    assert!(!String::from_utf8(saved).unwrap().contains("colour"));
}
