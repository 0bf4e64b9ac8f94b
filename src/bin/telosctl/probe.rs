//! `telosctl probe URL`: one GET of a health endpoint (`/livez`, `/readyz`
//! on a world's or the gate's `--metrics-listen`), for probes where the
//! image has no HTTP client (the Compose healthchecks). Exit 0 on a 2xx
//! answer, 1 with the status and body otherwise.

use std::time::Duration;

use anyhow::{Context, bail, ensure};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::{Request, Uri, header};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// GET `url` within `timeout`; its status line and body when it is 2xx.
pub async fn probe(url: &str, timeout: Duration) -> anyhow::Result<String> {
    tokio::time::timeout(timeout, get(url))
        .await
        .with_context(|| format!("{url} did not answer within {timeout:?}"))?
}

async fn get(url: &str) -> anyhow::Result<String> {
    let uri: Uri = url.parse().with_context(|| format!("not a URL: {url}"))?;
    ensure!(
        uri.scheme_str() == Some("http"),
        "{url}: only http:// endpoints are probed (the health endpoints are plain HTTP)"
    );
    let authority = uri.authority().context("a URL with a host")?.clone();
    let port = authority.port_u16().unwrap_or(80);
    let stream = TcpStream::connect((authority.host(), port))
        .await
        .with_context(|| format!("nothing answers at {authority}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let request = Request::get(path)
        .header(header::HOST, authority.as_str())
        .body(Empty::<Bytes>::new())?;
    let response = sender.send_request(request).await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    let body = String::from_utf8_lossy(&body).trim().to_string();
    if !status.is_success() {
        bail!("{url} answered {status}: {body}");
    }
    Ok(format!("{status}: {body}"))
}
