//! Words across shards, end to end (issue 20, "what players of any MUD
//! expect"): a real `redis-server`, two keyed `telos-world` shards (the
//! city on `shard-a`, every other zone on `shard-b`) and a real
//! `telos-gate`, driven by [`Bot`]s over TCP.
//!
//! - `tell` reaches a player on the other shard, and the speaker hears it
//!   went; a tell to nobody online is answered so, never silence;
//! - `chat` (and `ooc`) reaches every player on every shard;
//! - a player walking across the shard boundary arrives "from" somewhere,
//!   as within a shard: the direction travels with the handoff.

use std::time::Duration;

use telos_testkit::bot::Bot;
use telos_testkit::world::{opposite, path_to_zone, start_room};

mod support;
use support::two_shards::TwoShards;

const PASSWORD: &str = "correct horse";
/// Bounds one wait for a line on a loaded machine; a hang fails with the
/// transcript.
const WAIT: Duration = Duration::from_secs(30);

fn start() -> anyhow::Result<TwoShards> {
    TwoShards::start(&[], &["--login-ip-burst", "20", "--create-ip-burst", "20"])
}

/// Walk `bot` along `path`; each step must land (no refusal).
async fn walk(bot: &mut Bot, path: &[String]) -> anyhow::Result<()> {
    for dir in path {
        let text = bot.command(dir).await?;
        anyhow::ensure!(
            !text.contains("You can't go that way"),
            "{} could not go {dir}: {text:?}",
            bot.name
        );
    }
    Ok(())
}

/// Where a player who walked `dir` arrives from, as the room says it.
fn from_phrase(dir: &str) -> String {
    match opposite(dir) {
        "up" => "above".into(),
        "down" => "below".into(),
        side => format!("the {side}"),
    }
}

/// Wait until `bot` receives a line containing `needle`.
async fn hears(bot: &mut Bot, needle: &str) -> anyhow::Result<String> {
    let lines = bot
        .read_until(|l| l.contains(needle), WAIT)
        .await
        .map_err(|e| anyhow::anyhow!("{} never heard {needle:?}: {e:#}", bot.name))?;
    Ok(lines.last().cloned().unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tell_chat_and_arrivals_cross_the_shard_boundary() -> anyhow::Result<()> {
    let cluster = start()?;
    let addr = &cluster.gate.addr;
    let to_forest = path_to_zone(&start_room(), "forest");
    let (last, before) = to_forest.split_last().expect("a path into the forest");

    // Carol waits in the forest (shard-b), in the first room past the
    // boundary; Alice stays in the city (shard-a).
    let mut alice = Bot::create_at(addr, "Alice", PASSWORD).await?;
    let mut carol = Bot::create_at(addr, "Carol", PASSWORD).await?;
    walk(&mut carol, &to_forest).await?;
    let (zone, _, shard) = carol.where_().await?;
    assert_eq!((zone.as_str(), shard.as_str()), ("forest", "shard-b"));
    let (_, _, shard) = alice.where_().await?;
    assert_eq!(shard, "shard-a");

    // Bob walks up to the boundary on shard-a and across it.
    let mut bob = Bot::create_at(addr, "Bob", PASSWORD).await?;
    walk(&mut bob, before).await?;
    carol.sync().await?;
    walk(&mut bob, std::slice::from_ref(last)).await?;
    let arrival = format!("Bob arrives from {}.", from_phrase(last));
    let heard = hears(&mut carol, "Bob arrives").await?;
    assert_eq!(heard, arrival, "the direction travels with the handoff");
    let (_, _, shard) = bob.where_().await?;
    assert_eq!(shard, "shard-b");

    // tell: shard-a to shard-b and back, each speaker answered.
    let said = alice.command("tell bob the bridge is out").await?;
    let answer = match said.contains("You tell Bob") {
        true => said,
        false => hears(&mut alice, "You tell Bob").await?,
    };
    assert!(
        answer.contains("You tell Bob, 'the bridge is out'"),
        "{answer:?}"
    );
    let heard = hears(&mut bob, "tells you").await?;
    assert_eq!(heard, "Alice tells you, 'the bridge is out'");
    bob.command("tell ALICE thanks").await?;
    let heard = hears(&mut alice, "tells you").await?;
    assert_eq!(heard, "Bob tells you, 'thanks'");
    hears(&mut bob, "You tell Alice, 'thanks'").await?;

    // Nobody of that name: a clear answer, not silence.
    alice.send("tell zelda hello").await?;
    hears(&mut alice, "No one called Zelda is online.").await?;

    // chat reaches every shard; ooc is the same channel.
    alice.send("chat hello, world").await?;
    hears(&mut alice, "You chat, 'hello, world'").await?;
    for bot in [&mut bob, &mut carol] {
        assert_eq!(hears(bot, "chats,").await?, "Alice chats, 'hello, world'");
    }
    carol.send("ooc hi from the forest").await?;
    assert_eq!(
        hears(&mut alice, "chats,").await?,
        "Carol chats, 'hi from the forest'"
    );

    // emote reads as a pose to the room.
    bob.send("emote waves.").await?;
    assert_eq!(hears(&mut carol, "waves.").await?, "Bob waves.");
    Ok(())
}
