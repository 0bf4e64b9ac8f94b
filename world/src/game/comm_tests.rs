//! `emote`, `tell` and `chat`: what the game words and hands the runtime.

use super::*;
use crate::model::chat::{ChatBucket, ChatLimit};
use crate::model::{Broadcast, Tell};

fn channel(name: &str, talker: &str, text: &str) -> Event {
    Event::Channel {
        channel: name.into(),
        talker: talker.into(),
        text: text.into(),
    }
}

#[test]
fn emote_reads_as_a_pose_to_the_whole_room() {
    let mut z = town_with(&["alice", "bob"]);
    z.enter(Character::new("carol", "town:lane"), None);
    let out = run(&mut z, "alice", "emote waves.");
    let line = channel("emote", "Alice", "Alice waves.");
    assert_eq!(
        out.deliveries,
        vec![
            Delivery::new("alice", "Alice waves.\n").with(line.clone()),
            Delivery::new("bob", "Alice waves.\n").with(line),
        ]
    );
    assert_eq!(out.chat_spent, "waves.".len());
    assert_eq!(
        text_for(&run(&mut z, "alice", ":grins").deliveries, "bob"),
        "Alice grins\n"
    );
    assert_eq!(
        run(&mut z, "alice", "emote").deliveries[0].text,
        "Emote what?\n"
    );
}

#[test]
fn tell_is_handed_to_the_runtime_with_every_answer_worded() {
    let mut z = town_with(&["alice"]);
    let out = run(&mut z, "alice", "tell BOB  meet me  at the gate ");
    assert!(out.deliveries.is_empty(), "{:?}", out.deliveries);
    assert_eq!(out.chat_spent, "meet me  at the gate".len());
    let heard = "Alice tells you, 'meet me  at the gate'\n";
    let said = "You tell Bob, 'meet me  at the gate'\n";
    assert_eq!(
        out.action,
        Action::Tell(Box::new(Tell {
            heard: Delivery::new("bob", heard).with(channel("tell", "Alice", heard.trim_end())),
            said: Delivery::new("alice", said).with(channel("tell", "Alice", said.trim_end())),
            absent: "No one called Bob is online.\n".into(),
            unreachable: "Bob could not be reached just now (between places?); nothing was said. Try again.\n".into(),
            speaker_is_admin: false,
        }))
    );
}

#[test]
fn a_tell_that_cannot_go_is_answered_at_once() {
    let mut z = town_with(&["alice"]);
    for (line, answer) in [
        ("tell", "Tell whom what? (tell <name> <text>)\n"),
        ("tell bob", "Tell whom what? (tell <name> <text>)\n"),
        ("tell b0b hi", "No one called B0b is online.\n"),
        ("tell alice hi", "You mutter to yourself.\n"),
    ] {
        let out = run(&mut z, "alice", line);
        assert_eq!(out.action, Action::None, "{line}");
        assert_eq!(text_for(&out.deliveries, "alice"), answer, "{line}");
        assert_eq!(out.chat_spent, 0, "{line}");
    }
}

#[test]
fn chat_goes_to_everyone_but_the_speaker_who_hears_their_own_line() {
    let mut z = town_with(&["alice", "bob"]);
    for line in ["chat the bridge is out", "ooc the bridge is out"] {
        let out = run(&mut z, "alice", line);
        let mine = "You chat, 'the bridge is out'\n";
        let theirs = "Alice chats, 'the bridge is out'\n";
        assert_eq!(
            out.deliveries,
            vec![Delivery::new("alice", mine).with(channel("chat", "Alice", mine.trim_end()))],
            "{line}: the room hears it through the broadcast, not twice"
        );
        let Action::Broadcast(b) = out.action else {
            panic!("{line}: {:?}", out.action)
        };
        assert_eq!(
            *b,
            Broadcast {
                from: "alice".into(),
                text: theirs.into(),
                events: vec![channel("chat", "Alice", theirs.trim_end())],
                unsent: b.unsent.clone(),
            }
        );
        assert!(b.unsent.contains("nobody heard"), "{}", b.unsent);
        assert_eq!(out.chat_spent, "the bridge is out".len());
    }
}

#[test]
fn emote_tell_and_chat_are_held_to_the_chat_limit() {
    let limit = ChatLimit {
        burst_bytes: 300.0,
        bytes_per_sec: 1.0,
    };
    let now = std::time::Instant::now();
    let mut bucket = ChatBucket::default();
    bucket.spend(&limit, 100, now);
    let ctx = Ctx {
        chat: bucket.allowance(&limit, now),
        ..CTX
    };
    let mut z = town_with(&["alice", "bob"]);
    for line in ["emote waves.", "tell bob hi", "chat hi", "ooc hi"] {
        let out = z.execute("alice", line, &ctx);
        assert_eq!(out.action, Action::None, "{line}");
        assert_eq!(out.deliveries.len(), 1, "{line}: nobody else hears it");
        assert!(
            out.deliveries[0]
                .text
                .starts_with("You are talking too fast"),
            "{line}: {:?}",
            out.deliveries[0].text
        );
        assert_eq!(out.chat_spent, 0, "{line}");
    }
}

#[test]
fn help_lists_the_new_commands() {
    let mut z = town_with(&["alice"]);
    let help = text_for(&run(&mut z, "alice", "help").deliveries, "alice");
    for word in ["emote <text>", "tell <name> <text>", "chat <text> (ooc)"] {
        assert!(help.contains(word), "{word} missing from {help}");
    }
}
