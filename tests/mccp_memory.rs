//! Output is counted by what it holds in memory, MCCP2 included (issue 30,
//! the edge): a compressing client that streams `Core.Ping` and reads
//! nothing was charged each reply's compressed length (a few bytes) while
//! each held a buffer sized for far more, so it held ~2.2 MiB of the gate
//! against a 256 KiB output bound (48 such clients: 12 → 130 MiB, only 31
//! cut as slow). A queued chunk now holds no more than it is charged.
//!
//! Sixteen compressing clients stream pings and read nothing: the gate's
//! peak memory grows by less than what sixteen output bounds and sixteen
//! deflate states (~0.2 MiB each) hold (measured: +1.5 MiB; +18.1 MiB
//! before).

mod support;

use std::time::Duration;

use support::gate_world::GateWorld;
use telos_testkit::mudclient::MudClient;
use telos_testkit::procfs::status;
use tokio::time::Instant;

const CLIENTS: usize = 16;
const FLOOD: Duration = Duration::from_secs(4);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compressing_clients_that_never_read_hold_no_more_than_their_bound() -> anyhow::Result<()> {
    let gw = GateWorld::start(&[])?;
    let pid = gw.gate.pid();
    let mut clients = Vec::new();
    for i in 0..CLIENTS {
        let mut c = MudClient::connect(&gw.gate.addr, &["Core"], true).await?;
        c.line(&format!(
            "create Pinger{} correct horse",
            char::from(b'a' + i as u8)
        ))
        .await?;
        c.expect("Welcome").await?;
        clients.push(c);
    }
    let before = status(pid)?;
    let ping: Vec<u8> = {
        let mut one = vec![255, 250, 201];
        one.extend_from_slice(b"Core.Ping");
        one.extend_from_slice(&[255, 240]);
        one.repeat(1000)
    };
    let until = Instant::now() + FLOOD;
    let mut floods = tokio::task::JoinSet::new();
    for mut c in clients {
        let ping = ping.clone();
        floods.spawn(async move {
            while Instant::now() < until {
                match tokio::time::timeout_at(until, c.send(&ping)).await {
                    Ok(Ok(())) => {}
                    _ => break,
                }
            }
            c
        });
    }
    let mut kept = Vec::new();
    while let Some(c) = floods.join_next().await {
        kept.push(c?);
    }
    let after = status(pid)?;
    let grew = after.peak_rss_mib() - before.rss_mib();
    eprintln!(
        "gate RSS {:.1} MiB before, peak {:.1} MiB after: +{grew:.1} MiB for {CLIENTS} clients",
        before.rss_mib(),
        after.peak_rss_mib()
    );
    // 16 × (256 KiB bound + ~0.2 MiB deflate state) ≈ 7.5 MiB at most;
    // before, 18.1 MiB (1.5 MiB since).
    assert!(
        grew < 8.0,
        "{CLIENTS} compressing clients that read nothing grew the gate by {grew:.1} MiB"
    );
    drop(kept);
    Ok(())
}
