//! The MUD client protocols at the gate, on raw sockets against a fake
//! shard: offers at connect, GMCP, MSSP before login, MCCP2 as one zlib
//! stream across handoffs and a shard crash, MTTS with a client that stops
//! answering, NAWS wrapping, and malformed or looping negotiation.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use flate2::{Decompress, FlushDecompress};
use serde_json::Value;
use support::*;
use telos_gate::GateConfig;
use telos_proto::v1::event::Kind;
use telos_proto::v1::{Event, client_frame, server_frame};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const IAC: u8 = 255;
const WILL: u8 = 251;
const WONT: u8 = 252;
const DO: u8 = 253;
const DONT: u8 = 254;
const SB: u8 = 250;
const SE: u8 = 240;
const TTYPE: u8 = 24;
const EOR: u8 = 25;
const NAWS: u8 = 31;
const CHARSET: u8 = 42;
const MSSP: u8 = 70;
const MCCP2: u8 = 86;
const GMCP: u8 = 201;

/// A MUD client on a raw socket: what it reads is inflated once the gate
/// starts MCCP2, and kept whole for the assertions.
struct Client {
    stream: TcpStream,
    /// Everything the gate said, decompressed.
    plain: Vec<u8>,
    /// Raw bytes not yet sorted into plain or compressed.
    pending: Vec<u8>,
    inflate: Option<Decompress>,
    /// Bytes on the wire.
    wire: usize,
    /// Offset of `plain` already matched by `expect`.
    cursor: usize,
}

const START: [u8; 5] = [IAC, SB, MCCP2, IAC, SE];

impl Client {
    async fn connect(addr: SocketAddr) -> Self {
        Client {
            stream: TcpStream::connect(addr).await.unwrap(),
            plain: Vec::new(),
            pending: Vec::new(),
            inflate: None,
            wire: 0,
            cursor: 0,
        }
    }

    async fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.unwrap();
    }

    async fn line(&mut self, text: &str) {
        self.send(format!("{text}\r\n").as_bytes()).await;
    }

    async fn gmcp_send(&mut self, msg: &str) {
        let mut b = vec![IAC, SB, GMCP];
        b.extend_from_slice(msg.as_bytes());
        b.extend_from_slice(&[IAC, SE]);
        self.send(&b).await;
    }

    /// One read; `false` when the gate closed.
    async fn read(&mut self) -> bool {
        let mut buf = [0u8; 8192];
        let n = self.stream.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            return false;
        }
        self.wire += n;
        self.pending.extend_from_slice(&buf[..n]);
        self.sort();
        true
    }

    fn sort(&mut self) {
        if self.inflate.is_none() {
            // Only the plain part before a start marker is plain.
            match self.pending.windows(5).position(|w| w == START) {
                Some(at) => {
                    self.plain.extend(self.pending.drain(..at + 5));
                    self.inflate = Some(Decompress::new(true));
                }
                None => {
                    // Keep a possible start of the marker for the next read.
                    let keep = (1..=4)
                        .rev()
                        .find(|&k| self.pending.ends_with(&START[..k]))
                        .unwrap_or(0);
                    let take = self.pending.len() - keep;
                    self.plain.extend(self.pending.drain(..take));
                    return;
                }
            }
        }
        let d = self.inflate.as_mut().unwrap();
        let mut input = std::mem::take(&mut self.pending);
        let mut at = 0;
        while at < input.len() {
            let mut out = Vec::with_capacity(64 * 1024);
            let before = d.total_in();
            let status = d
                .decompress_vec(&input[at..], &mut out, FlushDecompress::Sync)
                .expect("the gate's output is one valid zlib stream");
            at += (d.total_in() - before) as usize;
            self.plain.extend_from_slice(&out);
            if status == flate2::Status::StreamEnd {
                self.inflate = None;
                self.pending = input.split_off(at);
                return self.sort();
            }
        }
        input.clear();
    }

    /// Read until `pred` holds for what was seen.
    async fn until(&mut self, what: &str, pred: impl Fn(&Client) -> bool) {
        let ok = tokio::time::timeout(WAIT, async {
            while !pred(self) {
                assert!(self.read().await, "closed while waiting for {what}");
            }
        })
        .await;
        assert!(
            ok.is_ok(),
            "timed out waiting for {what}; saw {:?}",
            self.text()
        );
    }

    fn text(&self) -> String {
        strip_iac(&self.plain)
    }

    /// Wait for `needle` in the text after the last match.
    async fn expect(&mut self, needle: &str) {
        let from = self.cursor;
        self.until(needle, |c| {
            c.text()[from.min(c.text().len())..].contains(needle)
        })
        .await;
        let text = self.text();
        self.cursor = from + text[from..].find(needle).unwrap() + needle.len();
    }

    fn has(&self, bytes: &[u8]) -> bool {
        self.plain.windows(bytes.len()).any(|w| w == bytes)
    }

    /// Every GMCP message received: (package, body).
    fn gmcp(&self) -> Vec<(String, String)> {
        subnegotiations(&self.plain, GMCP)
            .into_iter()
            .map(|b| {
                let s = String::from_utf8_lossy(&b).into_owned();
                match s.split_once(' ') {
                    Some((p, j)) => (p.to_string(), j.to_string()),
                    None => (s, String::new()),
                }
            })
            .collect()
    }

    fn gmcp_of(&self, package: &str) -> Vec<Value> {
        self.gmcp()
            .into_iter()
            .filter(|(p, _)| p == package)
            .map(|(_, j)| serde_json::from_str(&j).unwrap_or(Value::Null))
            .collect()
    }
}

