//! A resumed session is counted where its socket is (issue 30, the edge):
//! a telnet session resumed from a second address stayed counted at the
//! first, so an address could hold twice its cap of sockets (32 against
//! 16) by resuming sessions made elsewhere, and the first address stayed
//! charged for a socket it no longer had.
//!
//! With `--max-connections-per-ip 2`: a player logs in from 127.0.0.1,
//! drops, and resumes from 127.0.0.2. Then 127.0.0.1 opens two
//! connections (its place was given back), and 127.0.0.2 opens one more and
//! is refused the next (the resumed session holds one of its two).

mod support;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use support::gate_world::{GateWorld, Page, web_addr};
use telos_testkit::bot::Bot;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// Bounds a hang (not a performance claim).
const STEP: Duration = Duration::from_secs(20);
const PER_IP: &str = "Too many connections from your address";

async fn open_from(gate: &str, from: &str) -> anyhow::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(from.parse::<IpAddr>()?, 0))?;
    Ok(socket.connect(gate.parse()?).await?)
}

/// Read `tcp` until one of `needles` shows (telnet negotiation included,
/// as text is searched in the raw bytes); what was read.
async fn read_until_any(tcp: &mut TcpStream, needles: &[&str]) -> anyhow::Result<String> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&seen).into_owned();
        if needles.iter().any(|n| text.contains(n)) {
            return Ok(text);
        }
        let n = tokio::time::timeout(STEP, tcp.read(&mut buf))
            .await
            .map_err(|_| anyhow::anyhow!("waiting for {needles:?}; read {text:?}"))??;
        anyhow::ensure!(n > 0, "closed waiting for {needles:?}: {text:?}");
        seen.extend_from_slice(&buf[..n]);
    }
}

async fn read_until(tcp: &mut TcpStream, needle: &str) -> anyhow::Result<String> {
    read_until_any(tcp, &[needle]).await
}

/// Whether a new connection from `from` is let in (the banner) or refused
/// over its address's cap.
async fn let_in(gate: &str, from: &str) -> anyhow::Result<(bool, TcpStream)> {
    let mut tcp = open_from(gate, from).await?;
    let text = read_until_any(&mut tcp, &[PER_IP, "create <name>"]).await?;
    Ok((!text.contains(PER_IP), tcp))
}

/// With a cap of two per address: 127.0.0.1 (where the session was) lets
/// two new connections in, 127.0.0.2 (where it is now) one.
async fn counted_at_the_new_address(gate: &str) -> anyhow::Result<()> {
    let (a1, _k1) = let_in(gate, "127.0.0.1").await?;
    let (a2, _k2) = let_in(gate, "127.0.0.1").await?;
    assert!(
        a1 && a2,
        "127.0.0.1 is still charged for the session it no longer holds"
    );
    let (b1, _k3) = let_in(gate, "127.0.0.2").await?;
    let (b2, _k4) = let_in(gate, "127.0.0.2").await?;
    assert!(
        b1,
        "127.0.0.2 holds the resumed session and room for one more"
    );
    assert!(!b2, "127.0.0.2 holds three sockets against a cap of two");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_telnet_session_resumed_from_another_address_is_counted_there() -> anyhow::Result<()> {
    let gw = GateWorld::start(&[
        "--telnet-resume-grace-secs",
        "60",
        "--max-connections-per-ip",
        "2",
    ])?;
    let gate = gw.gate.addr.clone();
    let mut first = Bot::open_from(&gate, "127.0.0.1".parse()?).await?;
    first.create("Wanderer", "correct horse").await?;
    let token = first
        .transcript()
        .lines()
        .find_map(|l| l.trim().strip_prefix("resume ").map(str::to_string))
        .ok_or_else(|| anyhow::anyhow!("no resume token:\n{}", first.transcript()))?;
    drop(first);
    gw.gate
        .wait_log("telnet client dropped; session kept for its resume", STEP)
        .await?;

    let mut second = open_from(&gate, "127.0.0.2").await?;
    read_until(&mut second, "create <name>").await?;
    second
        .write_all(format!("resume {token}\r\n").as_bytes())
        .await?;
    read_until(&mut second, "Session resumed").await?;

    counted_at_the_new_address(&gate).await
}

/// The same for a web page: a page dropped at 127.0.0.1 and resumed from
/// 127.0.0.2 is counted at 127.0.0.2 (the per-address count is one, over
/// telnet and the web alike).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_web_page_resumed_from_another_address_is_counted_there() -> anyhow::Result<()> {
    let gw = GateWorld::start(&[
        "--web-listen",
        "127.0.0.1:0",
        "--max-connections-per-ip",
        "2",
    ])?;
    let gate = gw.gate.addr.clone();
    let web = web_addr(&gw.gate, "http")?;
    let mut first = Page::open(open_from(&web, "127.0.0.1").await?, None).await?;
    first.expect("create <name>").await?;
    first.line("create Webwander correct horse").await?;
    first.expect("Welcome, Webwander").await?;
    let token = first.token().await?;
    let seen = first.seen;
    drop(first);
    let query = format!("?resume={token}&seen={seen}");
    let mut back = Page::open_at(open_from(&web, "127.0.0.2").await?, &query, None).await?;
    back.token().await?;
    back.line("journal moved").await?;
    back.expect("Noted.").await?;

    counted_at_the_new_address(&gate).await
}
