//! End to end, straight at a shard's `Play` (no gate), as a caller with a
//! gate certificate could: failed-login locks and their expiry, the
//! account-wide throttle, password strength at create, the resume
//! credential after `quit`, and streams that never send a first frame.

use std::time::{Duration, Instant};

use telos_proto::v1::server_frame::Frame;
use telos_testkit::RedisServer;
use telos_testkit::keys::TempKeys;
use telos_testkit::play::{Channels, PlayStream};
use telos_testkit::process::{Proc, WorldOpts, start_world};
use telos_testkit::world::starter_zones;
use telos_tls::Role;

const PASSWORD: &str = "correct horse";
const WRONG: &str = "wrong horse battery";
const LOCKED: &str = "Login failed: too many attempts, try again in";
/// The locks these tests configure: short enough to wait out.
const LOCK_MS: &str = "1500";
const LOCK_CAP_MS: &str = "3000";
/// Well above one password check (so the attempt that took the interval's
/// slot is answered before it lapses), short enough to wait out.
const THROTTLE_MS: &str = "3000";
/// Bounds every wait for a lock or throttle to lapse (far above both).
const LAPSE_BOUND: Duration = Duration::from_secs(15);
const POLL: Duration = Duration::from_millis(200);

/// A keyed shard (mutual TLS) and its key folder: the guesser below holds
/// a gate certificate, as an attacker who stole one would.
fn world(redis: &RedisServer, extra: &[&str]) -> anyhow::Result<(Proc, TempKeys)> {
    let keys = TempKeys::generate()?;
    let zones = starter_zones();
    let zones: Vec<&str> = zones.iter().map(String::as_str).collect();
    let mut opts = WorldOpts::new("w1", &redis.url, &zones).keyed(keys.path());
    opts.extra.extend(extra.iter().map(|s| s.to_string()));
    Ok((start_world(opts)?, keys))
}

/// Connections presenting the gate certificate.
fn gate_channels(keys: &TempKeys) -> Channels {
    Channels::tls(keys.tls(Role::Gate))
}

/// How one `Play` stream's opening ended.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    Attached { credential: String },
    Closed(String),
}

async fn answer(s: &mut PlayStream) -> anyhow::Result<Answer> {
    s.until(|f| match f {
        Frame::Attached(a) => Some(Answer::Attached {
            credential: a.credential.clone(),
        }),
        Frame::Closed(c) => Some(Answer::Closed(c.reason.clone())),
        _ => None,
    })
    .await
}

fn refusal(a: Answer) -> String {
    match a {
        Answer::Closed(reason) => reason,
        Answer::Attached { .. } => panic!("attached instead of refused"),
    }
}

/// The lines without their numbers (a lock's seconds left differ by when
/// the line was asked for).
fn shapes(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .map(|l| l.chars().filter(|c| !c.is_ascii_digit()).collect())
        .collect()
}

/// One login for `name` from `client_addr`, on a stream of its own.
async fn login_from(
    c: &Channels,
    addr: &str,
    client_addr: &str,
    name: &str,
    password: &str,
) -> anyhow::Result<Answer> {
    let mut s = PlayStream::open_on(c.channel(addr)?).await?;
    s.login_from(client_addr, name, password).await?;
    answer(&mut s).await
}

async fn create(c: &Channels, addr: &str, name: &str, password: &str) -> anyhow::Result<Answer> {
    let mut s = PlayStream::open_on(c.channel(addr)?).await?;
    s.login(name, password, true, &format!("create-{name}"))
        .await?;
    answer(&mut s).await
}