/// Payloads of every `IAC SB opt ... IAC SE` in `bytes`, IAC IAC undone.
fn subnegotiations(bytes: &[u8], opt: u8) -> Vec<Vec<u8>> {
    let mut found = Vec::new();
    let mut i = 0;
    while i + 2 < bytes.len() {
        if bytes[i] == IAC && bytes[i + 1] == IAC {
            i += 2;
            continue;
        }
        if bytes[i] == IAC && bytes[i + 1] == SB && bytes[i + 2] == opt {
            let mut j = i + 3;
            let mut body = Vec::new();
            while j + 1 < bytes.len() && !(bytes[j] == IAC && bytes[j + 1] == SE) {
                if bytes[j] == IAC && bytes[j + 1] == IAC {
                    j += 1;
                }
                body.push(bytes[j]);
                j += 1;
            }
            found.push(body);
            i = j;
        }
        i += 1;
    }
    found
}

fn event(kind: Kind) -> server_frame::Frame {
    server_frame::Frame::Event(Event {
        kind: Some(kind),
        ..Event::default()
    })
}

fn room(num: u32, id: &str) -> server_frame::Frame {
    event(Kind::Room(telos_proto::v1::RoomInfo {
        num,
        id: id.into(),
        name: format!("Room {id}"),
        area: "Test".into(),
        exits: vec![],
    }))
}

fn vitals(hp: i64) -> server_frame::Frame {
    event(Kind::Vitals(telos_proto::v1::Vitals {
        stats: vec![telos_proto::v1::Stat {
            name: "hp".into(),
            value: hp,
        }],
    }))
}

fn channel(text: &str) -> server_frame::Frame {
    event(Kind::Channel(telos_proto::v1::ChannelLine {
        channel: "say".into(),
        talker: "Bob".into(),
        text: text.into(),
    }))
}

async fn gate(shards: &[&str]) -> SocketAddr {
    gate_with(test_config(), shards).await
}

async fn gate_with(cfg: GateConfig, shards: &[&str]) -> SocketAddr {
    start_gate(cfg, shards).await.0
}

#[tokio::test]
async fn offers_at_connect_and_a_raw_client_sees_only_lines() {
    let mut shard = FakeShard::start().await;
    let addr = gate(&[&shard.addr]).await;
    let mut c = Client::connect(addr).await;
    c.expect("create <name> <password>").await;
    let offers: Vec<u8> = [
        [IAC, WILL, GMCP],
        [IAC, WILL, MSSP],
        [IAC, WILL, MCCP2],
        [IAC, WILL, EOR],
        [IAC, WILL, CHARSET],
        [IAC, DO, NAWS],
        [IAC, DO, TTYPE],
    ]
    .concat();
    assert!(c.plain.starts_with(&offers), "{:?}", &c.plain[..30]);
    // A raw client answers nothing: no GMCP, no compression, no prompt
    // marks, just the contract's lines.
    c.line("connect Alice password1").await;
    let (s, _) = accept_login(&mut shard, "Alice", "cred").await;
    s.send(room(7, "a:b")).await;
    s.send(vitals(20)).await;
    s.output("Room a:b\n").await;
    c.expect("Welcome, Alice.\r\nRoom a:b\r\n").await;
    let after_greeting = &c.plain[offers.len()..];
    assert!(!after_greeting.contains(&IAC), "{after_greeting:?}");
}

