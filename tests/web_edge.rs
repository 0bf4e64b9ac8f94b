//! The web listener at the edge, end to end with a real `telos-gate` and a
//! real keyed shard, through a Rust WebSocket client (tokio-tungstenite):
//! `wss://` with `--web-tls` (the players' certificate, trusted by the
//! client alone, renewed on SIGHUP), the page's width wrapping the world's
//! text (`Telos.Size`, the NAWS equivalent), a slowloris request closed by
//! the header-read timeout, `X-Forwarded-For` believed only from
//! `--web-forwarded-from`, and the PROXY protocol from
//! `--proxy-protocol-from` as the telnet listener takes it.

use std::time::Duration;

use anyhow::Context;
use telos_testkit::player_tls::{SelfSigned, peer_certificate};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

mod support;
use support::gate_world::{GateWorld, Page, web_addr};

/// Bounds a hang waiting for the next message (not a performance claim).
const STEP: Duration = Duration::from_secs(20);
/// The gate's header-read timeout is 10 s; a hang past this is a failure.
const SLOWLORIS_BOUND: Duration = Duration::from_secs(30);

/// A connection to the plain web listener at `addr` that first sends a
/// PROXY v1 header naming `client`.
async fn proxied(addr: &str, client: &str) -> anyhow::Result<TcpStream> {
    let mut tcp = TcpStream::connect(addr).await?;
    let header = format!("PROXY TCP4 {client} 127.0.0.1 40000 80\r\n");
    tcp.write_all(header.as_bytes()).await?;
    Ok(tcp)
}

/// `stream` was refused over its address's cap: an HTTP 503 saying so,
/// then closed, before any request.
async fn refused_over_cap(mut stream: TcpStream) -> anyhow::Result<()> {
    // Nothing sent: the refusal comes unasked (and unread input would make
    // the close a reset).
    let mut answer = Vec::new();
    tokio::time::timeout(STEP, stream.read_to_end(&mut answer)).await??;
    let answer = String::from_utf8_lossy(&answer);
    anyhow::ensure!(
        answer.starts_with("HTTP/1.1 503")
            && answer.contains("Too many connections from your address"),
        "not refused over the cap: {answer:?}"
    );
    Ok(())
}

