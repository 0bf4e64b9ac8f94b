//! The web client across a page reload, in a real browser: a real
//! `redis-server`, two keyed `telos-world` shards and a real `telos-gate`
//! with `--web-listen`; `tests/browser/reload.mjs` drives chromium. A reload
//! mid-session resumes it (the token is in `sessionStorage`) with nothing
//! lost — the pane, a line typed just before the reload, the journal; a new
//! tab logs in afresh; the who panel fills and follows logins from the
//! gate's `Telos.Who`, with no Refresh. And `/favicon.ico` is an icon.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use support::browser::{http_get, npm_ci, web_url};
use telos_testkit::process::repo_root;

mod support;
use support::two_shards::TwoShards;

#[test]
fn the_favicon_is_an_svg_icon() -> anyhow::Result<()> {
    let cluster = TwoShards::start(&[], &["--web-listen", "127.0.0.1:0"])?;
    let url = web_url(&cluster.gate)?;
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    let (head, body) = http_get(addr, "/favicon.ico")?;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: image/svg+xml"),
        "{head}"
    );
    assert!(body.starts_with("<svg"), "{body}");
    let (_, page) = http_get(addr, "/")?;
    assert!(page.contains("rel=\"icon\""), "{page}");
    Ok(())
}

#[test]
fn a_reloaded_page_resumes_its_session_and_the_who_panel_is_live() -> anyhow::Result<()> {
    npm_ci()?;
    let cluster = TwoShards::start(&[], &["--web-listen", "127.0.0.1:0"])?;
    let url = web_url(&cluster.gate)?;
    let shots = repo_root().join("target/browser-screenshots");
    let mut node = Command::new("node")
        .arg("reload.mjs")
        .arg(&url)
        .arg(&shots)
        .current_dir(repo_root().join("tests/browser"))
        .stdout(Stdio::piped())
        .spawn()
        .context("node")?;
    let mut passed = false;
    for line in BufReader::new(node.stdout.take().expect("piped")).lines() {
        let line = line?;
        eprintln!("reload.mjs: {line}");
        passed |= line == "pass";
    }
    let status = node.wait()?;
    if !passed || !status.success() {
        bail!(
            "the browser run failed ({status}); gate log: {}",
            cluster.gate.log.display()
        );
    }
    Ok(())
}
