//! A chat flood against a slow-but-honest reader (issue 18 item 4), through
//! a real gate and a real shard (keyed): eight players sending 4 KB `say`s
//! as fast as their sockets take them, and in the same room a player who
//! reads slowly (a slow link: a small receive buffer, 8 KB a second) and
//! plays on. Before, the reader was cut off as a "slow client" within
//! seconds: the gate queued all the room's chatter for them until the
//! queue's bound.
//!
//! - the reader stays connected and gets the answer to every one of its
//!   commands (its own output is never dropped);
//! - the reader is told that room chatter was dropped;
//! - every flooder is told it talks too fast (the chat limit), and the
//!   chatter that does go out is bounded by it.

use std::time::Duration;

use telos_testkit::RedisServer;
use telos_testkit::bot::Bot;
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{WorldOpts, start_keyed_gate, start_world};
use telos_testkit::storm::name;
use telos_testkit::world::starter_zones;
use tokio::task::JoinSet;
use tokio::time::Instant;

const PASSWORD: &str = "correct horse";
const FLOODERS: usize = 8;
/// How long the flood lasts.
const FLOOD: Duration = Duration::from_secs(15);
/// The reader's link: bytes a second, and its socket's receive buffer.
const READ_RATE: u64 = 8 * 1024;
const READER_RECV_BUFFER: u32 = 4 * 1024;
/// The world's chat refill for this test: four times the default, so eight
/// flooders say 32 KB a second between them, four times what the reader
/// reads, while each flooder still meets the limit.
const CHAT_BYTES_PER_SEC: &str = "4096";
/// Bounds one flooder's write (and its last answer) on a loaded machine.
const FLOOD_WRITE_TIMEOUT: Duration = Duration::from_secs(90);
const THROTTLED: &str = "You are talking too fast";
const DROPPED: &str = "lines of room chatter were dropped";
const SLOW_CLIENT: &str = "slow client";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_reader_outlasts_a_chat_flood_and_flooders_are_throttled() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let zones = starter_zones();
    let zones: Vec<&str> = zones.iter().map(String::as_str).collect();
    let mut opts = WorldOpts::new("flood", &redis.url, &zones).keyed(keys.path());
    opts.extra.extend([
        "--chat-bytes-per-sec".to_string(),
        CHAT_BYTES_PER_SEC.to_string(),
    ]);
    let _world = start_world(opts)?;
    let gate = start_keyed_gate(&redis.url, keys.path(), &[])?;

    // Everyone starts in the start room.
    let mut reader = Bot::open_with(&gate.addr, Some(READER_RECV_BUFFER)).await?;
    reader.create("Reader", PASSWORD).await?;
    reader.limit_transcript(64 * 1024);
    let mut flooders = Vec::new();
    for i in 0..FLOODERS {
        let mut bot = Bot::create_at(&gate.addr, &name("Flood", i), PASSWORD).await?;
        bot.limit_transcript(64 * 1024);
        // A flood meets TCP backpressure (the gate reads no more than the
        // world has saved): a write may wait a while, and that is fine.
        bot.set_timeout(FLOOD_WRITE_TIMEOUT);
        flooders.push(bot);
    }

    reader.set_read_rate(READ_RATE);
    let until = Instant::now() + FLOOD;
    let line = format!("say {}", "x".repeat(4000));
    let mut flooding = JoinSet::new();
    for mut bot in flooders {
        let line = line.clone();
        flooding.spawn(async move {
            let mut throttled = false;
            while Instant::now() < until {
                bot.send(&line).await?;
                // What came back so far (the reader task reads it all).
                throttled |= bot.drain_received().iter().any(|l| l.contains(THROTTLED));
            }
            // No waiting for the rest: what it typed ahead is hundreds of
            // lines, each answered as the world saves its input.
            throttled |= bot.transcript().contains(THROTTLED);
            anyhow::ensure!(throttled, "{} was never throttled", bot.name);
            anyhow::Ok(bot)
        });
    }

    // The reader plays through the flood: every command answered.
    let mut answered = 0;
    while Instant::now() < until {
        let text = reader.command("where").await?;
        anyhow::ensure!(
            text.lines().any(|l| l.starts_with("where: zone=")),
            "the reader's `where` was not answered: {text:?}"
        );
        answered += 1;
    }
    let mut flooders = Vec::new();
    while let Some(bot) = flooding.join_next().await {
        flooders.push(bot??);
    }
    // The flood is over: the reader catches up and is still there.
    reader.set_read_rate(0);
    let text = reader.command("where").await?;
    assert!(text.contains("where: zone="), "{text:?}");
    let transcript = reader.transcript();
    assert!(!reader.is_closed(), "the reader was disconnected");
    assert!(
        !transcript.contains(SLOW_CLIENT),
        "the reader was cut off as a slow client"
    );
    assert!(
        transcript.contains(DROPPED),
        "the reader was not told chatter was dropped; {answered} commands answered"
    );
    eprintln!("the reader's commands answered during the flood: {answered}");
    drop(flooders);
    Ok(())
}
