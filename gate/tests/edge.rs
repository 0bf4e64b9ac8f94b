//! The gate's edge against in-process fake shards: a connection that does
//! not log in is closed at the pre-login timeout, and a flood of long lines
//! is held to the input buffer's byte bound, told so, and loses nothing.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::*;
use telos_gate::GateConfig;
use telos_gate::buffer::line_cost;
use telos_gate::notices::INPUT_PAUSED;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedReadHalf;

/// Long lines in the flood: far more than the byte bound holds.
const FLOOD_LINES: usize = 200;
/// Bytes per flood line: near the 4096-byte line limit.
const FLOOD_LINE_BYTES: usize = 4000;

#[tokio::test]
async fn a_silent_socket_is_closed_at_the_pre_login_timeout() {
    let cfg = GateConfig {
        pre_login_timeout: Duration::from_secs(1),
        ..test_config()
    };
    let (gate, _stop) = start_gate(cfg, &["127.0.0.1:1"]).await;
    let mut silent = Player::connect(gate).await;
    let rest = silent.expect_closed().await;
    assert!(
        rest.contains("You did not log in within 1 seconds; goodbye."),
        "{rest:?}"
    );
}

#[tokio::test]
async fn typing_without_logging_in_does_not_extend_the_pre_login_timeout() {
    let cfg = GateConfig {
        pre_login_timeout: Duration::from_secs(1),
        ..test_config()
    };
    let (gate, _stop) = start_gate(cfg, &["127.0.0.1:1"]).await;
    let mut chatty = Player::connect(gate).await;
    chatty.expect("connect <name> <password>").await;
    // Each line is answered (usage), and none is a login: the clock from
    // connect still runs out.
    let mut answered = 0;
    let closed = loop {
        chatty.send("look\r\n").await;
        let text = chatty.expect("\n").await;
        if text.contains("You did not log in") {
            break true;
        }
        answered += 1;
        assert!(answered < 10_000, "never closed");
    };
    assert!(closed);
}

/// The gauge's current and highest value, as a local recorder sees it.
#[derive(Default)]
struct PeakGauge(Mutex<(f64, f64)>);

impl PeakGauge {
    fn peak(&self) -> f64 {
        self.0.lock().unwrap().1
    }
    fn update(&self, f: impl FnOnce(f64) -> f64) {
        let mut g = self.0.lock().unwrap();
        g.0 = f(g.0);
        g.1 = g.1.max(g.0);
    }
}

impl metrics::GaugeFn for PeakGauge {
    fn increment(&self, v: f64) {
        self.update(|c| c + v);
    }
    fn decrement(&self, v: f64) {
        self.update(|c| c - v);
    }
    fn set(&self, v: f64) {
        self.update(|_| v);
    }
}

/// Records the gate's buffered-input-bytes gauge, nothing else.
#[derive(Default)]
struct BufferedBytes(Arc<PeakGauge>);

impl metrics::Recorder for BufferedBytes {
    fn describe_counter(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_gauge(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_histogram(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn register_counter(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        metrics::Counter::noop()
    }
    fn register_gauge(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        if key.name() == telos_gate::metrics::BUFFERED_BYTES {
            metrics::Gauge::from_arc(self.0.clone())
        } else {
            metrics::Gauge::noop()
        }
    }
    fn register_histogram(
        &self,
        _: &metrics::Key,
        _: &metrics::Metadata<'_>,
    ) -> metrics::Histogram {
        metrics::Histogram::noop()
    }
}

/// Read until `needle` arrives; the text read.
async fn read_until(rd: &mut OwnedReadHalf, needle: &str) -> String {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    let found = tokio::time::timeout(WAIT, async {
        while !String::from_utf8_lossy(&seen).contains(needle) {
            let n = rd.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                return false;
            }
            seen.extend_from_slice(&buf[..n]);
        }
        true
    })
    .await;
    let text = String::from_utf8_lossy(&seen).into_owned();
    assert!(found == Ok(true), "no {needle:?}; saw {text:?}");
    text
}

fn flood_line(i: usize) -> String {
    let head = format!("say {i} ");
    format!("{head}{}", "x".repeat(FLOOD_LINE_BYTES - head.len()))
}

#[tokio::test]
async fn a_flood_of_long_lines_is_held_to_the_byte_bound_and_loses_nothing() {
    // Current-thread runtime: the local recorder sees every gate task.
    let gauge = BufferedBytes::default();
    let peak = gauge.0.clone();
    let _recorder = metrics::set_default_local_recorder(&gauge);
    let cfg = test_config();
    let bound = cfg.input_buffer_bytes;
    let mut shard = FakeShard::start().await;
    let (gate, _stop) = start_gate(cfg, &[&shard.addr]).await;
    let mut p = Player::connect(gate).await;
    p.expect("connect <name> <password>").await;
    p.send("connect Flooder hunter2222\r\n").await;
    let (mut s, _) = accept_login(&mut shard, "Flooder", "c").await;
    p.expect("Welcome, Flooder").await;

    // The socket buffers take the flood; the gate reads what its bound allows.
    let flood: String = (1..=FLOOD_LINES).map(|i| flood_line(i) + "\r\n").collect();
    let (mut rd, mut wr) = p.stream.into_split();
    // The write half is handed back, not dropped: a close would end the
    // session before the last lines are through.
    let writer = tokio::spawn(async move { wr.write_all(flood.as_bytes()).await.map(|()| wr) });
    let text = read_until(&mut rd, &as_shown(INPUT_PAUSED)).await;
    assert!(!text.contains("slow client"), "{text:?}");
    let held = bound / line_cost(FLOOD_LINE_BYTES);
    let mut seq = 0;
    while seq < held as u64 {
        let (n, line) = s.input().await;
        seq = n;
        assert_eq!(line, flood_line(n as usize));
    }
    assert!(
        peak.peak() <= bound as f64,
        "{} bytes buffered, bound {bound}",
        peak.peak()
    );
    assert_eq!(peak.peak(), (held * line_cost(FLOOD_LINE_BYTES)) as f64);

    // Acks free the room: every line arrives, in order, none lost.
    while seq < FLOOD_LINES as u64 {
        s.input_ack(seq).await;
        s.durable_ack(seq).await;
        let (n, line) = s.input().await;
        assert_eq!(n, seq + 1);
        assert_eq!(line, flood_line(n as usize));
        seq = n;
    }
    let _wr = writer.await.unwrap().unwrap();
    assert!(peak.peak() <= bound as f64);
}
