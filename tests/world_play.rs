//! End to end: a real `telos-world` and a real `redis-server`, driven over
//! the `Play` service with a tonic client (no gate).

use std::time::{Duration, Instant};

use telos_proto::v1::server_frame::Frame;
use telos_testkit::RedisServer;
use telos_testkit::play::PlayStream;
use telos_testkit::process::{Proc, WorldOpts, start_world};
use telos_testkit::world::{first_exit, starter_zones};

const PASSWORD: &str = "correct horse";

/// One shard `w1` serving every starter zone, with `extra` flags.
fn start_every_zone(redis: &RedisServer, extra: Vec<String>) -> anyhow::Result<Proc> {
    let zones = starter_zones();
    let zone_refs: Vec<&str> = zones.iter().map(String::as_str).collect();
    let mut opts = WorldOpts::new("w1", &redis.url, &zone_refs);
    opts.extra = extra;
    start_world(opts)
}

/// Wait for `Attached`, then for the room description that follows it.
async fn attached(s: &mut PlayStream) -> anyhow::Result<(u64, String)> {
    let got = s
        .until(|f| match f {
            Frame::Attached(a) => Some((a.ack_input_seq, a.credential.clone())),
            Frame::Closed(c) => panic!("closed instead of attached: {}", c.reason),
            _ => None,
        })
        .await?;
    s.until(|f| matches!(f, Frame::Output(_)).then_some(()))
        .await?;
    Ok(got)
}

