//! What answered a command: the output shapes of CONTRACT.md's player
//! protocol, matched against the lines that belong to one command.
//!
//! Which lines belong to a command is decided by the marker scheme
//! (`bot` module docs): the command is followed by a marker, and its output
//! is what arrived after the last *other* marker's answer and before its
//! own. A replay after a shard crash repeats older commands' output, but
//! each of those is followed by its own (old) marker's answer, so what is
//! left after the last one is this command's, from its last application.

use crate::bot::{parse_journal, parse_where};
use crate::world::WorldMap;

use super::clock::Ms;
use super::history::{Answer, Kind};

/// How every refused move must start (CONTRACT.md).
pub const REFUSAL: &str = "You can't go that way";

/// Refusals in other words that the world is known to print (issue 11
/// item 2). Named only so the report can say "refused off contract" rather
/// than "unrecognised"; either way it is a violation.
pub const OFF_CONTRACT_REFUSALS: &[&str] = &[
    "The way ahead shimmers",
    "The way is closed",
    "That way leads beyond",
];

/// The line `journal <text>` answers.
pub const NOTED: &str = "Noted.";

/// The line `quit` answers before the socket closes.
pub const GOODBYE: &str = "Goodbye.";

/// What the gate tells a player when it lost their shard and resumes
/// (`gate/src/notices.rs`, `SHIMMER`).
pub const RESUMING: &str = "The world shimmers; reconnecting...";

/// How `look` ends the exits line of a room.
const EXITS: &str = "Exits:";

/// The answer to `kind`. `window` is every line received since it was
/// sent; its own output (the last application's) starts at `own_from`
/// (after the last older marker's answer). `marker_at` is when its own
/// marker was answered: a command whose output has none of its shapes was
/// still taken by the world then ([`Answer::Unrecognised`]).
///
/// The answer is the *last* answer-shaped line of its own output: a resume
/// after an outage may first show the room the player is in (before the
/// replayed move's new room), and a move refused before a crash may succeed
/// when replayed after it. Its time is the *first* line of the whole window
/// that says the same, since the player saw it then (a replay only repeats
/// it). A move refused in other words anywhere in its own output is
/// reported as such even if a replay later moved it.
pub fn classify(
    kind: &Kind,
    window: &[(Ms, String)],
    own_from: usize,
    map: &WorldMap,
    marker_at: Ms,
) -> (Ms, Answer) {
    let own = &window[own_from.min(window.len())..];
    let last = |f: &dyn Fn(&str) -> Option<Answer>| own.iter().rev().find_map(|(_, line)| f(line));
    let answer = match kind {
        Kind::Move { .. } => own
            .iter()
            .find_map(|(_, line)| off_contract(line))
            .or_else(|| last(&|line| move_answer(line, map))),
        Kind::Journal { .. } => last(&|line| (line == NOTED).then_some(Answer::Noted)),
        Kind::Say { text } => {
            let said = format!("You say, '{text}'");
            last(&|line| (line == said).then_some(Answer::Said))
        }
        Kind::Where => last(&|line| {
            let (zone, room, shard) = parse_where(line)?;
            Some(Answer::Where { zone, room, shard })
        }),
        Kind::Look => last(&|line| {
            (line.starts_with(EXITS) || map.room_named(line).is_some()).then_some(Answer::Looked)
        }),
        Kind::Carry { .. } => last(&|line| carried(line).then_some(Answer::Carried)),
        Kind::JournalList => listing(own),
        Kind::Quit => last(&|line| (line == GOODBYE).then_some(Answer::Goodbye)),
        // Logins are read by the client itself (no marker before login).
        Kind::Login => None,
    };
    let answer = match answer {
        Some(answer) => answer,
        None => match taken_over(own, map) {
            Some(at) => return (at, Answer::TakenOver),
            None => return (marker_at, Answer::Unrecognised),
        },
    };
    let at = window
        .iter()
        .find(|(_, line)| says(&answer, line, map))
        .map_or(marker_at, |(at, _)| *at);
    (at, answer)
}

