//! One input budget for every byte a connection sends, before and after
//! login, over every transport (issue 30, the edge): after login no byte
//! rate applied (48 sockets of `IAC NOP`: 10.8 GB in 15 s, 96 % of a
//! core), and a never-logged-in web page's own messages (pings,
//! `Telos.Seen`) skipped the pre-login rate a telnet stranger meets. Both
//! are now read at a budget (TCP backpressure): a player's 16 KiB/s after a
//! 64 KiB burst, a stranger's `--pre-login-bytes-per-sec`.
//!
//! The bounds below are far above the budgets (the kernel's socket buffers
//! take megabytes the gate has not read) and far below what an unthrottled
//! read takes on loopback (gigabytes a second).

mod support;

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use support::gate_world::{GateWorld, web_addr};
use telos_testkit::bot::Bot;
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// How long each flood lasts.
const FLOOD: Duration = Duration::from_secs(3);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_players_flood_of_telnet_commands_is_read_at_a_players_pace() -> anyhow::Result<()> {
    let gw = GateWorld::start(&["--input-bytes-per-sec", "16384"])?;
    let mut flooder = Bot::create_at(&gw.gate.addr, "Nopper", "correct horse").await?;
    let mut bystander = Bot::create_at(&gw.gate.addr, "Stander", "correct horse").await?;
    const IAC_NOP: [u8; 2] = [255, 241];
    let chunk: Vec<u8> = IAC_NOP.iter().copied().cycle().take(64 * 1024).collect();
    let until = Instant::now() + FLOOD;
    let mut written = 0usize;
    while Instant::now() < until {
        match tokio::time::timeout_at(until, flooder.send_raw(&chunk)).await {
            Ok(Ok(())) => written += chunk.len(),
            Ok(Err(e)) => anyhow::bail!("the flooder's socket failed: {e}"),
            Err(_) => break,
        }
    }
    assert!(
        written < 32 << 20,
        "{} MiB of IAC NOP read in {FLOOD:?}: no byte rate after login",
        written >> 20
    );
    // Nobody else paid for it.
    let look = bystander.command("look").await?;
    assert!(look.contains("Market Square"), "{look:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strangers_web_pings_are_read_at_a_strangers_pace() -> anyhow::Result<()> {
    let gw = GateWorld::start(&[
        "--web-listen",
        "127.0.0.1:0",
        "--pre-login-bytes-per-sec",
        "1024",
    ])?;
    let addr = web_addr(&gw.gate, "http")?;
    let mut req = format!("ws://{addr}/ws").into_client_request()?;
    req.headers_mut()
        .insert("Sec-WebSocket-Protocol", "gmcp.mudstandards.org".parse()?);
    let (ws, _) = tokio_tungstenite::client_async(req, TcpStream::connect(&addr).await?).await?;
    let (mut tx, mut rx) = ws.split();
    const PINGS: usize = 3000;
    let sending = tokio::spawn(async move {
        for _ in 0..PINGS {
            if tx.send(Message::Ping(vec![0u8; 16].into())).await.is_err() {
                break;
            }
        }
        tx
    });
    let until = Instant::now() + FLOOD;
    let mut pongs = 0usize;
    while let Ok(Some(m)) = tokio::time::timeout_at(until, rx.next()).await {
        if matches!(m?, Message::Pong(_)) {
            pongs += 1;
        }
    }
    sending.abort();
    // The budget: 4096 bytes at once and 1024 a second, each ping costing
    // its 16 bytes and 64 of overhead: about 100 in 3 s.
    assert!(
        pongs < 500,
        "{pongs} of {PINGS} pings answered in {FLOOD:?}: the page's own messages skip the pre-login rate"
    );
    Ok(())
}
