//! A crowd quitting at once (issue 18): the players who stay are answered
//! while the crowd's saves are still under way. The shard reaches Redis
//! through the testkit's TCP proxy, which delays every round trip, so each
//! quit's save is slow; before, the zone saved the quitters one after
//! another inside its actor and a bystander in the same room waited for
//! all of them.

mod support;

use std::time::Duration;

use telos_testkit::RedisServer;
use telos_testkit::bot::{Bot, Recv};
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{Proc, repo_root, start_keyed_gate, start_keyed_world};
use telos_testkit::proxy::{LinkMode, Proxy};
use telos_testkit::world::starter_zones;
use tokio::time::Instant;

use support::population::seed_in_rooms;

const CROWD: usize = 60;
const PASSWORD: &str = "correct horse";
const ROOM: &str = "city:square";
/// Each leg of every round trip between the shard and Redis, once the
/// crowd quits.
const DELAY: Duration = Duration::from_millis(100);
/// Bounds a broken build (a hang, not a performance claim).
const SETTLE: Duration = Duration::from_secs(60);

struct Cluster {
    // Field order is drop order: the gate first, Redis last.
    gate: Proc,
    world: Proc,
    _keys: TempKeys,
    proxy: Proxy,
    _redis: RedisServer,
}

async fn start(redis: RedisServer) -> anyhow::Result<Cluster> {
    let proxy = Proxy::start("127.0.0.1:0", &format!("127.0.0.1:{}", redis.port), None).await?;
    let keys = TempKeys::generate()?;
    let world = start_keyed_world(
        "shard-a",
        &format!("redis://{}/", proxy.addr),
        &starter_zones(),
        keys.path(),
        None,
        &[] as &[&str],
    )?;
    let gate = start_keyed_gate(&redis.url, keys.path(), &[])?;
    Ok(Cluster {
        gate,
        world,
        _keys: keys,
        proxy,
        _redis: redis,
    })
}

/// Read what `bot` received until `deadline` (now: only what is there) or
/// its connection closed; whether it closed. `goodbye` is set once the
/// `Goodbye.` has been read.
async fn read_to_close(bot: &mut Bot, deadline: Instant, goodbye: &mut bool) -> bool {
    loop {
        match bot.recv(deadline).await {
            Recv::Line(_, line) => *goodbye |= line.contains("Goodbye."),
            Recv::Closed => return true,
            Recv::TimedOut => return false,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bystander_is_answered_while_a_crowd_quits() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let store = telos_redis::store::Store::connect(&redis.url).await?;
    // Names are letters only: Leaveraa, Leaverab, ...
    let letter = |n: usize| char::from(b'a' + u8::try_from(n % 26).expect("a letter"));
    let mut names: Vec<String> = (0..CROWD)
        .map(|i| format!("Leaver{}{}", letter(i / 26), letter(i)))
        .collect();
    names.push("Stayer".into());
    let placed: Vec<(String, String)> = names.iter().map(|n| (n.clone(), ROOM.into())).collect();
    seed_in_rooms(&store, &repo_root().join("config/world"), &placed, PASSWORD).await?;
    let c = start(redis).await?;
    let addr = c.gate.addr.clone();
    let mut stayer = Bot::connect_at(&addr, "Stayer", PASSWORD).await?;
    let mut crowd = Vec::new();
    for name in &names[..CROWD] {
        let mut bot = Bot::connect_at(&addr, name, PASSWORD).await?;
        bot.set_timeout(SETTLE);
        bot.command("journal a last word").await?;
        crowd.push(bot);
    }
    stayer.set_timeout(SETTLE);
    stayer.sync().await?;

    c.proxy.set(LinkMode::Delay(DELAY));
    for bot in &mut crowd {
        bot.send("quit").await?;
    }
    // Every quitter is out of the room (`vanishes`) before the stayer
    // looks: its quit has reached the zone. Before, a quitter vanished
    // only once its save had landed.
    let mut gone = 0;
    stayer
        .read_until(
            |line| {
                gone += usize::from(line.starts_with("Leaver") && line.contains("vanishes."));
                gone == CROWD
            },
            SETTLE,
        )
        .await?;
    let look = stayer.command("look").await?;
    anyhow::ensure!(look.contains("Market Square"), "look: {look:?}");
    let mut goodbyes = vec![false; CROWD];
    let mut closed = 0;
    for (bot, goodbye) in crowd.iter_mut().zip(&mut goodbyes) {
        closed += usize::from(read_to_close(bot, Instant::now(), goodbye).await);
    }
    assert!(
        closed < CROWD / 2,
        "the stayer's look waited for {closed} of {CROWD} quitters' saves"
    );

    let deadline = Instant::now() + SETTLE;
    for ((bot, goodbye), name) in crowd.iter_mut().zip(&mut goodbyes).zip(&names) {
        anyhow::ensure!(
            read_to_close(bot, deadline, goodbye).await,
            "{name}: still open\nworld log:\n{}",
            c.world.log_text()
        );
        anyhow::ensure!(*goodbye, "{name}: closed without `Goodbye.`");
    }
    c.proxy.heal();
    for name in &names[..CROWD] {
        let row = store.load(&name.to_ascii_lowercase()).await?.expect("row");
        anyhow::ensure!(row.quit_seq > 0, "{name}: no quit mark on the row");
    }
    Ok(())
}
