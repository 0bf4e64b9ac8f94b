//! The status prompt: after each command's output (the world's
//! `InputAck`), a client that asked for prompts (EOR, or a MUD client
//! that named itself through TTYPE) gets its vitals as a prompt marked
//! with EOR (or GA); any other client gets nothing but the world's lines.

mod support;

use support::*;
use telos_proto::v1::event::Kind;
use telos_proto::v1::{Event, InputAck, Stat, Vitals, server_frame};

const IAC: u8 = 255;
const DO: u8 = 253;
const WILL: u8 = 251;
const EOR_OPT: u8 = 25;
const EOR_CMD: u8 = 239;
const GA: u8 = 249;
const NAWS: u8 = 31;
const TTYPE: u8 = 24;
const SB: u8 = 250;
const SE: u8 = 240;

fn vitals(hp: i64) -> server_frame::Frame {
    let stat = |name: &str, value| Stat {
        name: name.into(),
        value,
    };
    server_frame::Frame::Event(Event {
        kind: Some(Kind::Vitals(Vitals {
            stats: vec![stat("hp", hp), stat("maxhp", 20), stat("moves", 50)],
        })),
        ..Event::default()
    })
}

fn ack(seq: u64) -> server_frame::Frame {
    server_frame::Frame::InputAck(InputAck { seq })
}

/// Log `p` in as Alice; the session on the fake shard.
async fn login(p: &mut Player, shard: &mut FakeShard) -> FakeSession {
    p.expect("create <name> <password>").await;
    p.send("connect Alice password1\r\n").await;
    let (s, _) = accept_login(shard, "Alice", "cred").await;
    p.expect("Welcome, Alice.").await;
    s
}

#[tokio::test]
async fn a_telnet_client_gets_the_prompt_after_each_command_marked() {
    let mut shard = FakeShard::start().await;
    let addr = start_gate(test_config(), &[&shard.addr]).await.0;
    let mut p = Player::connect(addr).await;
    // A client that takes EOR.
    p.stream_write(&[IAC, DO, EOR_OPT]).await;
    let mut s = login(&mut p, &mut shard).await;

    p.send("look\r\n").await;
    assert!(s.recv().await.is_some(), "the command reached the world");
    s.output("Room a:b\n").await;
    s.send(vitals(17)).await;
    s.send(ack(1)).await;
    p.expect("Room a:b\r\n<hp 17/20 moves 50> ").await;
    let mark = [IAC, EOR_CMD];
    p.until_raw(&mark).await;

    // Output before the player types starts on a new line, and the next
    // command's prompt shows the new vitals.
    s.output("Bob arrives.\n").await;
    p.expect("\r\nBob arrives.\r\n").await;
    s.send(vitals(16)).await;
    s.send(ack(2)).await;
    p.expect("<hp 16/20 moves 50> ").await;
}

#[tokio::test]
async fn a_named_mud_client_gets_ga_and_a_line_client_no_prompt() {
    let mut shard = FakeShard::start().await;
    let addr = start_gate(test_config(), &[&shard.addr]).await.0;

    // A MUD client that names itself, but no EOR: GA.
    let mut t = Player::connect(addr).await;
    t.stream_write(&[IAC, WILL, TTYPE]).await;
    let name = [&[IAC, SB, TTYPE, 0][..], b"TINTIN++", &[IAC, SE]].concat();
    t.stream_write(&name).await;
    let alice = login(&mut t, &mut shard).await;
    alice.send(vitals(20)).await;
    alice.send(ack(1)).await;
    t.expect("<hp 20/20 moves 50> ").await;
    t.until_raw(&[IAC, GA]).await;

    // A line client that speaks a little telnet (NAWS) but asked for no
    // prompt: the world's lines exactly, no prompt between.
    let mut r = Player::connect(addr).await;
    r.stream_write(&[IAC, WILL, NAWS]).await;
    r.expect("create <name> <password>").await;
    r.send("connect Bob password1\r\n").await;
    let (s, _) = accept_login(&mut shard, "Bob", "cred2").await;
    r.expect("Welcome, Bob.").await;
    s.output("Room a:b\n").await;
    s.send(vitals(20)).await;
    s.send(ack(1)).await;
    s.output("Room a:c\n").await;
    let seen = r.expect("Room a:c\r\n").await;
    assert!(seen.ends_with("Room a:b\r\nRoom a:c\r\n"), "{seen:?}");
    assert!(!seen.contains("<hp"), "{seen:?}");
    drop(alice);
}
