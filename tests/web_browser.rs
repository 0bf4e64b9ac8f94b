//! The web client in a real browser: a real `redis-server`, two keyed
//! `telos-world` shards splitting the starter zones and a real `telos-gate`
//! with `--web-listen`; `tests/browser/play.mjs` drives Debian's chromium
//! through playwright-core (installed here with `npm ci`; chromium, node
//! and npm by `scripts/ensure-tools`). On a 390×844 page it creates a
//! character, walks across the shard boundary by clicking exits (the room
//! and vitals panels change), goes offline mid-typing and comes back, plays
//! through a SIGKILL of its shard (restarted) and a drain, and checks that
//! every journal line is there exactly once, in order; then the operator
//! page (`--operator-listen`) shows the zones the drain moved. Screenshots:
//! `target/browser-screenshots/` (`operator.png` the operator page's).

mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use support::browser::{npm_ci, web_url};
use telos_testkit::RedisServer;
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{blocking, repo_root, start_keyed_gate, start_keyed_world};
use telos_testkit::world::{path_to_zone, start_room, starter_zones, zone_of};

const NO_FLAGS: &[&str] = &[];

#[test]
fn a_browser_plays_through_a_walk_an_offline_spell_a_kill_and_a_drain() -> anyhow::Result<()> {
    let browser_dir = repo_root().join("tests/browser");
    npm_ci()?;

    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let zones = starter_zones();
    let (first, second) = zones.split_at(zones.len().div_ceil(2));
    assert!(first.contains(&zone_of(&start_room()).to_string()));
    let _a = start_keyed_world("shard-a", &redis.url, first, keys.path(), None, NO_FLAGS)?;
    let mut b = start_keyed_world("shard-b", &redis.url, second, keys.path(), None, NO_FLAGS)?;
    let flags = [
        "--web-listen",
        "127.0.0.1:0",
        "--operator-listen",
        "127.0.0.1:0",
    ];
    let gate = start_keyed_gate(&redis.url, keys.path(), &flags)?;
    let url = web_url(&gate)?;
    let operator = gate
        .printed("operator page on ")
        .context("the gate printed no operator page")?;
    let path = second
        .iter()
        .map(|z| path_to_zone(&start_room(), z))
        .min_by_key(|p| p.len())
        .expect("shard-b has zones");

    let shots = repo_root().join("target/browser-screenshots");
    let mut node = Command::new("node")
        .arg("play.mjs")
        .arg(&url)
        .arg("Webber")
        .arg(serde_json::to_string(&path)?)
        .arg(&shots)
        .arg(&operator)
        .current_dir(&browser_dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("node")?;
    let mut answers = node.stdin.take().expect("piped");
    let lines = BufReader::new(node.stdout.take().expect("piped")).lines();
    let mut passed = false;
    for line in lines {
        let line = line?;
        eprintln!("play.mjs: {line}");
        match line.as_str() {
            "ask: kill" => {
                let addr = b.addr.clone();
                b.kill();
                b = start_keyed_world(
                    "shard-b",
                    &redis.url,
                    second,
                    keys.path(),
                    Some(&addr),
                    NO_FLAGS,
                )?;
                writeln!(answers, "ok")?;
            }
            "ask: drain" => {
                blocking(|| b.stop_with(libc::SIGTERM, Duration::from_secs(60)))?;
                writeln!(answers, "ok")?;
            }
            "pass" => passed = true,
            _ => {}
        }
    }
    let status = node.wait()?;
    if !passed || !status.success() {
        bail!(
            "the browser run failed ({status}); gate log: {}",
            gate.log.display()
        );
    }
    Ok(())
}
