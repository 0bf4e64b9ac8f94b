//! Floods against the output bound: a client that reads is slowed down by
//! TCP, never cut off; a client that does not read is cut off with a notice
//! that reaches it, even with its own input still unread by the gate.

mod support;

use std::time::Duration;

use support::*;
use telos_gate::GateConfig;
use telos_gate::output::SLOW_CLIENT_NOTICE;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::mpsc::UnboundedReceiver;

/// Bound on a whole flood: megabytes through a debug build.
const FLOOD_WAIT: Duration = Duration::from_secs(60);
/// The reads a normal client makes.
const READ_SIZE: usize = 64 * 1024;
/// A receive buffer small enough that a client that does not read has its
/// window shut at once, so everything else waits on the gate's side.
const TINY_RECV_BUFFER: u32 = 4096;
const LOGIN: &[u8] = b"connect Flooder password1\r\n";
const USAGE: &str = "Type `connect <name> <password>` or `create <name> <password>` (or `quit`).";

/// About what `help` prints: each line earns a kilobyte.
/// `cfg` with the pre-login input rate lifted (a flood before login is
/// read as fast as it comes, as before that limit).
fn unthrottled(cfg: GateConfig) -> GateConfig {
    GateConfig {
        edge: telos_gate::config::EdgeLimits {
            pre_login_bytes_per_sec: u32::MAX,
            ..cfg.edge.clone()
        },
        ..cfg
    }
}

fn help_sized(seq: u64, line: &str) -> String {
    if line == "done" {
        return "answer done\n".into();
    }
    format!("answer {seq}\n{}\n", ".".repeat(1000))
}

/// A longer answer, so a few lines fill the windows of a client that does
/// not read.
fn room_sized(seq: u64, _line: &str) -> String {
    format!("answer {seq}\n{}\n", "#".repeat(8 * 1024))
}

fn numbered_lines(verb: &str, n: u64) -> String {
    (1..=n).map(|i| format!("{verb} {i}\r\n")).collect()
}

/// Read (64 KiB at a time) until the text contains `needle`; returns the
/// text so far, telnet commands stripped. Panics on EOF, error or timeout.
async fn read_until(rd: &mut OwnedReadHalf, seen: &mut Vec<u8>, needle: &str) -> String {
    let mut buf = vec![0u8; READ_SIZE];
    let found = tokio::time::timeout(FLOOD_WAIT, async {
        loop {
            let text = strip_iac(seen);
            if text.contains(needle) {
                return text;
            }
            match rd.read(&mut buf).await {
                Ok(0) => panic!("closed before {needle:?}; tail {:?}", tail(&text)),
                Ok(n) => seen.extend_from_slice(&buf[..n]),
                Err(e) => panic!("{e} before {needle:?}; tail {:?}", tail(&text)),
            }
        }
    })
    .await;
    found.unwrap_or_else(|_| panic!("timed out waiting for {needle:?}"))
}

/// Read to the end. A reset (or any error) fails: it means TCP threw away
/// whatever the gate had not delivered yet, the goodbye included.
async fn read_to_clean_end(stream: &mut TcpStream) -> String {
    let mut seen = Vec::new();
    let end = tokio::time::timeout(WAIT, stream.read_to_end(&mut seen))
        .await
        .expect("the gate did not close the socket");
    let text = strip_iac(&seen);
    if let Err(e) = end {
        panic!(
            "the socket ended with {e} (kind {:?}), not a clean close; tail {:?}",
            e.kind(),
            tail(&text)
        );
    }
    text
}

fn tail(text: &str) -> &str {
    let mut at = text.len().saturating_sub(300);
    while !text.is_char_boundary(at) {
        at += 1;
    }
    &text[at..]
}

/// A socket with a tiny receive buffer, connected.
async fn tiny_window_client(gate: std::net::SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(TINY_RECV_BUFFER).unwrap();
    socket.connect(gate).await.unwrap()
}

