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
