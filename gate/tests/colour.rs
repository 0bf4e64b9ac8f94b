//! Colour at the gate on raw sockets against a fake shard: the world's
//! styled spans come out as 24-bit, 256-colour or 16-colour SGR for a
//! client that said so through MTTS, as nothing at all for a raw line
//! client (byte for byte the world's text, not one ESC), without colour or
//! decoration for a screen reader, and as the player's `colour` choice
//! (the world's `Event.colour`) says.

mod support;

use support::*;
use telos_proto::v1::event::Kind;
use telos_proto::v1::{ColourMode, Event, Output, Span, Style, server_frame};

const IAC: u8 = 255;
const WILL: u8 = 251;
const SB: u8 = 250;
const SE: u8 = 240;
const TTYPE: u8 = 24;
const ESC: u8 = 0x1b;

/// MTTS bits: ANSI 1, UTF-8 4, 256 colours 8, screen reader 64,
/// truecolour 256.
const MTTS_16: u32 = 1 | 4;
const MTTS_256: u32 = MTTS_16 | 8;
const MTTS_TRUECOLOUR: u32 = MTTS_256 | 256;
const MTTS_SCREEN_READER: u32 = MTTS_TRUECOLOUR | 64;

/// The world's look at a room, as the starter game marks it.
const ROOM: &str = "Town Square\nA wide square.\n-----\nExits: north east\n";

fn span(start: u32, end: u32, style: Style) -> Span {
    Span {
        start,
        end,
        style: style as i32,
    }
}

fn room_output() -> server_frame::Frame {
    server_frame::Frame::Output(Output {
        text: ROOM.into(),
        chatter: false,
        others_words: false,
        spans: vec![
            span(0, 11, Style::RoomName),
            span(27, 32, Style::Decoration),
            span(33, 50, Style::Exits),
        ],
    })
}

fn colour(mode: ColourMode) -> server_frame::Frame {
    server_frame::Frame::Event(Event {
        kind: Some(Kind::Colour(mode as i32)),
        ..Event::default()
    })
}

/// A client that names itself and answers the third TTYPE with `MTTS
/// <bits>` (what Mudlet, TinTin++ and MUSHclient do), then logs in.
async fn mtts_client(
    addr: std::net::SocketAddr,
    shard: &mut FakeShard,
    bits: u32,
) -> (Player, FakeSession) {
    let mut p = Player::connect(addr).await;
    p.expect("create <name> <password>").await;
    // All at once: the gate reads each answer as the next in the cycle,
    // in order, before the login line that follows.
    let mut bytes = vec![IAC, WILL, TTYPE];
    for answer in ["MUDLET", "ANSI-TRUECOLOR", &format!("MTTS {bits}")] {
        bytes.extend_from_slice(&[IAC, SB, TTYPE, 0]);
        bytes.extend_from_slice(answer.as_bytes());
        bytes.extend_from_slice(&[IAC, SE]);
    }
    p.stream_write(&bytes).await;
    let s = login(&mut p, shard).await;
    (p, s)
}

async fn login(p: &mut Player, shard: &mut FakeShard) -> FakeSession {
    p.send("connect Alice password1\r\n").await;
    let (s, _) = accept_login(shard, "Alice", "cred").await;
    p.expect("Welcome, Alice.\r\n").await;
    s
}

#[tokio::test]
async fn each_depth_gets_its_own_sgr() {
    let mut shard = FakeShard::start().await;
    let addr = start_gate(test_config(), &[&shard.addr]).await.0;
    // Kept to the end: a session dropped would come back as a Resume.
    let mut keep = Vec::new();
    for (bits, room, exits) in [
        (
            MTTS_TRUECOLOUR,
            "\x1b[1m\x1b[38;2;95;215;255mTown Square\x1b[0m\r\n",
            "\x1b[38;2;0;175;0mExits: north east\x1b[0m\r\n",
        ),
        (
            MTTS_256,
            "\x1b[1m\x1b[38;5;81mTown Square\x1b[0m\r\n",
            "\x1b[38;5;34mExits: north east\x1b[0m\r\n",
        ),
        (
            MTTS_16,
            "\x1b[1m\x1b[96mTown Square\x1b[0m\r\n",
            "\x1b[32mExits: north east\x1b[0m\r\n",
        ),
    ] {
        let (mut p, s) = mtts_client(addr, &mut shard, bits).await;
        s.send(room_output()).await;
        p.expect(room).await;
        // Unstyled text as it is; decoration stays for a sighted reader.
        p.expect("A wide square.\r\n\x1b[").await;
        p.expect("-----\x1b[0m\r\n").await;
        p.expect(exits).await;
        keep.push((p, s));
    }
}