/// Wait until the server closes `stream`, reading (and dropping) what it
/// sends; `Err` if it is still open after `bound`.
async fn closed_within<S: AsyncRead + Unpin>(
    stream: &mut S,
    bound: Duration,
) -> anyhow::Result<()> {
    let mut buf = [0u8; 1024];
    tokio::time::timeout(bound, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .context("the connection stayed open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wss_plays_wraps_to_the_page_and_closes_a_slowloris() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let cert = SelfSigned::write(dir.path(), "players")?;
    let (c, k) = (
        cert.cert.display().to_string(),
        cert.key.display().to_string(),
    );
    let flags = [
        "--web-listen",
        "127.0.0.1:0",
        "--web-tls",
        "--tls-cert",
        &c,
        "--tls-key",
        &k,
    ];
    let gw = GateWorld::start(&flags)?;
    let gate = &gw.gate;
    let addr = web_addr(gate, "https")?;

    // A WebSocket over TLS, trusting the players' certificate only.
    let mut page = Page::open(cert.connect(&addr).await?, None).await?;
    page.expect("create <name> <password>").await?;
    // The page's output pane is 30 characters wide.
    page.gmcp(r#"Telos.Size {"width":30,"height":20}"#).await?;
    page.line("create Wessie correct horse").await?;
    page.expect("Welcome, Wessie").await?;
    page.text.clear();
    page.line("look").await?;
    page.line("say wrapped").await?;
    page.expect("wrapped").await?;
    let look = page.text.clone();
    // What the page shows: colour codes take no width, and a status prompt
    // (a prefix that waits for the next output on its line) is not text.
    let shown = |l: &str| {
        let mut plain = String::new();
        let mut escape = false;
        for c in l.chars() {
            match (escape, c) {
                (false, '\u{1b}') => escape = true,
                (true, c) if c.is_ascii_alphabetic() => escape = false,
                (true, _) => {}
                (false, c) => plain.push(c),
            }
        }
        match plain.strip_prefix('<').and_then(|p| p.split_once("> ")) {
            Some((_, rest)) => rest.to_string(),
            None => plain,
        }
    };
    let widest = look
        .lines()
        .map(|l| shown(l).trim_end().chars().count())
        .max();
    assert!(look.len() > 120, "a room's description: {look:?}");
    assert!(
        widest <= Some(30),
        "lines wrap to the page's 30 columns: {look:?}"
    );

    // A renewed certificate on SIGHUP: new connections see it.
    let renewed = SelfSigned::write(dir.path(), "players")?;
    gate.signal(libc::SIGHUP);
    gate.wait_log("players' TLS certificate reloaded", STEP)
        .await?;
    assert_eq!(peer_certificate(&addr).await?, renewed.der);
    page.line("say still here").await?;
    page.expect("still here").await?;

    // Slowloris: a request's headers a piece at a time, never finished.
    let mut slow = renewed.connect(&addr).await?;
    slow.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n")
        .await?;
    slow.flush().await?;
    closed_within(&mut slow, SLOWLORIS_BOUND).await?;
    // A client that does not trust the certificate gets nothing.
    let stranger = SelfSigned::write(dir.path(), "stranger")?;
    assert!(stranger.connect(&addr).await.is_err());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_for_counts_only_from_a_trusted_proxy() -> anyhow::Result<()> {
    let one = [
        "--max-connections-per-ip",
        "1",
        "--web-listen",
        "127.0.0.1:0",
    ];
    let trusting = [&one[..], &["--web-forwarded-from", "127.0.0.0/8"]].concat();
    let gw = GateWorld::start(&trusting)?;
    let gate = &gw.gate;
    let addr = web_addr(gate, "http")?;
    let conn = || TcpStream::connect(addr.clone());

    let mut a = Page::open(conn().await?, Some("203.0.113.1, 198.51.100.1")).await?;
    a.expect("create <name>").await?;
    // The same player address again: over the cap of one.
    let mut again = Page::open(conn().await?, Some("198.51.100.1")).await?;
    again
        .expect("Too many connections from your address")
        .await?;
    // Another player behind the same proxy: their own count.
    let mut b = Page::open(conn().await?, Some("198.51.100.2")).await?;
    b.expect("create <name>").await?;

    // From an untrusted peer the header is the client's word: ignored.
    let plain = gw.another_gate(&one)?;
    let addr = web_addr(&plain, "http")?;
    let mut c = Page::open(TcpStream::connect(&addr).await?, Some("198.51.100.3")).await?;
    c.expect("create <name>").await?;
    // Counted from accept, by the connection's own address: refused
    // before any request is read.
    refused_over_cap(TcpStream::connect(&addr).await?).await?;
    drop((a, b, c));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_protocol_names_the_player_as_on_telnet() -> anyhow::Result<()> {
    let flags = [
        "--max-connections-per-ip",
        "1",
        "--web-listen",
        "127.0.0.1:0",
        "--proxy-protocol-from",
        "127.0.0.1",
    ];
    let gw = GateWorld::start(&flags)?;
    let gate = &gw.gate;
    let addr = web_addr(gate, "http")?;

    let mut a = Page::open(proxied(&addr, "198.51.100.1").await?, None).await?;
    a.expect("create <name>").await?;
    // Counted once the header names the player: refused there.
    refused_over_cap(proxied(&addr, "198.51.100.1").await?).await?;
    let mut b = Page::open(proxied(&addr, "198.51.100.2").await?, None).await?;
    b.expect("create <name>").await?;
    // From the balancer, a connection without the header is refused.
    let mut bare = TcpStream::connect(&addr).await?;
    bare.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await?;
    let mut answer = Vec::new();
    tokio::time::timeout(STEP, bare.read_to_end(&mut answer)).await??;
    assert!(
        !String::from_utf8_lossy(&answer).contains("200 OK"),
        "served without a PROXY header: {}",
        String::from_utf8_lossy(&answer)
    );
    // The telnet listener takes the same header from the same balancer.
    let mut telnet = proxied(&gate.addr, "198.51.100.9").await?;
    let mut greeting = vec![0u8; 4096];
    let n = tokio::time::timeout(STEP, telnet.read(&mut greeting)).await??;
    assert!(n > 0, "telnet over PROXY answers");
    drop((a, b));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_connection_that_never_becomes_a_websocket_ends_at_the_pre_login_timeout()
-> anyhow::Result<()> {
    let flags = [
        "--web-listen",
        "127.0.0.1:0",
        "--pre-login-timeout-secs",
        "2",
    ];
    let gw = GateWorld::start(&flags)?;
    let gate = &gw.gate;
    let addr = web_addr(gate, "http")?;
    // A page that logs in within the timeout plays on past it: the bound
    // is the HTTP connection's, not its WebSocket's.
    let mut page = Page::open(TcpStream::connect(&addr).await?, None).await?;
    page.expect("create <name>").await?;
    page.line("create Lingers correct horse").await?;
    page.expect("Welcome, Lingers").await?;
    // A request every half second, well inside the header-read timeout,
    // on one kept-alive connection that never asks for the WebSocket.
    let (mut read, mut write) = TcpStream::connect(&addr).await?.into_split();
    let asking = tokio::spawn(async move {
        let request = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";
        while write.write_all(request).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    // Closed at the 2 s pre-login timeout; before the bound, it stayed
    // open as long as the requests came.
    let closed = closed_within(&mut read, Duration::from_secs(8)).await;
    asking.abort();
    closed?;
    page.line("say still here").await?;
    page.expect("still here").await
}

/// A TCP connection to `addr` from the loopback address `from` (all of
/// 127.0.0.0/8 is this host: another address, another network).
async fn connect_from(from: &str, addr: &str) -> anyhow::Result<TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(format!("{from}:0").parse()?)?;
    Ok(socket.connect(addr.parse()?).await?)
}

/// `GET /` on `stream`; whether the answer was the page.
async fn gets_the_page(mut stream: TcpStream) -> anyhow::Result<bool> {
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await?;
    let mut answer = Vec::new();
    tokio::time::timeout(STEP, stream.read_to_end(&mut answer)).await??;
    let answer = String::from_utf8_lossy(&answer);
    Ok(answer.starts_with("HTTP/1.1 200") && answer.contains("<html"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_http_connections_from_one_address_cannot_exhaust_the_web_listener()
-> anyhow::Result<()> {
    let flags = [
        "--web-listen",
        "127.0.0.1:0",
        "--max-connections-per-ip",
        "4",
        "--max-pre-login",
        "8",
    ];
    let gw = GateWorld::start(&flags)?;
    let addr = web_addr(&gw.gate, "http")?;
    // A player in play, from their own network.
    let mut player = Page::open(connect_from("127.0.2.1", &addr).await?, None).await?;
    player.expect("create <name>").await?;
    player.line("create Steady correct horse").await?;
    player.expect("Welcome, Steady").await?;

    // One address opens connections and sends half a request on each,
    // holding them.
    let mut flood = Vec::new();
    for _ in 0..24 {
        let mut c = connect_from("127.0.0.1", &addr).await?;
        let _ = c.write_all(b"GET / HTTP/1.1\r\n").await;
        flood.push(c);
    }
    // Meanwhile (well inside the 10 s header-read timeout that ends the
    // flood's requests) another address gets the page, and can play.
    assert!(gets_the_page(connect_from("127.0.1.1", &addr).await?).await?);
    let mut fresh = Page::open(connect_from("127.0.1.2", &addr).await?, None).await?;
    fresh.expect("create <name>").await?;
    fresh.line("create Newweb correct horse").await?;
    fresh.expect("Welcome, Newweb").await?;
    // Beyond its cap of 4 the flood's connections were closed at once.
    let mut closed = 0;
    for c in flood.iter_mut().skip(4) {
        if closed_within(c, Duration::from_secs(1)).await.is_ok() {
            closed += 1;
        }
    }
    assert_eq!(
        closed, 20,
        "connections over the per-address cap are closed"
    );
    // And the player in play never noticed.
    player.line("say unbothered").await?;
    player.expect("unbothered").await?;
    drop(flood);
    Ok(())
}
