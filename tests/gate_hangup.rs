//! Lines sent just before a client hangs up (issue 18, defect 3): a line
//! the gate has read is an accepted line, applied exactly once even when
//! the client is already gone, and the session then ends as `quit` ends it
//! (saved, the resume credential revoked).
//!
//! A raw socket logs in, sends 1–5 `journal` lines in one write and at once
//! half-closes (`shutdown(Write)`) or closes, twenty times over; then a new
//! login finds every line in the journal exactly once, in order.

use std::time::Duration;

use telos_testkit::bot::Bot;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

mod support;
use support::gate_world::GateWorld;

const NAME: &str = "Scribe";
const PASSWORD: &str = "correct horse";
const TRIES: usize = 20;

/// Bounds a broken build: a hung-up session ends within a save's round
/// trip, and a login within a password hash.
const SETTLE: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(50);

/// How a try ends its connection.
#[derive(Debug, Clone, Copy)]
enum HangUp {
    /// `shutdown(Write)`, then read until the gate closes: the client sees
    /// every answer and the goodbye.
    HalfClose,
    /// Close at once with the room and the answers unread (the kernel sends
    /// a reset).
    Close,
}

/// The gate and its shard (`support::gate_world`), and what this test
/// reads of Redis.
struct Cluster(GateWorld);

impl Cluster {
    fn start() -> anyhow::Result<Cluster> {
        Ok(Cluster(GateWorld::start(&[])?))
    }

    /// The resume credentials Redis holds for the character: one per live
    /// session, none once every session ended as a quit.
    async fn credentials(&self) -> anyhow::Result<Vec<String>> {
        let mut conn = self
            .0
            .redis
            .client()?
            .get_multiplexed_async_connection()
            .await?;
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("telos:cred:{}:*", NAME.to_ascii_lowercase()))
            .query_async(&mut conn)
            .await?;
        Ok(keys)
    }

    /// Waits until no session of the character is live (its credential
    /// revoked by the quit the hang-up ends as).
    async fn wait_no_session(&self, what: &str) -> anyhow::Result<()> {
        let deadline = Instant::now() + SETTLE;
        loop {
            let creds = self.credentials().await?;
            if creds.is_empty() {
                return Ok(());
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "{what}: the session was not ended as a quit (credential {creds:?} still \
                 there)\ngate log:\n{}",
                self.0.gate.log_text()
            );
            tokio::time::sleep(POLL).await;
        }
    }
}

/// Reads from `stream` until `needle` has been seen, bounded.
async fn read_until(
    stream: &mut TcpStream,
    needle: &str,
    seen: &mut Vec<u8>,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + SETTLE;
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(seen).contains(needle) {
        let n = tokio::time::timeout_at(deadline, stream.read(&mut buf))
            .await
            .map_err(|_| {
                anyhow::anyhow!("no {needle:?} in {:?}", String::from_utf8_lossy(seen))
            })??;
        anyhow::ensure!(
            n > 0,
            "closed before {needle:?}: {:?}",
            String::from_utf8_lossy(seen)
        );
        seen.extend_from_slice(&buf[..n]);
    }
    Ok(())
}

/// One try: log in on a raw socket, send `lines` as `journal` entries in
/// one write, and hang up at once.
async fn send_and_hang_up(addr: &str, lines: &[String], how: HangUp) -> anyhow::Result<()> {
    let mut stream = TcpStream::connect(addr).await?;
    let mut seen = Vec::new();
    stream
        .write_all(format!("connect {NAME} {PASSWORD}\r\n").as_bytes())
        .await?;
    read_until(&mut stream, "Welcome", &mut seen).await?;
    let burst: String = lines.iter().map(|l| format!("journal {l}\r\n")).collect();
    stream.write_all(burst.as_bytes()).await?;
    match how {
        HangUp::Close => drop(stream),
        HangUp::HalfClose => {
            stream.shutdown().await?;
            // The client still reads: it is told every line was noted,
            // then goodbye, and the gate closes.
            let mut rest = Vec::new();
            tokio::time::timeout(SETTLE, stream.read_to_end(&mut rest)).await??;
            let text = String::from_utf8_lossy(&rest);
            let noted = text.matches("Noted.").count();
            anyhow::ensure!(
                noted == lines.len() && text.contains("Goodbye."),
                "{} lines, {noted} noted, after the half-close: {text:?}",
                lines.len()
            );
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_sent_just_before_a_hang_up_are_applied_exactly_once() -> anyhow::Result<()> {
    let c = Cluster::start()?;
    let addr = c.0.gate.addr.clone();
    Bot::create_at(&addr, NAME, PASSWORD).await?.quit().await?;
    c.wait_no_session("after create").await?;

    let mut expected = Vec::new();
    for t in 0..TRIES {
        let lines: Vec<String> = (0..1 + t % 5)
            .map(|i| format!("try {t} line {i}"))
            .collect();
        let how = if t % 2 == 0 {
            HangUp::HalfClose
        } else {
            HangUp::Close
        };
        send_and_hang_up(&addr, &lines, how).await?;
        c.wait_no_session(&format!("try {t} ({how:?})")).await?;
        expected.extend(lines);
    }

    let mut bot = Bot::connect_at(&addr, NAME, PASSWORD).await?;
    assert_eq!(bot.journal_list().await?, expected);
    bot.quit().await?;
    Ok(())
}
