//! # web: a web player against a telnet player, at the same gate
//!
//! `scripts/bench web` (release binaries; `cargo test --bench web` runs it
//! on the debug ones). One private `redis-server`, one keyed `telos-world`
//! serving every starter zone and one keyed `telos-gate` with
//! `--web-listen`, in one run:
//!
//! - **idle memory**: the gate's RSS (`VmRSS`) with no player, then with
//!   `TELOS_BENCH_PLAYERS` (default [`DEFAULT_PLAYERS`]) telnet players
//!   logged in and idle (a [`Bot`] each, one `look`), all closed again,
//!   then the same number of web players (a WebSocket each on
//!   `gmcp.mudstandards.org`, logged in, one `where`): the cost of an idle
//!   player of each kind, per player.
//! - **lines/s**: 1 and 5 players each keeping one `where` in flight for
//!   `TELOS_BENCH_SECS` (default 2) seconds, over telnet and over a
//!   WebSocket, side by side: lines/s, p50/p99 round trip and the ratio.

mod common;

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use telos_testkit::bot::Bot;
use telos_testkit::process::bin;
use telos_testkit::procfs;
use telos_testkit::stats::percentile_us;
use telos_testkit::storm::{create_and_quit, name};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use common::World;

const DEFAULT_PLAYERS: usize = 500;
const CLIENTS: usize = 32;
const PASSWORD: &str = "bench-password";
const CASES: [usize; 2] = [1, 5];
const WARMUP: Duration = Duration::from_millis(300);
/// Bounds a hang on one answer (not a performance claim).
const STEP: Duration = Duration::from_secs(30);
/// Bounds the wait for the gate's trim once the telnet players left.
const TRIM_WITHIN: Duration = Duration::from_secs(30);

fn main() -> anyhow::Result<()> {
    let env = |k: &str| std::env::var(k).ok().and_then(|s| s.parse::<f64>().ok());
    let players = env("TELOS_BENCH_PLAYERS").map_or(DEFAULT_PLAYERS, |n| n as usize);
    let secs = env("TELOS_BENCH_SECS").unwrap_or(2.0);
    let world = World::start(&[])?;
    // At info: the bench waits for the gate's trim (gate/src/trim.rs).
    let gate = world.gate_with_env(
        &bin("telos-gate"),
        &["--web-listen", "127.0.0.1:0"],
        &[("RUST_LOG", "info")],
    )?;
    let web = gate
        .printed("web client on http://")
        .map(|s| s.trim_end_matches('/').to_string())
        .ok_or_else(|| anyhow::anyhow!("the gate printed no web address"))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let names: Vec<String> = (0..players.max(5)).map(|i| name("Web", i)).collect();
    rt.block_on(create_and_quit(&gate.addr, &names, PASSWORD, CLIENTS))?;

    println!("web: one keyed gate, telnet and WebSocket players side by side");
    let rss = || procfs::status(gate.pid()).map(|s| s.rss_mib());
    let base = rss()?;
    let telnet = rt.block_on(async {
        let bots = common::log_in_all(&gate.addr, &names[..players], PASSWORD, CLIENTS).await?;
        eprintln!("web bench: {} telnet players idle", bots.len());
        tokio::time::sleep(Duration::from_millis(500)).await;
        let full = rss()?;
        drop(bots);
        // Closed, and the gate's trim of the freed memory done (a crowd
        // of at least TRIM_MIN_FALL; a second trim may follow the first
        // by its three 1 s checks): the web players start from a trimmed
        // heap, not from the telnet players' freed memory.
        common::wait_closed(&gate).await?;
        if players >= telos_gate::trim::TRIM_MIN_FALL {
            gate.wait_log("gave freed memory back", TRIM_WITHIN).await?;
        }
        tokio::time::sleep(Duration::from_secs(4)).await;
        anyhow::Ok(full)
    })?;
    let between = rss()?;
    let webbed = rt.block_on(async {
        let pages = many(&names[..players], |n| {
            let web = web.clone();
            async move {
                let mut p = Page::login(&web, &n).await?;
                p.round_trip("where", "where: zone=").await?;
                anyhow::Ok(p)
            }
        })
        .await?;
        eprintln!("web bench: {} web players idle", pages.len());
        tokio::time::sleep(Duration::from_millis(500)).await;
        let full = rss()?;
        drop(pages);
        anyhow::Ok(full)
    })?;
    let per = |full: f64, from: f64| (full - from) * 1024.0 / players as f64;
    println!();
    println!("idle players at the gate ({players} each, RSS, MiB; per player, KiB)");
    println!(
        "{:<10} {:>10} {:>12} {:>12}",
        "kind", "before", "all idle", "per player"
    );
    println!(
        "{:<10} {:>10.1} {:>12.1} {:>12.1}",
        "telnet",
        base,
        telnet,
        per(telnet, base)
    );
    println!(
        "{:<10} {:>10.1} {:>12.1} {:>12.1}",
        "web",
        between,
        webbed,
        per(webbed, between)
    );
    println!(
        "web/telnet per idle player: {:.2}x",
        per(webbed, between) / per(telnet, base)
    );

    println!();
    println!("`where` round trips, one in flight per player, {secs} s per side");
    println!(
        "{:<8} {:<7} {:>10} {:>10} {:>10} {:>10}",
        "players", "kind", "lines/s", "p50 us", "p99 us", "vs telnet"
    );
    for n in CASES {
        let names = &names[..n];
        let t = rt.block_on(measure(names, secs, |name| {
            let addr = gate.addr.clone();
            async move { Client::telnet(&addr, &name).await }
        }))?;
        let w = rt.block_on(measure(names, secs, |name| {
            let web = web.clone();
            async move { Client::web(&web, &name).await }
        }))?;
        for (kind, r) in [("telnet", &t), ("web", &w)] {
            println!(
                "{n:<8} {kind:<7} {:>10.0} {:>10.0} {:>10.0} {:>9.2}x",
                r.rate,
                r.p50,
                r.p99,
                r.rate / t.rate
            );
        }
    }
    rt.shutdown_timeout(Duration::from_secs(2));
    Ok(())
}