#[tokio::test]
async fn a_raw_line_client_gets_the_worlds_text_byte_for_byte() {
    let mut shard = FakeShard::start().await;
    let addr = start_gate(test_config(), &[&shard.addr]).await.0;
    let mut p = Player::connect(addr).await;
    p.expect("create <name> <password>").await;
    let s = login(&mut p, &mut shard).await;
    s.send(room_output()).await;
    // Even the player asking for colour changes nothing before the world
    // says so; an Off is as good as none.
    s.send(colour(ColourMode::Off)).await;
    s.send(room_output()).await;
    s.output("END\n").await;
    p.expect("END\r\n").await;
    let greeting_end = p.raw().iter().rposition(|&b| b == IAC).unwrap_or(0);
    let after = String::from_utf8_lossy(&p.raw()[greeting_end..]).to_string();
    assert!(!p.raw().contains(&ESC), "{:?}", p.text());
    // The gate's own line between them (the telnet resume token) is the
    // gate's, not the world's: the world's lines are what must not change.
    let after: String = after
        .split_inclusive("\r\n")
        .filter(|l| !l.starts_with("If your connection drops") && !l.starts_with("resume "))
        .collect();
    let lines = ROOM.replace('\n', "\r\n");
    assert!(
        after.ends_with(&format!("Welcome, Alice.\r\n{lines}{lines}END\r\n")),
        "{after:?}"
    );
}

#[tokio::test]
async fn a_screen_reader_gets_no_colour_no_decoration_and_a_spoken_prompt() {
    let mut shard = FakeShard::start().await;
    let addr = start_gate(test_config(), &[&shard.addr]).await.0;
    let (mut p, mut s) = mtts_client(addr, &mut shard, MTTS_SCREEN_READER).await;
    s.send(room_output()).await;
    p.expect("Town Square\r\nA wide square.\r\nExits: north east\r\n")
        .await;
    s.send(server_frame::Frame::Event(Event {
        kind: Some(Kind::Vitals(telos_proto::v1::Vitals {
            stats: vec![
                telos_proto::v1::Stat {
                    name: "hp".into(),
                    value: 17,
                },
                telos_proto::v1::Stat {
                    name: "maxhp".into(),
                    value: 20,
                },
            ],
        })),
        ..Event::default()
    }))
    .await;
    p.send("look\r\n").await;
    let (seq, _) = s.input().await;
    s.output("Done.\n").await;
    s.input_ack(seq).await;
    p.expect("Done.\r\nhp 17 of 20: ").await;
    assert!(!p.raw().contains(&ESC), "{:?}", p.text());
    assert!(!p.text().contains("-----"));
    // The player may still ask for colour.
    s.send(colour(ColourMode::Xterm256)).await;
    s.send(room_output()).await;
    p.expect("\x1b[1m\x1b[38;5;81mTown Square\x1b[0m").await;
}

#[tokio::test]
async fn the_players_choice_overrides_the_clients_depth_until_changed() {
    let mut shard = FakeShard::start().await;
    let addr = start_gate(test_config(), &[&shard.addr]).await.0;
    let (mut p, s) = mtts_client(addr, &mut shard, MTTS_TRUECOLOUR).await;
    s.send(colour(ColourMode::Off)).await;
    s.send(room_output()).await;
    s.output("END1\n").await;
    let seen = p.expect("END1").await;
    assert!(
        seen.contains("Town Square\r\n") && !seen.contains('\x1b'),
        "{seen:?}"
    );
    s.send(colour(ColourMode::Ansi16)).await;
    s.send(room_output()).await;
    p.expect("\x1b[1m\x1b[96mTown Square").await;
    s.send(colour(ColourMode::Auto)).await;
    s.send(room_output()).await;
    p.expect("\x1b[38;2;95;215;255mTown Square").await;
    // A raw client may ask for a depth too (a terminal behind plain nc).
    let mut raw = Player::connect(addr).await;
    raw.expect("create <name> <password>").await;
    let r = login(&mut raw, &mut shard).await;
    r.send(colour(ColourMode::Xterm256)).await;
    r.send(room_output()).await;
    raw.expect("\x1b[38;5;81mTown Square").await;
}
