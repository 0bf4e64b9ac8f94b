//! `telosctl` without a reachable Redis fails at once with one line that
//! names the URL it tried and how to name another (it used to wait out the
//! 10 s first-connect deadline and print the refusal three times).

use std::time::{Duration, Instant};

use telos_testkit::redis::free_port;

#[test]
fn an_unreachable_redis_fails_fast_in_one_line_naming_the_url_and_the_flag() {
    let url = format!("redis://127.0.0.1:{}", free_port());
    let started = Instant::now();
    let out = telos_testkit::cli::telosctl(&url, &["status"]).expect("telosctl runs");
    let took = started.elapsed();
    assert!(!out.success());
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {:?}", out.stderr);
    assert!(lines[0].contains(&url), "{}", lines[0]);
    assert!(lines[0].contains("--redis-url"), "{}", lines[0]);
    assert!(lines[0].contains(".cluster/redis.url"), "{}", lines[0]);
    assert_eq!(lines[0].matches("refused").count(), 1, "{}", lines[0]);
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

/// Pointed at something that is not Redis (a web server), it says so in
/// one line instead of printing the RESP parser's complaint.
#[test]
fn a_port_that_is_not_redis_is_named_as_such_in_one_line() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("redis://{}", listener.local_addr().expect("addr"));
    let server = std::thread::spawn(move || {
        use std::io::{Read, Write};
        if let Ok((mut s, _)) = listener.accept() {
            let mut buf = [0u8; 512];
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"HTTP/1.0 400 Bad Request\r\n\r\n<html></html>");
        }
    });
    let out = telos_testkit::cli::telosctl(&url, &["status"]).expect("telosctl runs");
    assert!(!out.success());
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {:?}", out.stderr);
    assert!(lines[0].contains("is not Redis"), "{}", lines[0]);
    assert!(lines[0].contains(&url), "{}", lines[0]);
    let _ = server.join();
}

/// The world and the gate say the same at their first attempt, not only
/// when the world gives up 10 s later (and the gate, which may start
/// before Redis, said nothing at all while it waited).
#[test]
fn the_world_and_the_gate_name_the_url_at_their_first_failed_attempt() -> anyhow::Result<()> {
    let url = format!("redis://127.0.0.1:{}", free_port());
    let said = format!(
        "no Redis answers at {url} (Connection refused); name the cluster's Redis with \
         --redis-url URL or TELOS_REDIS_URL (scripts/cluster writes it to .cluster/redis.url)"
    );
    let dir = tempfile::tempdir()?;
    for program in ["telos-world", "telos-gate"] {
        let log = dir.path().join(program);
        let mut cmd = telos_testkit::cli::clean_command(program);
        cmd.env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .arg("--redis-url")
            .arg(&url)
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log)?);
        match program {
            "telos-world" => cmd.args(["--shard-id", "a", "--grpc-listen", "127.0.0.1:0"]),
            _ => cmd.args(["--listen", "127.0.0.1:0"]),
        };
        let mut child = cmd.spawn()?;
        let until = Instant::now() + Duration::from_secs(5);
        let seen = loop {
            let text = telos_testkit::process::strip_ansi(&std::fs::read_to_string(&log)?);
            if text.contains(&said) || Instant::now() > until {
                break text;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let _ = child.kill();
        let _ = child.wait();
        assert!(seen.contains(&said), "{program} within 5 s:\n{seen}");
    }
    Ok(())
}