/// `f` for every name, [`CLIENTS`] at a time.
async fn many<T, F, Fut>(names: &[String], f: F) -> anyhow::Result<Vec<T>>
where
    T: Send + 'static,
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<T>> + Send + 'static,
{
    common::many(names, CLIENTS, f).await
}

/// A logged-in page on `gmcp.mudstandards.org`.
struct Page {
    ws: WebSocketStream<TcpStream>,
}

impl Page {
    async fn login(web: &str, name: &str) -> anyhow::Result<Self> {
        let mut req = format!("ws://{web}/ws").into_client_request()?;
        req.headers_mut()
            .insert("Sec-WebSocket-Protocol", "gmcp.mudstandards.org".parse()?);
        let tcp = TcpStream::connect(web).await?;
        let (ws, _) = tokio_tungstenite::client_async(req, tcp).await?;
        let mut p = Self { ws };
        p.round_trip(&format!("connect {name} {PASSWORD}"), "Welcome,")
            .await?;
        Ok(p)
    }

    /// Send a line; read until game text holds `answer`.
    async fn round_trip(&mut self, line: &str, answer: &str) -> anyhow::Result<()> {
        let text = format!("{line}\n").into_bytes();
        self.ws.send(Message::Binary(text.into())).await?;
        let mut seen = String::new();
        while !seen.contains(answer) {
            match tokio::time::timeout(STEP, self.ws.next()).await? {
                Some(Ok(Message::Binary(b))) => seen.push_str(&String::from_utf8_lossy(&b)),
                Some(Ok(_)) => {}
                _ => anyhow::bail!("closed waiting for {answer:?}"),
            }
        }
        Ok(())
    }
}

enum Client {
    Telnet(Bot),
    Web(Page),
}

impl Client {
    async fn telnet(addr: &str, name: &str) -> anyhow::Result<Self> {
        Ok(Client::Telnet(Bot::connect_at(addr, name, PASSWORD).await?))
    }

    async fn web(web: &str, name: &str) -> anyhow::Result<Self> {
        Ok(Client::Web(Page::login(web, name).await?))
    }

    async fn where_(&mut self) -> anyhow::Result<()> {
        match self {
            // As the web side: the line and its answer, no sync marker
            // (`Bot::command` would send a second line per round trip).
            Client::Telnet(b) => {
                b.send("where").await?;
                b.read_until(|l| l.starts_with("where: "), STEP)
                    .await
                    .map(drop)
            }
            Client::Web(p) => p.round_trip("where", "where: zone=").await,
        }
    }
}

struct Rate {
    rate: f64,
    p50: f64,
    p99: f64,
}

/// Every player in `names` logged in by `connect`, then each keeping one
/// `where` in flight for `secs` (after a warm-up): lines/s and round trips.
async fn measure<F, Fut>(names: &[String], secs: f64, connect: F) -> anyhow::Result<Rate>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Client>> + Send + 'static,
{
    let clients = many(names, connect).await?;
    let start = Instant::now() + WARMUP;
    let end = start + Duration::from_secs_f64(secs);
    let mut tasks = Vec::new();
    for mut c in clients {
        tasks.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            loop {
                let t = Instant::now();
                if t >= end {
                    break;
                }
                c.where_().await?;
                if t >= start {
                    samples.push(t.elapsed().as_nanos() as u64);
                }
            }
            anyhow::Ok(samples)
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await??);
    }
    all.sort();
    Ok(Rate {
        rate: all.len() as f64 / secs,
        p50: percentile_us(&all, 50.0),
        p99: percentile_us(&all, 99.0),
    })
}
