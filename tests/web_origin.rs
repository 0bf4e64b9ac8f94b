//! `/ws` checks the page's `Origin` (issue 30, the edge): any other web
//! page a player visits could open sockets from the player's browser and
//! spend their address's places and their login and creation budgets. A
//! browser's request from another origin is refused (403); the web
//! client's own origin, an origin `--web-origins` lists, and a request
//! with no `Origin` (a MUD client, a script: not a browser) open.

mod support;

use support::gate_world::{GateWorld, web_addr};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Error;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const LISTED: &str = "https://play.example.org";

/// Open `/ws` with `origin` (or none): the HTTP status of the answer.
async fn open_with(addr: &str, origin: Option<&str>) -> anyhow::Result<u16> {
    let mut req = format!("ws://{addr}/ws").into_client_request()?;
    req.headers_mut()
        .insert("Sec-WebSocket-Protocol", "gmcp.mudstandards.org".parse()?);
    if let Some(origin) = origin {
        req.headers_mut().insert("Origin", origin.parse()?);
    }
    let stream = TcpStream::connect(addr).await?;
    match tokio_tungstenite::client_async(req, stream).await {
        Ok((_, response)) => Ok(response.status().as_u16()),
        Err(Error::Http(response)) => Ok(response.status().as_u16()),
        Err(e) => Err(e.into()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_pages_origin_is_refused_and_its_own_opens() -> anyhow::Result<()> {
    let gw = GateWorld::start(&["--web-listen", "127.0.0.1:0", "--web-origins", LISTED])?;
    let addr = web_addr(&gw.gate, "http")?;
    let own = format!("http://{addr}");
    for (origin, want) in [
        (Some("https://evil.example"), 403),
        (Some("http://127.0.0.1:1"), 403),
        (Some("null"), 403),
        (Some(own.as_str()), 101),
        (Some(LISTED), 101),
        (Some("https://PLAY.example.org/"), 101),
        (None, 101),
    ] {
        let got = open_with(&addr, origin).await?;
        assert_eq!(got, want, "Origin {origin:?}");
    }
    Ok(())
}
