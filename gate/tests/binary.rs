//! The `telos-gate` binary: readiness line, settings errors.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

fn gate() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_telos-gate"));
    for var in [
        "TELOS_GATE_LISTEN",
        "TELOS_REDIS_URL",
        "TELOS_METRICS_LISTEN",
        "TELOS_GATE_CONFIG",
    ] {
        c.env_remove(var);
    }
    c
}

#[test]
fn prints_its_address_and_serves_the_banner() {
    let mut child = gate()
        .args([
            "--listen",
            "127.0.0.1:0",
            "--redis-url",
            "redis://127.0.0.1:1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("telos-gate listening on ")
        .expect(&line)
        .to_string();
    let mut sock = std::net::TcpStream::connect(&addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // The banner may arrive after the telnet negotiation, in several reads.
    let mut banner = Vec::new();
    let mut buf = [0u8; 512];
    while !String::from_utf8_lossy(&banner).contains("Telos") {
        let n = sock.read(&mut buf).unwrap();
        assert!(n > 0, "closed before the banner: {banner:?}");
        banner.extend_from_slice(&buf[..n]);
    }
    // No Redis behind it: a login is told the world is unavailable, and the
    // gate stays up.
    sock.write_all(b"connect Alice password1\n").unwrap();
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("not reachable") {
        let n = sock.read(&mut buf).unwrap();
        assert!(n > 0);
        seen.extend_from_slice(&buf[..n]);
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

fn fails_with(args: &[&str], env: &[(&str, &str)], needle: &str) {
    let mut c = gate();
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains(needle), "{err}");
}

#[test]
fn bad_settings_exit_non_zero_with_one_line_naming_them() {
    fails_with(&["--listen", "nowhere"], &[], "listen");
    fails_with(
        &[],
        &[("TELOS_GATE_LISTEN", "1.2.3.4")],
        "TELOS_GATE_LISTEN",
    );
    fails_with(&["--redis-url", "mysql://x"], &[], "redis_url");
    fails_with(
        &["--config", "/nonexistent/gate.toml"],
        &[],
        "/nonexistent/gate.toml",
    );
    let dir = std::env::temp_dir().join(format!("telos-gate-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("gate.toml");
    std::fs::write(&file, "listen = \"127.0.0.1:0\"\nbogus_key = 1\n").unwrap();
    fails_with(&["--config", file.to_str().unwrap()], &[], "bogus_key");
    std::fs::write(&file, "idle_timeout_secs = 10\nidle_warning_secs = 20\n").unwrap();
    fails_with(
        &["--config", file.to_str().unwrap()],
        &[],
        "idle_warning_secs",
    );
    let _ = std::fs::remove_dir_all(&dir);
}
