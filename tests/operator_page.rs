//! The operator page end to end: a real `redis-server`, two keyed
//! `telos-world` shards (`shard-a` the city, `shard-b` every other zone) and
//! a real `telos-gate` with `--operator-listen`. The page shows the
//! cluster's real shards, zones and owners, and a `telosctl transfer` that
//! just happened (the owner changed, with how long it was pending).

use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::Value;
use telos_testkit::world::starter_zones;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

mod support;
use support::two_shards::{TwoShards, rest_zones};

/// Bounds a wait for the page to show a change (not a performance claim).
const WAIT: Duration = Duration::from_secs(30);

/// `GET path` on `addr`: the status line, headers and body.
async fn get(addr: &str, path: &str) -> anyhow::Result<(String, String)> {
    let mut tcp = TcpStream::connect(addr).await?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    tcp.write_all(req.as_bytes()).await?;
    let mut raw = Vec::new();
    tokio::time::timeout(WAIT, tcp.read_to_end(&mut raw)).await??;
    let raw = String::from_utf8(raw)?;
    let (head, body) = raw.split_once("\r\n\r\n").context("no HTTP head")?;
    Ok((head.to_string(), body.to_string()))
}

async fn status(addr: &str) -> anyhow::Result<Value> {
    let (head, body) = get(addr, "/status.json").await?;
    if !head.starts_with("HTTP/1.1 200") {
        bail!("{head}");
    }
    Ok(serde_json::from_str(&body)?)
}

/// Read `/status.json` until `pred` holds.
async fn until(addr: &str, what: &str, pred: impl Fn(&Value) -> bool) -> anyhow::Result<Value> {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let s = status(addr).await?;
        if pred(&s) {
            return Ok(s);
        }
        if std::time::Instant::now() > deadline {
            bail!("the page never showed {what}: {s}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn owner(s: &Value, zone: &str) -> Option<String> {
    s["zones"].as_array()?.iter().find(|z| z["id"] == zone)?["owner"]
        .as_str()
        .map(str::to_string)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_the_clusters_owners_and_a_transfer_that_just_happened() -> anyhow::Result<()>
{
    let cluster = TwoShards::start(&[], &["--operator-listen", "127.0.0.1:0"])?;
    let (gate, redis) = (&cluster.gate, &cluster.redis);
    let others = rest_zones();
    let url = gate
        .printed("operator page on ")
        .context("the gate printed no operator page")?;
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();

    // The page itself: HTML, locked down.
    let (head, page) = get(&addr, "/").await?;
    assert!(head.contains("content-security-policy"), "{head}");
    assert!(page.contains("<table id=\"zones\""), "{page}");

    // The real owners, as the shards registered them.
    let s = until(&addr, "both shards and every zone owned", |s| {
        let shards = s["shards"].as_array().map_or(0, Vec::len);
        shards == 2 && starter_zones().iter().all(|z| owner(s, z).is_some())
    })
    .await?;
    assert_eq!(owner(&s, "city").as_deref(), Some("shard-a"), "{s}");
    for z in &others {
        assert_eq!(owner(&s, z).as_deref(), Some("shard-b"), "{z}: {s}");
    }
    let states: Vec<&str> = s["shards"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["state"].as_str())
        .collect();
    assert_eq!(states.len(), 2, "{s}");

    // A transfer: the page shows the new owner and the event.
    let zone = others.first().context("a zone on shard-b")?.clone();
    let out = telos_testkit::cli::telosctl(&redis.url, &["transfer", &zone, "--to", "shard-a"])?;
    assert!(out.success(), "{}{}", out.stdout, out.stderr);
    let s = until(&addr, "the transfer's event", |s| {
        s["events"].as_array().is_some_and(|e| {
            e.iter()
                .any(|e| e["kind"] == "owner_changed" && e["zone"] == zone.as_str())
        })
    })
    .await?;
    assert_eq!(owner(&s, &zone).as_deref(), Some("shard-a"), "{s}");
    let event = s["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "owner_changed" && e["zone"] == zone.as_str())
        .unwrap();
    assert_eq!(event["from"], "shard-b", "{event}");
    assert_eq!(event["to"], "shard-a", "{event}");
    assert!(
        event["text"]
            .as_str()
            .unwrap()
            .contains(&format!("zone {zone}: shard-b -> shard-a")),
        "{event}"
    );
    Ok(())
}