/// Logs in from `client_addr` again and again (each refusal costs nothing
/// and extends nothing) until the limits let the right password in.
async fn until_attached(
    c: &Channels,
    addr: &str,
    client_addr: &str,
    name: &str,
) -> anyhow::Result<Duration> {
    let start = Instant::now();
    loop {
        match login_from(c, addr, client_addr, name, PASSWORD).await? {
            Answer::Attached { .. } => return Ok(start.elapsed()),
            Answer::Closed(reason) => assert!(reason.starts_with(LOCKED), "{reason}"),
        }
        assert!(start.elapsed() < LAPSE_BOUND, "still refused");
        tokio::time::sleep(POLL).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guessing_locks_one_source_until_the_lock_expires() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let flags = [
        "--login-lock-after",
        "3",
        "--login-lock-ms",
        LOCK_MS,
        "--login-lock-cap-ms",
        LOCK_CAP_MS,
    ];
    let (w, keys) = world(&redis, &flags)?;
    let c = gate_channels(&keys);
    assert!(matches!(
        create(&c, &w.addr, "Alice", PASSWORD).await?,
        Answer::Attached { .. }
    ));

    let guesser = "192.0.2.7";
    let mut lines = Vec::new();
    for _ in 0..3 {
        lines.push(refusal(
            login_from(&c, &w.addr, guesser, "alice", WRONG).await?,
        ));
    }
    assert_eq!(lines[..2], ["Login failed.", "Login failed."]);
    assert!(lines[2].starts_with(LOCKED), "{lines:?}");
    // Locked: even the right password is refused, unchecked.
    let reason = refusal(login_from(&c, &w.addr, guesser, "alice", PASSWORD).await?);
    assert!(reason.starts_with(LOCKED), "{reason}");
    // An unknown name is answered exactly like a wrong password.
    let mut unknown = Vec::new();
    for _ in 0..4 {
        unknown.push(refusal(
            login_from(&c, &w.addr, "192.0.2.8", "nobody", WRONG).await?,
        ));
    }
    lines.push(reason);
    assert_eq!(shapes(&unknown), shapes(&lines));
    // Another source (an IPv6 /64, and the gate-less "unknown" bucket) is
    // not locked by the first one's failures.
    assert!(matches!(
        login_from(&c, &w.addr, "2001:db8:7:7::1", "alice", PASSWORD).await?,
        Answer::Attached { .. }
    ));
    assert!(matches!(
        login_from(&c, &w.addr, "", "alice", PASSWORD).await?,
        Answer::Attached { .. }
    ));
    // The lock expires by itself; then the right password works.
    until_attached(&c, &w.addr, guesser, "alice").await?;
    // ...and the success cleared the pair: a typo is a plain failure again.
    assert_eq!(
        refusal(login_from(&c, &w.addr, guesser, "alice", WRONG).await?),
        "Login failed."
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_sources_are_throttled_account_wide_never_shut_out() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let flags = [
        "--login-lock-after",
        "1000",
        "--login-throttle-after",
        "3",
        "--login-throttle-ms",
        THROTTLE_MS,
    ];
    let (w, keys) = world(&redis, &flags)?;
    let c = gate_channels(&keys);
    create(&c, &w.addr, "Bob", PASSWORD).await?;
    // The player's own address logs in once.
    let home = "198.51.100.9";
    assert!(matches!(
        login_from(&c, &w.addr, home, "bob", PASSWORD).await?,
        Answer::Attached { .. }
    ));
    // A guesser spread over many addresses, one guess from each.
    for i in 0..3 {
        let from = format!("203.0.113.{i}");
        assert_eq!(
            refusal(login_from(&c, &w.addr, &from, "bob", WRONG).await?),
            "Login failed."
        );
    }
    // Throttled: one attempt per interval from new sources...
    assert_eq!(
        refusal(login_from(&c, &w.addr, "203.0.113.50", "bob", WRONG).await?),
        "Login failed."
    );
    let reason = refusal(login_from(&c, &w.addr, "203.0.113.51", "bob", PASSWORD).await?);
    assert!(reason.starts_with(LOCKED), "{reason}");
    // ...while the player's own address is not slowed at all...
    assert!(matches!(
        login_from(&c, &w.addr, home, "bob", PASSWORD).await?,
        Answer::Attached { .. }
    ));
    // ...and a new source gets in once the interval is over.
    until_attached(&c, &w.addr, "203.0.113.51", "bob").await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_creators_address_is_not_throttled_before_its_first_login() -> anyhow::Result<()> {
    // Review finding: a guesser could throttle an account before its
    // creator ever logged in, and the creator's own address was as new as
    // the guesser's.
    let redis = RedisServer::start()?;
    let flags = [
        "--login-lock-after",
        "1000",
        "--login-throttle-after",
        "3",
        "--login-throttle-ms",
        THROTTLE_MS,
    ];
    let (w, keys) = world(&redis, &flags)?;
    let c = gate_channels(&keys);
    let home = "198.51.100.20";
    let mut s = PlayStream::open_on(c.channel(&w.addr)?).await?;
    s.login_or_create_from(home, "Cyd", PASSWORD, true).await?;
    assert!(matches!(answer(&mut s).await?, Answer::Attached { .. }));
    drop(s);
    for i in 0..4 {
        let from = format!("203.0.113.{i}");
        login_from(&c, &w.addr, &from, "cyd", WRONG).await?;
    }
    // The account is throttled for new sources...
    let reason = refusal(login_from(&c, &w.addr, "203.0.113.60", "cyd", PASSWORD).await?);
    assert!(reason.starts_with(LOCKED), "{reason}");
    // ...but not for the address it was created from.
    assert!(matches!(
        login_from(&c, &w.addr, home, "cyd", PASSWORD).await?,
        Answer::Attached { .. }
    ));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weak_passwords_are_refused_at_create_with_the_estimators_feedback() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let (w, keys) = world(&redis, &[])?;
    let c = gate_channels(&keys);
    let reason = refusal(create(&c, &w.addr, "Alice", "alicealice").await?);
    assert!(
        reason.starts_with("Login failed: password too weak: ") && reason.contains("Repeats"),
        "{reason}"
    );
    let reason = refusal(create(&c, &w.addr, "Alice", "password1").await?);
    assert!(reason.contains("common password"), "{reason}");
    // Nothing was created: the name is still free for a strong password.
    assert!(matches!(
        create(&c, &w.addr, "Alice", "amber-walrus-hums").await?,
        Answer::Attached { .. }
    ));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_after_quit_is_refused() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let (w, keys) = world(&redis, &[])?;
    let c = gate_channels(&keys);
    let mut s = PlayStream::open_on(c.channel(&w.addr)?).await?;
    s.login("Carol", PASSWORD, true, "conn-q").await?;
    let Answer::Attached { credential } = answer(&mut s).await? else {
        panic!("not attached")
    };
    s.input(1, "quit").await?;
    assert_eq!(refusal(answer(&mut s).await?), "Goodbye.");
    let mut r = PlayStream::open_on(c.channel(&w.addr)?).await?;
    r.resume("Carol", "conn-q", &credential).await?;
    let reason = refusal(answer(&mut r).await?);
    assert!(reason.starts_with("Login failed"), "{reason}");
    Ok(())
}

/// Streams per HTTP/2 connection in the silent-stream test: well under
/// any per-connection stream cap, so none waits for another to close.
const STREAMS_PER_CONNECTION: usize = 100;
const SILENT_STREAMS: usize = 1000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_play_streams_are_closed_within_the_deadline() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let (w, keys) = world(&redis, &[])?;
    let connections: Vec<Channels> = (0..SILENT_STREAMS / STREAMS_PER_CONNECTION)
        .map(|_| gate_channels(&keys))
        .collect();
    let mut silent = Vec::with_capacity(SILENT_STREAMS);
    for i in 0..SILENT_STREAMS {
        let c = &connections[i / STREAMS_PER_CONNECTION];
        silent.push(PlayStream::open_on(c.channel(&w.addr)?).await?);
    }
    // Each is told why, then ends: its session task on the shard returned
    // (the stream ends only when the task drops its sender). Each wait is
    // bounded by the test kit's frame timeout, above the 5 s deadline.
    for s in &mut silent {
        let reason = refusal(answer(s).await?);
        assert!(reason.starts_with("Protocol error: no Login"), "{reason}");
        assert!(s.next().await?.is_none(), "the stream did not end");
    }
    // The shard is still fine.
    let c = gate_channels(&keys);
    assert!(matches!(
        create(&c, &w.addr, "Dave", PASSWORD).await?,
        Answer::Attached { .. }
    ));
    Ok(())
}

/// `--capacity 1` caps a connection at 2 × 1 + 64 streams (world/src/app.rs).
const CAPPED_CAPACITY: &str = "1";
const STREAM_CAP: usize = 66;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_connection_holds_at_most_its_stream_cap() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let metrics = format!("127.0.0.1:{}", telos_testkit::redis::free_port());
    let (w, keys) = world(
        &redis,
        &["--capacity", CAPPED_CAPACITY, "--metrics-listen", &metrics],
    )?;
    let c = gate_channels(&keys);
    let mut silent = Vec::with_capacity(STREAM_CAP);
    for _ in 0..STREAM_CAP {
        silent.push(PlayStream::open_on(c.channel(&w.addr)?).await?);
    }
    // One stream more on the same connection: the shard does not take it
    // until a slot frees, which only the first-frame deadline does here.
    // So when it is answered, some silent stream has already been closed
    // for its silence — an order, not a time.
    let answered = create(&c, &w.addr, "Erin", PASSWORD).await?;
    assert!(matches!(answered, Answer::Attached { .. }), "{answered:?}");
    let text = telos_testkit::metrics::scrape(&metrics).await?;
    let timed_out = telos_testkit::metrics::sample(&text, "telos_play_first_frame_timeouts_total");
    assert!(
        timed_out >= 1.0,
        "the stream beyond the cap was served before any slot freed ({timed_out} timeouts)"
    );
    drop(silent);
    Ok(())
}

/// A gate certificate's `Login.client_addr` is trusted only up to that
/// certificate's budget of failed logins (issue 18): a caller naming a
/// fresh address for every guess escaped every per-source lock (20
/// guesses a minute per account, across every account). Once its budget
/// is spent, its logins are one source — its own — which locks; another
/// gate's certificate keeps its own budget, and its players' addresses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callers_addresses_are_trusted_only_up_to_its_budget() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let flags = [
        "--login-lock-after",
        "2",
        "--login-lock-ms",
        LOCK_MS,
        "--login-lock-cap-ms",
        LOCK_CAP_MS,
        "--login-caller-budget",
        "3",
        "--login-caller-refill-ms",
        "600000",
    ];
    let (w, keys) = world(&redis, &flags)?;
    let c = gate_channels(&keys);
    create(&c, &w.addr, "Cyd", PASSWORD).await?;
    // Cyd's own address, known to the account from a login.
    let home = "192.0.2.50";
    assert!(matches!(
        login_from(&c, &w.addr, home, "cyd", PASSWORD).await?,
        Answer::Attached { .. }
    ));
    // Within the budget, each made-up address is a source of its own.
    for i in 0..3 {
        let from = format!("203.0.113.{i}");
        assert_eq!(
            refusal(login_from(&c, &w.addr, &from, "cyd", WRONG).await?),
            "Login failed."
        );
    }
    // Spent: fresh addresses no longer help; the caller's one source
    // locks at its second failure.
    let mut lines = Vec::new();
    for i in 10..13 {
        let from = format!("203.0.113.{i}");
        lines.push(refusal(login_from(&c, &w.addr, &from, "cyd", WRONG).await?));
    }
    assert_eq!(lines[0], "Login failed.", "{lines:?}");
    assert!(lines[1].starts_with(LOCKED), "{lines:?}");
    assert!(lines[2].starts_with(LOCKED), "{lines:?}");
    // The caller's bucket is locked, but Cyd, back from her own known
    // address through the same gate, is not locked out with it.
    assert!(matches!(
        login_from(&c, &w.addr, home, "cyd", PASSWORD).await?,
        Answer::Attached { .. }
    ));
    // Another gate (its own certificate): its player's address is trusted.
    let honest = Channels::tls(keys.cert(Role::Gate, "gate-2"));
    assert_eq!(
        refusal(login_from(&honest, &w.addr, "198.51.100.7", "cyd", WRONG).await?),
        "Login failed."
    );
    assert!(matches!(
        login_from(&honest, &w.addr, "198.51.100.7", "cyd", PASSWORD).await?,
        Answer::Attached { .. }
    ));
    Ok(())
}