/// A line whose answer was lost with its link: the gate resumed the
/// session (its notice) and the takeover showed the room after it; when.
pub(super) fn taken_over(own: &[(Ms, String)], map: &WorldMap) -> Option<Ms> {
    let resumed = own.iter().position(|(_, l)| l == RESUMING)?;
    own[resumed..]
        .iter()
        .find(|(_, l)| map.room_named(l).is_some())
        .map(|(at, _)| *at)
}

/// Whether `line` is one of the answers to `get all` / `drop all`.
fn carried(line: &str) -> bool {
    const SHAPES: [&str; 6] = [
        "You pick up ",
        "You drop ",
        "There is nothing here to take.",
        "You aren't carrying that.",
        "You can't carry any more.",
        "There is no room here for more clutter.",
    ];
    SHAPES.iter().any(|s| line.starts_with(s))
}

/// Whether `line` gives `answer` (to time an answer by its first showing).
fn says(answer: &Answer, line: &str, map: &WorldMap) -> bool {
    match answer {
        Answer::Moved { room } => map.room(room).is_some_and(|r| r.name == line),
        Answer::Refused { .. } => line.starts_with(REFUSAL),
        Answer::OffContract { line: l } => l == line,
        Answer::Noted => line == NOTED,
        Answer::Carried => carried(line),
        Answer::Said | Answer::Goodbye | Answer::Listed { .. } | Answer::Looked => {
            // Said/Goodbye: the exact line; a listing: its end; a look: the
            // room. Approximated by shape; an earlier match only makes the
            // answer look faster, never slower.
            line.starts_with("You say, '")
                || line == GOODBYE
                || line.starts_with("journal end ")
                || line.starts_with(EXITS)
                || map.room_named(line).is_some()
        }
        Answer::Where { zone, room, shard } => {
            parse_where(line).is_some_and(|(z, r, s)| (&z, &r, &s) == (zone, room, shard))
        }
        _ => false,
    }
}

fn off_contract(line: &str) -> Option<Answer> {
    OFF_CONTRACT_REFUSALS
        .iter()
        .any(|p| line.starts_with(p))
        .then(|| Answer::OffContract { line: line.into() })
}

/// A move's answer line: a room or a refusal.
fn move_answer(line: &str, map: &WorldMap) -> Option<Answer> {
    if line.starts_with(REFUSAL) {
        return Some(Answer::Refused { line: line.into() });
    }
    map.room_named(line)
        .map(|room| Answer::Moved { room: room.into() })
}