async fn closed(s: &mut PlayStream) -> anyhow::Result<(String, bool)> {
    s.until(|f| match f {
        Frame::Closed(c) => Some((c.reason.clone(), c.r#final)),
        _ => None,
    })
    .await
}

fn where_room(text: &str) -> String {
    let line = text
        .lines()
        .find(|l| l.starts_with("where: "))
        .unwrap_or_else(|| panic!("no where line in {text:?}"));
    line.split(' ')
        .find_map(|w| w.strip_prefix("room="))
        .expect("room=")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_login_move_journal_where_quit_and_relogin_restores_everything() -> anyhow::Result<()>
{
    let redis = RedisServer::start()?;
    let world = start_every_zone(&redis, Vec::new())?;

    let mut s = PlayStream::open(&world.addr).await?;
    s.login("Alice", PASSWORD, true, "conn-1").await?;
    let (ack, credential) = attached(&mut s).await?;
    assert_eq!(ack, 0);
    assert!(!credential.is_empty());

    let look = s.command(1, "look").await?;
    let exit = first_exit(&look).unwrap_or_else(|| panic!("no exits in {look:?}"));
    let before = s.command(2, "where").await?;
    assert!(before.contains("shard=w1"), "{before}");
    let moved = s.command(3, &exit).await?;
    assert!(!moved.starts_with("You can't go that way"), "{moved}");
    let after = s.command(4, "where").await?;
    assert_ne!(
        where_room(&before),
        where_room(&after),
        "the move changed room"
    );
    assert_eq!(s.command(5, "journal first light").await?.trim(), "Noted.");
    assert_eq!(s.command(6, "journal second wind").await?.trim(), "Noted.");

    // Exactly once: a duplicate seq and an out-of-order (older) seq are
    // dropped, never re-applied.
    s.input(6, "journal duplicate").await?;
    s.input(8, "journal eight").await?;
    s.input(7, "journal seven-late").await?;
    s.until_ack(8).await?;
    let list = s.command(9, "journal").await?;
    assert_eq!(
        list.lines().collect::<Vec<_>>(),
        vec![
            "journal 1: first light",
            "journal 2: second wind",
            "journal 3: eight",
            "journal end 3"
        ]
    );

    s.input(10, "quit").await?;
    let (_, is_final) = closed(&mut s).await?;
    assert!(is_final, "quit closes for good");

    // Log in again on a new connection: everything came back from the row.
    let mut s = PlayStream::open(&world.addr).await?;
    s.login("alice", PASSWORD, false, "conn-2").await?;
    let (ack, credential2) = attached(&mut s).await?;
    assert_eq!(ack, 0, "a new connection numbers from 1");
    let again = s.command(1, "where").await?;
    assert_eq!(where_room(&again), where_room(&after));
    let list = s.command(2, "journal").await?;
    assert!(
        list.contains("journal 3: eight") && list.contains("journal end 3"),
        "{list}"
    );

    // conn-1 quit: its resume credential went with it.
    let mut r = PlayStream::open(&world.addr).await?;
    r.resume("alice", "conn-1", &credential).await?;
    let (reason, _) = closed(&mut r).await?;
    assert!(reason.starts_with("Login failed"), "{reason}");

    // A connection another login took over cannot resume: its credential
    // is revoked with the takeover (its gate, had it missed the final
    // `Closed`, would take the newer session over and replay lines that
    // session already holds).
    let mut s3 = PlayStream::open(&world.addr).await?;
    s3.login("alice", PASSWORD, false, "conn-3").await?;
    attached(&mut s3).await?;
    closed(&mut s).await?;
    s3.command(1, "look").await?;
    s3.command(2, "look").await?;
    s3.command(3, "look").await?;
    s3.input(4, "quit").await?;
    closed(&mut s3).await?;
    let mut r = PlayStream::open(&world.addr).await?;
    r.resume("alice", "conn-2", &credential2).await?;
    let (reason, is_final) = closed(&mut r).await?;
    assert!(
        reason.starts_with("Login failed") && is_final,
        "a taken-over connection resumed: {reason}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_clear_answers_and_the_shard_stays_up() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let mut world = start_every_zone(&redis, Vec::new())?;

    let mut s = PlayStream::open(&world.addr).await?;
    s.login("Bob", PASSWORD, true, "c1").await?;
    attached(&mut s).await?;

    // Duplicate name.
    let mut d = PlayStream::open(&world.addr).await?;
    d.login("BOB", PASSWORD, true, "c2").await?;
    let (reason, _) = closed(&mut d).await?;
    assert!(reason.starts_with("Login failed"), "{reason}");
    // Wrong password and unknown name give the same line.
    let mut w = PlayStream::open(&world.addr).await?;
    w.login("bob", "wrong password", false, "c3").await?;
    let (wrong, _) = closed(&mut w).await?;
    let mut u = PlayStream::open(&world.addr).await?;
    u.login("nobody", PASSWORD, false, "c4").await?;
    let (unknown, _) = closed(&mut u).await?;
    assert!(wrong.starts_with("Login failed"), "{wrong}");
    assert_eq!(wrong, unknown);
    // Bad name and short password on create.
    let mut b = PlayStream::open(&world.addr).await?;
    b.login("x1", PASSWORD, true, "c5").await?;
    assert!(closed(&mut b).await?.0.starts_with("Login failed"));
    let mut p = PlayStream::open(&world.addr).await?;
    p.login("Carol", "short", true, "c6").await?;
    assert!(closed(&mut p).await?.0.starts_with("Login failed"));

    // Overlong line: a clear refusal, acked, nothing applied.
    let long = "x".repeat(5000);
    let text = s.command(1, &long).await?;
    assert!(text.contains("too long"), "{text}");
    // Control characters and odd unicode never hurt.
    let text = s.command(2, "say \u{0}\u{7}héllo \u{202e}wörld").await?;
    assert!(!text.is_empty());
    // A flood: 3000 lines in a burst, every one applied exactly once.
    let flood = 3000u64;
    for i in 0..flood {
        s.input(3 + i, &format!("journal flood {i}")).await?;
    }
    s.until_ack(2 + flood).await?;
    let list = s.command(3 + flood, "journal").await?;
    // The journal keeps the last 1000 entries: exactly the last 1000 lines
    // sent, in order, none twice.
    let expected: Vec<String> = (flood - 1000..flood)
        .enumerate()
        .map(|(n, i)| format!("journal {}: flood {i}", n + 1))
        .chain(std::iter::once("journal end 1000".to_string()))
        .collect();
    assert_eq!(list.lines().collect::<Vec<_>>(), expected);

    // Still up: a fresh player logs in and plays.
    let mut e = PlayStream::open(&world.addr).await?;
    e.login("Dave", PASSWORD, true, "c7").await?;
    attached(&mut e).await?;
    assert!(e.command(1, "where").await?.contains("shard=w1"));
    assert!(
        world.child.try_wait()?.is_none(),
        "the shard is still running"
    );
    world.kill();
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_login_takes_over_the_session() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let world = start_every_zone(&redis, Vec::new())?;

    let mut first = PlayStream::open(&world.addr).await?;
    first.login("Erin", PASSWORD, true, "a").await?;
    attached(&mut first).await?;
    assert_eq!(first.command(1, "journal before").await?.trim(), "Noted.");

    let mut second = PlayStream::open(&world.addr).await?;
    second.login("erin", PASSWORD, false, "b").await?;
    attached(&mut second).await?;
    let (reason, is_final) = closed(&mut first).await?;
    assert!(is_final, "{reason}");
    // The in-memory state (journal) carried over to the new session.
    let list = second.command(1, "journal").await?;
    assert!(list.contains("journal 1: before"), "{list}");
    Ok(())
}

/// A resume its gate gave up (the shard stalled, or lost its link, with
/// the request in hand, and the gate asked again) reaches the shard after
/// the later attempt put the player into play: it claims nothing, and the
/// session in play keeps its input and its saves (issue 17: such a claim
/// minted a newer epoch, and the live session's saves were refused, three
/// acknowledged lines lost; or it took the session over).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_its_gate_gave_up_never_takes_over_a_later_one() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let world = start_every_zone(&redis, Vec::new())?;

    let mut login = PlayStream::open(&world.addr).await?;
    login.login("Fay", PASSWORD, true, "f").await?;
    let (_, credential) = attached(&mut login).await?;
    let mut live = PlayStream::open(&world.addr).await?;
    live.resume_attempt("Fay", "f", &credential, 5).await?;
    attached(&mut live).await?;
    assert_eq!(live.command(1, "journal kept").await?.trim(), "Noted.");

    let mut given_up = PlayStream::open(&world.addr).await?;
    given_up.resume_attempt("Fay", "f", &credential, 4).await?;
    let (reason, is_final) = closed(&mut given_up).await?;
    assert!(reason.contains("later attempt"), "{reason}");
    assert!(!is_final, "{reason}");

    // Still the session in play, and still saved: its next line is applied
    // and made durable (a save under a fenced epoch is never acknowledged).
    assert_eq!(live.command(2, "journal after").await?.trim(), "Noted.");
    live.until(|f| match f {
        Frame::DurableAck(d) if d.seq >= 2 => Some(()),
        Frame::Closed(c) => panic!("the session in play was closed: {}", c.reason),
        _ => None,
    })
    .await?;
    let list = live.command(3, "journal").await?;
    assert!(list.contains("kept") && list.contains("after"), "{list}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zone_whose_lease_renew_is_refused_stops_taking_input_within_the_ttl()
-> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let ttl = Duration::from_millis(1500);
    let extra = vec!["--lease-ttl-ms".into(), ttl.as_millis().to_string()];
    let world = start_every_zone(&redis, extra)?;

    let mut s = PlayStream::open(&world.addr).await?;
    s.login("Fay", PASSWORD, true, "f").await?;
    attached(&mut s).await?;
    let text = s.command(1, "where").await?;
    let zone = text
        .split(' ')
        .find_map(|w| w.strip_prefix("zone="))
        .expect("zone=")
        .to_string();

    // Another owner takes the lease behind the shard's back.
    let client = redis::Client::open(redis.url.as_str())?;
    let mut con = client.get_multiplexed_async_connection().await?;
    let _: () = redis::cmd("HSET")
        .arg(format!("telos:zone:{zone}:lease"))
        .arg("owner")
        .arg("intruder")
        .query_async(&mut con)
        .await?;
    let taken = Instant::now();

    let (reason, is_final) = closed(&mut s).await?;
    assert!(
        !is_final,
        "a fence is not final: the gate resumes elsewhere ({reason})"
    );
    assert!(
        taken.elapsed() <= ttl + Duration::from_millis(500),
        "fenced after {:?}",
        taken.elapsed()
    );
    assert!(s.transcript.contains("fades"), "{}", s.transcript);
    // Once the intruder's lease expires the shard claims the zone again at
    // a newer generation, and the player resumes with nothing lost.
    let mut again = PlayStream::open(&world.addr).await?;
    again.login("fay", PASSWORD, false, "g").await?;
    attached(&mut again).await?;
    assert!(
        again
            .command(1, "where")
            .await?
            .contains(&format!("zone={zone} "))
    );
    let generation: u64 = redis::cmd("HGET")
        .arg(format!("telos:zone:{zone}:lease"))
        .arg("gen")
        .query_async(&mut con)
        .await?;
    assert!(
        generation >= 2,
        "re-claimed at a newer generation, got {generation}"
    );
    Ok(())
}
