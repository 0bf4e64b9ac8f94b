//! Scrape a shard's Prometheus `/metrics` with one plain HTTP/1.1 GET over
//! a tokio `TcpStream` (no HTTP client crate), and read samples from it.

use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A scrape answers in milliseconds; this turns a hang into a message.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);

/// The exposition text served at `http://{addr}/metrics`.
pub async fn scrape(addr: &str) -> anyhow::Result<String> {
    let fetch = async {
        let mut s = TcpStream::connect(addr)
            .await
            .with_context(|| format!("connecting to {addr}"))?;
        let request = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        s.write_all(request.as_bytes()).await?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).await?;
        anyhow::Ok(raw)
    };
    let raw = tokio::time::timeout(SCRAPE_TIMEOUT, fetch)
        .await
        .with_context(|| format!("scraping {addr}"))??;
    let text = String::from_utf8(raw).context("metrics are not UTF-8")?;
    let (head, body) = text
        .split_once("\r\n\r\n")
        .context("no end of HTTP headers")?;
    let status = head.lines().next().unwrap_or_default();
    if !status.contains(" 200") {
        bail!("GET /metrics: {status}");
    }
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    if chunked {
        dechunk(body)
    } else {
        Ok(body.to_string())
    }
}

/// Decode an HTTP/1.1 chunked body.
fn dechunk(mut body: &str) -> anyhow::Result<String> {
    let mut out = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n").context("truncated chunk size")?;
        let size = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16)
            .with_context(|| format!("bad chunk size {size:?}"))?;
        if size == 0 {
            return Ok(out);
        }
        let chunk = rest.get(..size).context("truncated chunk")?;
        out.push_str(chunk);
        body = rest.get(size + 2..).context("truncated chunk end")?;
    }
}

/// The value of one series exactly as rendered (`name` or
/// `name{label="v"}`); 0 when the series is absent (never recorded yet).
pub fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .find(|(s, _)| *s == series)
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0.0)
}

/// `GET path` on a metrics listener: the status code, or `None` when
/// nothing answers (the process is gone).
pub async fn probe(addr: &str, path: &str) -> Option<u16> {
    let fetch = async {
        let mut s = TcpStream::connect(addr).await.ok()?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        s.write_all(request.as_bytes()).await.ok()?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).await.ok()?;
        let text = String::from_utf8_lossy(&raw);
        text.split_whitespace().nth(1)?.parse().ok()
    };
    tokio::time::timeout(SCRAPE_TIMEOUT, fetch)
        .await
        .ok()
        .flatten()
}