/// A complete `journal` listing (its `journal end` line seen).
fn listing(own: &[(Ms, String)]) -> Option<Answer> {
    own.iter()
        .rev()
        .find(|(_, l)| l.starts_with("journal end "))?;
    let text: String = own.iter().map(|(_, l)| format!("{l}\n")).collect();
    let entries = parse_journal(&text).ok()?;
    Some(Answer::Listed { entries })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(lines: &[&str]) -> Vec<(Ms, String)> {
        lines
            .iter()
            .enumerate()
            .map(|(i, l)| (100 + i as Ms, l.to_string()))
            .collect()
    }

    fn east() -> Kind {
        Kind::Move {
            from: "city:east_gate".into(),
            dir: "east".into(),
            to: "hills:foot".into(),
        }
    }

    #[test]
    fn a_move_answers_a_room_a_refusal_or_an_off_contract_refusal() {
        let map = WorldMap::starter();
        let moved = seg(&[
            "The town crier leaves east.",
            "Foot of the Hills",
            "The track from the east gate begins to climb.",
            "Exits: north east west",
        ]);
        assert_eq!(
            classify(&east(), &moved, 0, &map, 900),
            (
                101,
                Answer::Moved {
                    room: "hills:foot".into()
                }
            )
        );
        let refused = seg(&["You can't go that way: the hills are moving."]);
        assert!(matches!(
            classify(&east(), &refused, 0, &map, 900),
            (100, Answer::Refused { .. })
        ));
        let shimmer = seg(&["The way ahead shimmers and holds you back; you stay where you are."]);
        assert!(matches!(
            classify(&east(), &shimmer, 0, &map, 900),
            (100, Answer::OffContract { .. })
        ));
        let nothing = seg(&[
            "Bob says, 'Foot of the Hills'",
            "The world shimmers; reconnecting...",
        ]);
        assert_eq!(
            classify(&east(), &nothing, 0, &map, 900),
            (900, Answer::Unrecognised)
        );
    }

    #[test]
    fn after_a_resume_the_last_room_answers_and_the_first_showing_times_it() {
        let map = WorldMap::starter();
        let from_orchard = Kind::Move {
            from: "keep:orchard".into(),
            dir: "east".into(),
            to: "keep:causeway".into(),
        };
        // The resume shows the room the player is in, then the replayed
        // move's new room.
        let resumed = seg(&[
            "The world shimmers; reconnecting...",
            "Wild Orchard",
            "Exits: south east",
            "The Causeway",
            "Exits: north south west",
        ]);
        assert_eq!(
            classify(&from_orchard, &resumed, 0, &map, 900),
            (
                103,
                Answer::Moved {
                    room: "keep:causeway".into()
                }
            )
        );
        // Answered before a crash (100), repeated by the replay after an
        // older marker's answer (102): the player had it at 100.
        let replayed = seg(&[
            "The Causeway",
            "The world shimmers; reconnecting...",
            "'look' is a command and can't be an alias.",
            "The Causeway",
        ]);
        assert_eq!(
            classify(&from_orchard, &replayed, 3, &map, 900),
            (
                100,
                Answer::Moved {
                    room: "keep:causeway".into()
                }
            )
        );
        // Refused in other words, then moved by a replay: still off contract.
        let shimmered = seg(&[
            "The way is closed for now; try again later.",
            "The Causeway",
        ]);
        assert!(matches!(
            classify(&from_orchard, &shimmered, 0, &map, 900),
            (100, Answer::OffContract { .. })
        ));
    }

    #[test]
    fn the_other_commands_answer_their_shapes() {
        let map = WorldMap::starter();
        let k = Kind::Journal { n: 3 };
        assert_eq!(
            classify(&k, &seg(&["x", NOTED]), 0, &map, 9),
            (101, Answer::Noted)
        );
        assert_eq!(
            classify(&k, &seg(&["x"]), 0, &map, 9),
            (9, Answer::Unrecognised)
        );
        let say = Kind::Say {
            text: "hi 2".into(),
        };
        assert_eq!(
            classify(
                &say,
                &seg(&["Ann says, 'hi 2'", "You say, 'hi 2'"]),
                0,
                &map,
                9
            ),
            (101, Answer::Said)
        );
        let w = seg(&["where: zone=city room=city:square shard=shard-a"]);
        assert_eq!(
            classify(&Kind::Where, &w, 0, &map, 9).1,
            Answer::Where {
                zone: "city".into(),
                room: "city:square".into(),
                shard: "shard-a".into()
            }
        );
        let bad_where = seg(&["where: city:square"]);
        assert_eq!(
            classify(&Kind::Where, &bad_where, 0, &map, 9).1,
            Answer::Unrecognised
        );
        let list = seg(&[
            "journal 1: a",
            "Ann says, 'b'",
            "journal 2: c",
            "journal end 2",
        ]);
        assert_eq!(
            classify(&Kind::JournalList, &list, 0, &map, 9),
            (
                103,
                Answer::Listed {
                    entries: vec!["a".into(), "c".into()]
                }
            )
        );
        let cut = seg(&["journal 1: a", "journal end 2"]);
        assert_eq!(
            classify(&Kind::JournalList, &cut, 0, &map, 9).1,
            Answer::Unrecognised
        );
        assert_eq!(
            classify(
                &Kind::Look,
                &seg(&["Market Square", "Exits: north"]),
                0,
                &map,
                9
            ),
            (100, Answer::Looked)
        );
    }

    #[test]
    fn an_answer_lost_with_its_link_is_answered_by_the_takeover() {
        let map = WorldMap::starter();
        let said = Kind::Say {
            text: "hello".into(),
        };
        let lost = seg(&[RESUMING, "Foot of the Hills", "Exits: north east west"]);
        assert_eq!(
            classify(&said, &lost, 0, &map, 900),
            (101, Answer::TakenOver)
        );
        // No resume: nothing answered it.
        let silent = seg(&["Foot of the Hills", "Exits: north east west"]);
        assert_eq!(
            classify(&said, &silent, 0, &map, 900),
            (900, Answer::Unrecognised)
        );
    }
}
