//! No credential at any log level (issue 30, the edge): at `RUST_LOG=trace`
//! the WebSocket library traced every frame and message it read, and with
//! them a web player's password and resume token. The gate now keeps that
//! library at INFO whatever `RUST_LOG` asks; its own trace stays.
//!
//! A web player creates a character through a gate at `RUST_LOG=trace`,
//! is given a resume token, and plays; the gate's log holds neither the
//! password nor the token, yet is a trace log (it holds TRACE lines).

mod support;

use support::gate_world::{GateWorld, Page, web_addr};
use telos_testkit::process::{Proc, keyed_gate_command};
use tokio::net::TcpStream;

const PASSWORD: &str = "tr4ce-me-not horse";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_log_holds_no_web_players_password_or_resume_token() -> anyhow::Result<()> {
    let gw = GateWorld::start(&[])?;
    let mut cmd = keyed_gate_command(
        "127.0.0.1:0",
        &gw.redis.url,
        gw.keys.path(),
        &["--web-listen", "127.0.0.1:0"],
    );
    cmd.env("RUST_LOG", "trace");
    let gate = Proc::spawn("gate-trace", cmd)?;
    let addr = web_addr(&gate, "http")?;

    let mut page = Page::open(TcpStream::connect(&addr).await?, None).await?;
    page.expect("create <name> <password>").await?;
    page.line(&format!("create Tracy {PASSWORD}")).await?;
    page.expect("Welcome, Tracy").await?;
    page.line("say hello").await?;
    page.expect("hello").await?;
    let token = page
        .session
        .as_ref()
        .and_then(|s| s["token"].as_str())
        .map(str::to_string)
        .ok_or_else(|| anyhow::anyhow!("no Telos.Session token: {:?}", page.session))?;

    let log = gate.log_text();
    assert!(
        log.contains(" TRACE "),
        "not a trace log:\n{}",
        &log[..log.len().min(2000)]
    );
    for (what, secret) in [("password", PASSWORD), ("resume token", token.as_str())] {
        let line = log.lines().find(|l| l.contains(secret));
        assert!(line.is_none(), "the {what} is in the gate's log: {line:?}");
    }
    Ok(())
}