/// Log in on a raw stream, reading up to the welcome.
async fn login(stream: &mut TcpStream) {
    stream.write_all(LOGIN).await.unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    tokio::time::timeout(WAIT, async {
        while !strip_iac(&seen).contains("Welcome, Flooder.") {
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed before the welcome");
            seen.extend_from_slice(&buf[..n]);
        }
    })
    .await
    .expect("no welcome");
}

/// Wait until the gate ends the shard stream of one connection (the session
/// is over); returns how many input lines the shard got on it.
async fn wait_stream_end(events: &mut UnboundedReceiver<ShardEvent>) -> usize {
    let mut inputs = 0;
    loop {
        match tokio::time::timeout(FLOOD_WAIT, events.recv())
            .await
            .expect("the gate never ended the session")
            .expect("shard gone")
        {
            ShardEvent::Input { .. } => inputs += 1,
            ShardEvent::Ended { .. } => return inputs,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_flooding_commands_while_reading_is_slowed_not_cut_off() {
    const LINES: u64 = 5000;
    let (shard, mut events) = answering_shard(help_sized, true).await;
    let (gate, _stop) = start_gate(test_config(), &[&shard]).await;
    let mut stream = TcpStream::connect(gate).await.unwrap();
    login(&mut stream).await;
    let (mut rd, mut wr) = stream.into_split();

    // Five megabytes of answers to one write of 5000 commands: twenty times
    // the output bound.
    let reader = tokio::spawn(async move {
        let mut seen = Vec::new();
        let text = read_until(&mut rd, &mut seen, "answer done").await;
        (text, rd)
    });
    let flood = numbered_lines("help", LINES) + "done\r\n";
    wr.write_all(flood.as_bytes()).await.unwrap();
    let (text, mut rd) = reader.await.unwrap();

    assert!(!text.contains("slow client"), "cut off: {:?}", tail(&text));
    let answers: Vec<u64> = text
        .lines()
        .filter_map(|l| l.trim_end().strip_prefix("answer "))
        .filter_map(|n| n.parse().ok())
        .collect();
    assert_eq!(answers.len() as u64, LINES, "every answer, once");
    assert!(answers.iter().copied().eq(1..=LINES), "in order");

    let mut seqs = Vec::new();
    while seqs.len() as u64 <= LINES {
        match events.recv().await.unwrap() {
            ShardEvent::Input { seq, line, .. } => {
                if seq <= LINES {
                    assert_eq!(line, format!("help {seq}"));
                }
                seqs.push(seq);
            }
            ShardEvent::Ended { .. } => panic!("the session ended"),
        }
    }
    assert!(seqs.iter().copied().eq(1..=LINES + 1), "each line once");

    // Still connected and playing.
    wr.write_all(b"done\r\n").await.unwrap();
    let mut seen = Vec::new();
    read_until(&mut rd, &mut seen, "answer done").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_flooding_junk_before_login_while_reading_gets_every_reply() {
    const LINES: u64 = 10_000;
    let (shard, _events) = answering_shard(help_sized, true).await;
    // The output's backpressure is under test, not the pre-login input
    // rate (crowd.rs): lifted, or 10 000 lines take minutes to be read.
    let (gate, _stop) = start_gate(unthrottled(test_config()), &[&shard]).await;
    let stream = TcpStream::connect(gate).await.unwrap();
    let (mut rd, mut wr) = stream.into_split();

    // Each junk line earns the usage hint: 10 000 of them are about three
    // times the output bound.
    let reader = tokio::spawn(async move {
        let mut seen = Vec::new();
        let text = read_until(&mut rd, &mut seen, "Welcome, Flooder.").await;
        (text, rd)
    });
    let mut flood = numbered_lines("junk", LINES);
    flood.push_str(std::str::from_utf8(LOGIN).unwrap());
    wr.write_all(flood.as_bytes()).await.unwrap();
    let (text, _rd) = reader.await.unwrap();
    assert!(!text.contains("slow client"), "cut off: {:?}", tail(&text));
    assert_eq!(text.matches(USAGE).count() as u64, LINES);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooding_client_that_never_reads_is_cut_off_and_gets_the_notice() {
    // 40 MB of answers: more than the gate's kernel send buffer can take.
    let (shard, mut events) = answering_shard(room_sized, true).await;
    let cfg = GateConfig {
        output_stall_timeout: Duration::from_millis(300),
        ..test_config()
    };
    let (gate, _stop) = start_gate(cfg, &[&shard]).await;
    let mut stream = tiny_window_client(gate).await;
    login(&mut stream).await;

    // From here on the client only writes.
    let flood = numbered_lines("help", 5000);
    tokio::time::timeout(WAIT, stream.write_all(flood.as_bytes()))
        .await
        .expect("the flood fits the socket buffers")
        .unwrap();
    let forwarded = wait_stream_end(&mut events).await;
    assert!(
        forwarded < 5000,
        "the gate stopped forwarding ({forwarded} lines went out), so input was left unread"
    );

    // Cut off while its input was still unread: the notice arrives anyway,
    // last, before a clean close.
    let text = read_to_clean_end(&mut stream).await;
    assert!(
        text.ends_with(SLOW_CLIENT_NOTICE),
        "no notice at the end: {:?}",
        tail(&text)
    );
}

// Current-thread: the local metrics recorder sees every task of the test.
#[tokio::test]
async fn a_client_that_never_reads_its_junk_replies_is_cut_off_before_login() {
    const JUNK_LINES: usize = 100_000;
    let slow = SlowClientCount::default();
    let _recorder = metrics::set_default_local_recorder(&slow);
    let cfg = GateConfig {
        output_stall_timeout: Duration::from_millis(300),
        ..unthrottled(test_config())
    };
    let (gate, _stop) = start_gate(cfg, &["127.0.0.1:1"]).await;
    let mut stream = tiny_window_client(gate).await;
    // Two bytes a line, 87 a reply: 8 MB of replies, more than the gate's
    // kernel send buffer can take, to 200 KB of input.
    let flood = "x\n".repeat(JUNK_LINES);
    tokio::time::timeout(WAIT, stream.write_all(flood.as_bytes()))
        .await
        .expect("the gate reads the flood or discards it")
        .unwrap();
    // No shard session to watch before login: the gate's own count says
    // when it gave up on the client. Only then does the client read.
    slow.wait_for(1).await;
    let text = read_to_clean_end(&mut stream).await;
    assert!(
        text.ends_with(SLOW_CLIENT_NOTICE),
        "no notice at the end: {:?}",
        tail(&text)
    );
    let replies = text.matches(USAGE).count();
    assert!(
        replies < JUNK_LINES,
        "{replies} replies: the gate stopped reading"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_idle_goodbye_reaches_a_client_with_unread_input() {
    let (shard, mut events) = answering_shard(room_sized, false).await;
    // No durable acks and room for 8 lines: the gate stops reading after
    // eight, then the idle clock runs out with the rest unread.
    let cfg = GateConfig {
        input_buffer_lines: 8,
        idle_timeout: Duration::from_millis(800),
        idle_warning: Duration::from_millis(400),
        ..test_config()
    };
    let (gate, _stop) = start_gate(cfg, &[&shard]).await;
    let mut stream = tiny_window_client(gate).await;
    login(&mut stream).await;
    let flood = numbered_lines("look", 5000);
    tokio::time::timeout(WAIT, stream.write_all(flood.as_bytes()))
        .await
        .expect("the flood fits the socket buffers")
        .unwrap();
    assert_eq!(wait_stream_end(&mut events).await, 8);

    let text = read_to_clean_end(&mut stream).await;
    assert!(text.contains("answer 8\r\n"), "{:?}", tail(&text));
    assert!(
        text.trim_end().ends_with("Idle timeout; goodbye."),
        "no goodbye at the end: {:?}",
        tail(&text)
    );
}
