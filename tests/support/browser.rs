//! The web client's and the operator page's tests: the gate's web address,
//! the browser driver's packages (`tests/browser`, `npm ci`), and one
//! plain HTTP `GET`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use anyhow::Context;

use telos_testkit::process::{Proc, repo_root};

/// Bounds one HTTP exchange (not a performance claim).
const HTTP_TIMEOUT: Duration = Duration::from_secs(30);

/// The web client's address (`http://host:port/`), from the gate's log.
pub fn web_url(gate: &Proc) -> anyhow::Result<String> {
    let log = std::fs::read_to_string(&gate.log)?;
    let line = log
        .lines()
        .find(|l| l.contains("web client listening"))
        .context("no web listener in the gate's log")?;
    let addr = line
        .split("addr=")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .context("no address")?;
    Ok(format!("http://{addr}/"))
}

/// `npm ci` in `tests/browser` (playwright-core; chromium, node and npm
/// come from `scripts/ensure-tools`).
pub fn npm_ci() -> anyhow::Result<()> {
    let ci = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(repo_root().join("tests/browser"))
        .status()
        .context("npm (scripts/ensure-tools node npm chromium)")?;
    anyhow::ensure!(ci.success(), "npm ci in tests/browser");
    Ok(())
}

/// `GET path` on `addr` (`host:port`): the response's head (status line
/// and headers, as sent) and body.
pub fn http_get(addr: &str, path: &str) -> anyhow::Result<(String, String)> {
    let mut tcp = TcpStream::connect(addr)?;
    tcp.set_read_timeout(Some(HTTP_TIMEOUT))?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    tcp.write_all(req.as_bytes())?;
    let mut raw = Vec::new();
    tcp.read_to_end(&mut raw)?;
    let raw = String::from_utf8(raw)?;
    let (head, body) = raw.split_once("\r\n\r\n").context("no HTTP head")?;
    Ok((head.to_string(), body.to_string()))
}