/// Log a telnet client in through the fake shard.
async fn login(c: &mut Client, shard: &mut FakeShard) -> (FakeSession, telos_proto::v1::Login) {
    c.line("connect Alice password1").await;
    let r = accept_login(shard, "Alice", "cred").await;
    c.expect("Welcome, Alice.").await;
    r
}

#[tokio::test]
async fn gmcp_sends_subscribed_packages_only() {
    let mut shard = FakeShard::start().await;
    let addr = gate(&[&shard.addr]).await;
    let mut c = Client::connect(addr).await;
    c.expect("create <name>").await;
    c.send(&[IAC, DO, GMCP]).await;
    c.gmcp_send(r#"Core.Hello {"client":"Tester","version":"1"}"#)
        .await;
    c.gmcp_send(r#"Core.Supports.Set ["Char 1", "Room 1"]"#)
        .await;
    // Truncated and malformed GMCP on the way changes nothing.
    c.gmcp_send("Core.Supports.Set [\"Comm").await;
    c.gmcp_send("Core.Supports.Add").await;
    let (s, login) = login(&mut c, &mut shard).await;
    let client = login.client.expect("the login says what the client is");
    assert!(client.gmcp);
    assert_eq!(client.client_name, "Tester");
    s.send(channel("Bob says, 'hi'")).await;
    s.send(room(7, "a:b")).await;
    s.send(vitals(19)).await;
    s.output("done\n").await;
    c.expect("done").await;
    c.until("vitals", |c| !c.gmcp_of("Char.Vitals").is_empty())
        .await;
    assert_eq!(c.gmcp_of("Char.Name")[0]["name"], "Alice");
    assert_eq!(c.gmcp_of("Room.Info")[0]["num"], 7);
    assert_eq!(c.gmcp_of("Char.Vitals")[0]["hp"], 19);
    assert!(
        c.gmcp_of("Comm.Channel.Text").is_empty(),
        "Comm was not subscribed"
    );
    c.gmcp_send(r#"Core.Supports.Add ["Comm 1"]"#).await;
    c.gmcp_send("Core.Ping").await;
    c.until("ping", |c| c.gmcp().iter().any(|(p, _)| p == "Core.Ping"))
        .await;
    s.send(channel("Bob says, 'again'")).await;
    c.until("channel", |c| !c.gmcp_of("Comm.Channel.Text").is_empty())
        .await;
    assert_eq!(
        c.gmcp_of("Comm.Channel.Text")[0]["text"],
        "Bob says, 'again'"
    );
    // The client turns GMCP off: nothing more.
    c.send(&[IAC, DONT, GMCP]).await;
    c.until("WONT GMCP", |c| c.has(&[IAC, WONT, GMCP])).await;
    s.send(room(8, "a:c")).await;
    s.output("end\n").await;
    c.expect("end").await;
    assert_eq!(c.gmcp_of("Room.Info").len(), 1);
}

#[tokio::test]
async fn mssp_answers_before_login() {
    let shard = FakeShard::start().await;
    let cfg = GateConfig {
        mssp: vec![
            ("NAME".into(), "Aurora".into()),
            ("CONTACT".into(), "ops@example.org".into()),
        ],
        ..test_config()
    };
    let addr = gate_with(cfg, &[&shard.addr]).await;
    let mut c = Client::connect(addr).await;
    c.expect("create <name>").await;
    c.send(&[IAC, DO, MSSP]).await;
    c.until("MSSP", |c| !subnegotiations(&c.plain, MSSP).is_empty())
        .await;
    let body = &subnegotiations(&c.plain, MSSP)[0];
    let mut vars = Vec::new();
    for part in body.split(|&b| b == 1).skip(1) {
        let mut kv = part.split(|&b| b == 2);
        let k = String::from_utf8_lossy(kv.next().unwrap()).into_owned();
        let v = String::from_utf8_lossy(kv.next().unwrap_or_default()).into_owned();
        vars.push((k, v));
    }
    let get = |k: &str| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    assert_eq!(get("NAME").as_deref(), Some("Aurora"));
    assert_eq!(get("PLAYERS").as_deref(), Some("0"));
    assert_eq!(get("CONTACT").as_deref(), Some("ops@example.org"));
    assert_eq!(get("PORT"), Some(addr.port().to_string()));
    let uptime: u64 = get("UPTIME").unwrap().parse().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(uptime <= now && now - uptime < 600);
}

#[tokio::test]
async fn mccp2_is_one_stream_across_twenty_handoffs_and_a_crash() {
    let (crashing, mut a) = IsolatedShard::start("127.0.0.1:0");
    let mut b = FakeShard::start().await;
    // The registry lists only `b`: after `a` dies the resume lands there.
    let addr = gate(&[&b.addr]).await;
    let mut c = Client::connect(addr).await;
    c.expect("create <name>").await;
    c.send(&[
        IAC, DO, MCCP2, IAC, WILL, NAWS, IAC, SB, NAWS, 0, 100, 0, 30, IAC, SE,
    ])
    .await;
    c.until("compression", |c| c.inflate.is_some()).await;
    c.line("connect Alice password1").await;
    // The login went to b (the only listed shard); it hands off to a.
    let (s, _) = accept_login(&mut b, "Alice", "cred").await;
    c.expect("Welcome, Alice.").await;
    s.redirect(&a.addr, "t0", "").await;
    // The stream to b ends with the redirect; its slot is refilled later.
    let mut sessions = [a.next().await, s];
    let mut on = 0usize;
    let attach = |f: Option<client_frame::Frame>| match f {
        Some(client_frame::Frame::Attach(at)) => at,
        other => panic!("expected Attach, got {other:?}"),
    };
    let at = attach(sessions[0].recv().await);
    assert_eq!(
        at.client.unwrap().width,
        100,
        "the width rides every attach"
    );
    sessions[0].attached(0, "Alice", "").await;
    let addrs = [a.addr.clone(), b.addr.clone()];
    for i in 1..=20 {
        sessions[on].output(&format!("room {i} ")).await;
        sessions[on].output(&"a long description ".repeat(20)).await;
        sessions[on].output("\n").await;
        c.expect(&format!("room {i} ")).await;
        if i == 20 {
            break;
        }
        let next = 1 - on;
        sessions[on]
            .redirect(&addrs[next], &format!("t{i}"), "")
            .await;
        let fresh = if next == 0 {
            a.next().await
        } else {
            b.next().await
        };
        sessions[next] = fresh;
        let at = attach(sessions[next].recv().await);
        assert_eq!(at.token, format!("t{i}"));
        assert_eq!(at.client.unwrap().width, 100);
        sessions[next].attached(0, "Alice", "").await;
        on = next;
    }
    if on == 1 {
        sessions[1].redirect(&addrs[0], "last", "").await;
        sessions[0] = a.next().await;
        attach(sessions[0].recv().await);
        sessions[0].attached(0, "Alice", "").await;
        sessions[0].output("back on a\n").await;
        c.expect("back on a").await;
    }
    // The player's shard crashes: the gate resumes on b, same socket,
    // same zlib stream.
    crashing.kill();
    let mut s = b.next().await;
    match s.recv().await {
        Some(client_frame::Frame::Resume(r)) => assert_eq!(r.client.unwrap().width, 100),
        other => panic!("expected Resume, got {other:?}"),
    }
    s.attached(0, "Alice", "").await;
    s.output("after the crash\n").await;
    c.expect("after the crash").await;
    assert!(c.inflate.is_some(), "still the one stream");
    assert!(
        c.wire < c.plain.len() / 2,
        "compressed: {} on the wire for {}",
        c.wire,
        c.plain.len()
    );
}

#[tokio::test]
async fn mtts_cycles_and_a_client_that_stops_answering_still_logs_in() {
    let mut shard = FakeShard::start().await;
    let addr = gate(&[&shard.addr]).await;
    let mut c = Client::connect(addr).await;
    c.expect("create <name>").await;
    let send = [IAC, SB, TTYPE, 1, IAC, SE];
    c.send(&[IAC, WILL, TTYPE]).await;
    c.until("SEND 1", |c| subnegotiations(&c.plain, TTYPE).len() == 1)
        .await;
    c.send(&[&[IAC, SB, TTYPE, 0][..], b"TINTIN++", &[IAC, SE]].concat())
        .await;
    c.until("SEND 2", |c| subnegotiations(&c.plain, TTYPE).len() == 2)
        .await;
    // ...and the client never answers again.
    let (_s, login) = login(&mut c, &mut shard).await;
    let client = login.client.unwrap();
    assert_eq!(client.client_name, "TINTIN++");
    assert_eq!(client.mtts, 0);
    assert_eq!(c.plain.windows(6).filter(|w| *w == send).count(), 2);
}

#[tokio::test]
async fn naws_width_wraps_text() {
    let mut shard = FakeShard::start().await;
    let addr = gate(&[&shard.addr]).await;
    let mut c = Client::connect(addr).await;
    c.expect("create <name>").await;
    c.send(&[IAC, WILL, NAWS, IAC, SB, NAWS, 0, 40, 0, 24, IAC, SE])
        .await;
    let (s, _) = login(&mut c, &mut shard).await;
    let long = "Tall pines close in to the north, their needles thick on the path, and the air smells of resin.";
    s.output(&format!("{long}\nEND\n")).await;
    c.expect("END").await;
    let text = c.text();
    let body = &text[text.find("Tall").unwrap()..text.find("END").unwrap()];
    assert!(body.lines().count() >= 3, "{body}");
    assert!(body.lines().all(|l| l.chars().count() <= 40), "{body}");
}

#[tokio::test]
async fn malformed_truncated_and_looping_negotiation_loses_nothing() {
    let mut shard = FakeShard::start().await;
    // 100 KB of junk before login: lift the pre-login input rate (1 KiB/s
    // after a 4 KiB burst), which would otherwise read it for minutes.
    let mut cfg = test_config();
    cfg.edge.pre_login_bytes_per_sec = 10_000_000;
    let addr = gate_with(cfg, &[&shard.addr]).await;
    let mut c = Client::connect(addr).await;
    c.expect("create <name>").await;
    let mut junk = Vec::new();
    // An oversized GMCP message, a broken-off subnegotiation, a short NAWS,
    // an unknown option's subnegotiation, and a thousand flips of EOR.
    junk.extend_from_slice(&[IAC, SB, GMCP]);
    junk.extend(std::iter::repeat_n(b'x', 100_000));
    junk.extend_from_slice(&[IAC, SE]);
    junk.extend_from_slice(&[IAC, SB, NAWS, 0, 20, IAC, WILL, NAWS]);
    junk.extend_from_slice(&[IAC, SB, NAWS, 0, IAC, SE]);
    junk.extend_from_slice(&[IAC, SB, 99, 1, 2, 3, IAC, SE]);
    for _ in 0..1000 {
        junk.extend_from_slice(&[IAC, DO, EOR, IAC, DONT, EOR]);
    }
    junk.extend_from_slice(&[IAC, DONT, GMCP, IAC, DONT, MCCP2, IAC, DONT, MSSP]);
    c.send(&junk).await;
    let (s, _) = login(&mut c, &mut shard).await;
    s.output("still here\n").await;
    c.expect("still here").await;
    // Each flip costs one reply at most; the gate never starts a loop.
    let flips = c
        .plain
        .windows(3)
        .filter(|w| *w == [IAC, WILL, EOR])
        .count();
    assert!(flips <= 1001, "{flips}");
    assert!(c.inflate.is_none(), "refused compression stays off");
    // A truncated sequence at the very end is no harm either.
    c.send(&[IAC, SB, GMCP, b'C']).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    c.send(&[IAC, SE]).await;
    c.line("look").await;
    let mut s = s;
    assert_eq!(s.input().await.1, "look");
}

/// Another player's channel line (`Event.chatter`).
fn chatter_channel(text: &str) -> server_frame::Frame {
    let server_frame::Frame::Event(mut e) = channel(text) else {
        unreachable!("channel() is an event");
    };
    e.chatter = true;
    server_frame::Frame::Event(e)
}

#[tokio::test]
async fn a_slow_gmcp_reader_loses_others_channel_events_not_its_session() {
    let mut shard = FakeShard::start().await;
    let cfg = GateConfig {
        output_buffer_bytes: 64 * 1024,
        ..test_config()
    };
    let addr = gate_with(cfg, &[&shard.addr]).await;
    let mut c = Client::connect(addr).await;
    c.expect("create <name>").await;
    c.send(&[IAC, DO, GMCP]).await;
    c.gmcp_send(r#"Core.Supports.Set ["Comm 1"]"#).await;
    let (s, _) = login(&mut c, &mut shard).await;
    // The room talks far faster than this client reads (it reads nothing
    // meanwhile): megabytes of other players' lines as GMCP. Before the
    // events carried the chatter mark, they filled the output bound and
    // the player was cut off as a slow client.
    let line = format!("Bob says, '{}'", "x".repeat(100));
    for _ in 0..20_000 {
        s.send(chatter_channel(&line)).await;
    }
    s.output("your answer\n").await;
    c.expect("your answer").await;
    assert!(
        !String::from_utf8_lossy(&c.plain).contains("slow client"),
        "cut off as a slow client"
    );
    let seen = c.gmcp_of("Comm.Channel.Text").len();
    assert!(seen < 20_000, "every event was kept ({seen}): none dropped");
}
