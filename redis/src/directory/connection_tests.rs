//! [`RedisConn`] against a real, private redis-server that is killed and
//! restarted on its port.

use std::time::Duration;

use redis::AsyncCommands;
use telos_testkit::RedisServer;

use super::*;

/// How long the tests keep Redis down: several health checks and reconnect
/// attempts long, as a real restart is.
const OUTAGE: Duration = Duration::from_secs(2);

fn script(body: &str) -> redis::Script {
    redis::Script::new(body)
}

fn shas(scripts: &[redis::Script]) -> HashSet<String> {
    scripts.iter().map(|s| s.get_hash().to_owned()).collect()
}

#[test]
fn reads_and_listed_scripts_are_idempotent_and_nothing_else() {
    let listed = script("return redis.call('GET', KEYS[1])");
    let other = script("return redis.call('INCR', KEYS[1])");
    let scripts = shas(std::slice::from_ref(&listed));
    for read in ["GET", "mget", "HGETALL", "SMEMBERS", "TIME", "PTTL"] {
        assert!(is_idempotent(&redis::cmd(read), &scripts), "{read}");
    }
    for write in [
        "SET", "INCR", "DEL", "HSET", "SADD", "PEXPIRE", "EVAL", "FLUSHALL",
    ] {
        assert!(!is_idempotent(&redis::cmd(write), &scripts), "{write}");
    }
    let mut evalsha = redis::cmd("EVALSHA");
    evalsha.arg(listed.get_hash()).arg(1).arg("k");
    assert!(is_idempotent(&evalsha, &scripts));
    let mut evalsha = redis::cmd("EVALSHA");
    evalsha.arg(other.get_hash()).arg(1).arg("k");
    assert!(!is_idempotent(&evalsha, &scripts));
    assert!(
        !is_idempotent(&redis::Cmd::new(), &scripts),
        "an empty command"
    );
}

#[test]
fn only_loading_makes_a_write_retryable() {
    let loading = RedisError::from((
        ErrorKind::Server(ServerErrorKind::BusyLoading),
        "Redis is loading the dataset in memory",
    ));
    let dropped: RedisError = std::io::Error::from(std::io::ErrorKind::BrokenPipe).into();
    let timeout = timed_out(REQUEST_TIMEOUT);
    let refused = RedisError::from((ErrorKind::Server(ServerErrorKind::NoScript), "NOSCRIPT"));
    assert!(retryable(&loading, false) && retryable(&loading, true));
    assert!(!retryable(&dropped, false) && retryable(&dropped, true));
    assert!(!retryable(&timeout, false) && retryable(&timeout, true));
    assert!(!retryable(&refused, true), "a server's answer is final");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_is_back_for_a_write_as_soon_as_redis_restarts() {
    let mut server = RedisServer::start_durable().expect("redis-server");
    let mut conn = RedisConn::connect(&server.url.as_str().into(), &[])
        .await
        .expect("connect");
    let _: () = conn.set("k", "before").await.expect("set");

    server.kill();
    // Idle through the outage: nothing but the health check uses it.
    tokio::time::sleep(OUTAGE).await;
    server.restart().expect("restart");

    // The first request after the restart is a write, sent only once: it
    // must find the connection already re-made.
    let _: () = conn
        .set("k", "after")
        .await
        .expect("a write right after the restart");
    let value: String = conn.get("k").await.expect("get");
    assert_eq!(value, "after");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_during_an_outage_fails_within_the_bound_and_reads_recover() {
    let mut server = RedisServer::start().expect("redis-server");
    let mut conn = RedisConn::connect(&server.url.as_str().into(), &[])
        .await
        .expect("connect");
    server.kill();

    let asked = Instant::now();
    let read: RedisResult<Option<String>> = conn.get("k").await;
    let waited = asked.elapsed();
    assert!(read.is_err(), "{read:?}");
    assert!(
        waited <= REQUEST_TIMEOUT + RETRY_PAUSE * 4,
        "a read during the outage took {waited:?}"
    );

    server.restart().expect("restart");
    let read: Option<String> = conn.get("k").await.expect("a read right after the restart");
    assert_eq!(read, None, "a fresh server without persistence");
}

#[tokio::test]
async fn connect_to_nothing_fails_in_time() {
    let port = telos_testkit::redis::free_port();
    let asked = Instant::now();
    let conn = RedisConn::connect(&format!("redis://127.0.0.1:{port}/").into(), &[]).await;
    assert!(conn.is_err());
    assert!(asked.elapsed() <= FIRST_CONNECT_TIMEOUT + CONNECT_TIMEOUT);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_telos_does_not_grant_itself_is_never_sent() {
    let server = RedisServer::start().expect("redis-server");
    let mut conn = RedisConn::connect(&server.url.as_str().into(), &[])
        .await
        .expect("connect");
    let _: () = conn.set("telos:k", "v").await.expect("a listed command");
    let err = redis::cmd("FLUSHALL")
        .exec_async(&mut conn)
        .await
        .expect_err("FLUSHALL is not Telos's");
    assert!(err.to_string().contains("flushall"), "{err}");
    let mut pipe = redis::pipe();
    pipe.cmd("GET").arg("telos:k").cmd("KEYS").arg("*");
    let err = pipe
        .query_async::<Vec<redis::Value>>(&mut conn)
        .await
        .expect_err("KEYS is not Telos's");
    assert!(err.to_string().contains("keys"), "{err}");
    // Nothing was sent: the key is still there.
    let value: Option<String> = conn.get("telos:k").await.expect("get");
    assert_eq!(value.as_deref(), Some("v"));
}
