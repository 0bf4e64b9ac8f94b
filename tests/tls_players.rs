//! TLS for players end to end: a real `telos-gate` with `--tls-listen`
//! (a self-signed certificate, as `scripts/cluster` makes) in front of a
//! real keyed shard. A GMCP client with MCCP2 plays over TLS as over plain
//! telnet; `openssl s_client` logs in through it; a renewed certificate is
//! taken on SIGHUP without dropping the player on the old one, and a
//! broken renewal is refused while the certificate in use stays.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, bail};
use telos_testkit::RedisServer;
use telos_testkit::keys::TempKeys;
use telos_testkit::mudclient::MudClient;
use telos_testkit::player_tls::{SelfSigned, peer_certificate};
use telos_testkit::process::{blocking, start_keyed_gate, start_keyed_world};
use telos_testkit::world::starter_zones;

const NO_FLAGS: &[&str] = &[];
/// Bounds a hang of a reload's log line (not a performance claim).
const LOG_WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn players_play_over_tls_and_sighup_takes_a_renewed_certificate() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let dir = tempfile::tempdir()?;
    let first = SelfSigned::write(dir.path(), "players")?;
    let zones = starter_zones();
    let _world = start_keyed_world("shard-a", &redis.url, &zones, keys.path(), None, NO_FLAGS)?;
    let flags = first.gate_flags("127.0.0.1:0");
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let gate = start_keyed_gate(&redis.url, keys.path(), &flags)?;
    let tls_addr = gate
        .printed("TLS for players at ")
        .context("the gate printed no TLS address")?;
    assert_ne!(tls_addr, gate.addr);

    // The same protocol as plain telnet: negotiation, GMCP, MCCP2.
    let mut c = MudClient::connect_tls(&tls_addr, &first, &["Room", "Char"], true).await?;
    c.expect("create <name> <password>").await?;
    c.line("create Tilly correct horse").await?;
    c.expect("Welcome, Tilly").await?;
    c.until_gmcp("Room.Info over TLS", |all| {
        all.iter().any(|(p, _)| p == "Room.Info")
    })
    .await?;
    assert!(c.compressed, "MCCP2 inside TLS");
    assert_eq!(peer_certificate(&tls_addr).await?, first.der);

    // A renewal replaces the files; SIGHUP makes new handshakes show it.
    let renewed = SelfSigned::write(dir.path(), "players")?;
    assert_ne!(renewed.der, first.der);
    gate.signal(libc::SIGHUP);
    gate.wait_log("players' TLS certificate reloaded", LOG_WAIT)
        .await?;
    assert_eq!(peer_certificate(&tls_addr).await?, renewed.der);
    // The player on the old certificate's session plays on.
    c.line("where").await?;
    c.expect("where: zone=").await?;

    // A stock TLS client trusting the renewed certificate logs in.
    let ossie = blocking(|| s_client(&tls_addr, &renewed, "create Ossie correct horse"))?;
    assert!(ossie.contains("Welcome, Ossie"), "{ossie}");

    // A broken renewal (a half-copied file) is refused; the certificate
    // in use stays and so does the gate.
    std::fs::write(&renewed.cert, "-----BEGIN CERTIFICATE-----\ntruncated")?;
    gate.signal(libc::SIGHUP);
    gate.wait_log("certificate not reloaded", LOG_WAIT).await?;
    assert_eq!(peer_certificate(&tls_addr).await?, renewed.der);
    c.line("where").await?;
    c.expect("where: zone=").await?;

    // A client that does not trust the certificate gets no session.
    let untrusted = SelfSigned::write(dir.path(), "other")?;
    assert!(untrusted.connect(&tls_addr).await.is_err());
    Ok(())
}

/// Log in through `openssl s_client` (verifying the gate's certificate
/// against `cert`) with `line`; what it printed up to the welcome line.
fn s_client(addr: &str, cert: &SelfSigned, line: &str) -> anyhow::Result<String> {
    let mut child = Command::new("openssl")
        .args(["s_client", "-quiet", "-crlf", "-verify_return_error"])
        .args(["-connect", addr, "-servername", "localhost", "-CAfile"])
        .arg(&cert.cert)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("openssl (scripts/ensure-tools openssl)")?;
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        // The gate's telnet negotiation is bytes, not UTF-8: read bytes.
        let mut r = BufReader::new(stdout);
        let mut buf = Vec::new();
        while r.read_until(b'\n', &mut buf).is_ok_and(|n| n > 0) {
            if tx.send(String::from_utf8_lossy(&buf).into_owned()).is_err() {
                break;
            }
            buf.clear();
        }
    });
    let mut stdin = child.stdin.take().expect("piped");
    writeln!(stdin, "{line}")?;
    let mut seen = String::new();
    let outcome = loop {
        match rx.recv_timeout(LOG_WAIT) {
            Ok(l) => {
                seen.push_str(&l);
                if l.contains("Welcome,") || l.contains("Login failed") {
                    break Ok(seen);
                }
            }
            Err(_) => break Err(seen),
        }
    };
    let _ = writeln!(stdin, "quit");
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    match outcome {
        Ok(seen) => Ok(seen),
        Err(seen) => bail!("no login answer through openssl s_client; it printed:\n{seen}"),
    }
}
