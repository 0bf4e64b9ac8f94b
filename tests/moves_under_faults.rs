//! Walkers cross every boundary of a zone, in both directions, through the
//! real gate, while that zone is drained (its shard SIGTERMed and
//! restarted: the zone is adopted by a peer), transferred by an operator,
//! or its shard crashes (SIGKILL, restart). Every move is answered — the new
//! room, or a line starting `You can't go that way` — within 2 s beyond the
//! fault in progress (plus slack for a loaded machine), no socket closes,
//! and every journal is exact (ARCHITECTURE.md, invariants 3, 4 and 7).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use telos_redis::directory::Directory;
use telos_testkit::RedisServer;
use telos_testkit::bot::Bot;
use telos_testkit::cli::telosctl;
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{Proc, start_keyed_gate, start_keyed_world};
use telos_testkit::world::{WorldMap, exits, opposite, path};
use tokio::sync::Mutex;

const PASSWORD: &str = "correct horse";
const START: &str = "city:square";

/// The zone that moves, on `shard-a`; its neighbours live on `shard-b` and
/// `shard-c`.
const MOVING: &str = "forest";
const B_ZONES: [&str; 2] = ["city", "marsh"];
const C_ZONES: [&str; 3] = ["keep", "docks", "hills"];

/// Every refused move starts with this (CONTRACT.md).
const REFUSED: &str = "You can't go that way";

/// The answer bound beyond the fault in progress (the rule), and slack on
/// top for a loaded 2-core machine: this bounds a hang, it is not a
/// performance claim.
const BOUND: Duration = Duration::from_secs(2);
const SLACK: Duration = Duration::from_secs(4);

/// A short lease, so a crashed shard's zone is served again within
/// TTL + one orphan-loop period.
const LEASE_MS: &str = "3000";

/// Walking before and after the fault.
const CALM: Duration = Duration::from_secs(2);
/// Between a walker's steps.
const PACE: Duration = Duration::from_millis(60);
const WAIT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(20);

/// A fault's window, as the walkers' clocks see it.
#[derive(Default)]
struct Window {
    started: Option<Instant>,
    ended: Option<Instant>,
}

/// One move: when it was sent, how long its answer took, what it said.
struct Step {
    sent: Instant,
    took: Duration,
    text: String,
    from: String,
    to: String,
}

struct Cluster {
    redis: RedisServer,
    keys: TempKeys,
    dir: Directory,
    a: Proc,
    _b: Proc,
    c: Proc,
    gate: Proc,
}

impl Cluster {
    async fn start() -> anyhow::Result<Cluster> {
        let redis = RedisServer::start()?;
        let keys = TempKeys::generate()?;
        let extra = ["--lease-ttl-ms", LEASE_MS];
        let a = start_keyed_world("shard-a", &redis.url, &[MOVING], keys.path(), None, &extra)?;
        let b = start_keyed_world("shard-b", &redis.url, &B_ZONES, keys.path(), None, &extra)?;
        let c = start_keyed_world("shard-c", &redis.url, &C_ZONES, keys.path(), None, &extra)?;
        let gate = start_keyed_gate(&redis.url, keys.path(), &["--login-ip-burst", "1000"])?;
        let dir = Directory::connect(&redis.url).await?;
        for zone in [MOVING].iter().chain(&B_ZONES).chain(&C_ZONES) {
            wait_served(&dir, zone, |_| true).await?;
        }
        Ok(Cluster {
            redis,
            keys,
            dir,
            a,
            _b: b,
            c,
            gate,
        })
    }

    fn restart_a(&mut self, kill: bool) -> anyhow::Result<()> {
        let addr = self.a.addr.clone();
        if kill {
            self.a.kill();
        }
        self.a = start_keyed_world(
            "shard-a",
            &self.redis.url,
            &[MOVING],
            self.keys.path(),
            Some(&addr),
            &["--lease-ttl-ms", LEASE_MS],
        )?;
        Ok(())
    }
}

/// Wait until `zone` has a live owner satisfying `owner`; its name.
async fn wait_served(
    dir: &Directory,
    zone: &str,
    owner: impl Fn(&str) -> bool,
) -> anyhow::Result<String> {
    let until = Instant::now() + WAIT;
    loop {
        if let Some(info) = dir.shard_for_zone(zone).await?
            && owner(&info.id)
        {
            return Ok(info.id);
        }
        anyhow::ensure!(Instant::now() < until, "{zone} never served");
        tokio::time::sleep(POLL).await;
    }
}

/// Every room of the moving zone with an exit out of it, and the room on
/// the other side: `(inside, out, outside, in)`.
fn boundaries() -> Vec<(String, String, String, String)> {
    let prefix = format!("{MOVING}:");
    let mut out = Vec::new();
    for (room, ex) in exits() {
        if !room.starts_with(&prefix) {
            continue;
        }
        for (d, to) in ex {
            if !to.starts_with(&prefix) {
                out.push((room.clone(), d.clone(), to, opposite(&d).to_string()));
            }
        }
    }
    out.sort();
    out
}

/// One walker: log in, go to `home`, then cross to `across` and back until
/// told to stop, journaling between steps. Returns its steps, the lines
/// it journaled, and the bot.
async fn walker(
    gate: String,
    name: String,
    home: String,
    there: (String, String),
    back: String,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<(Vec<Step>, Vec<String>, Bot)> {
    let mut bot = Bot::create_at(&gate, &name, PASSWORD).await?;
    bot.set_timeout(Duration::from_secs(60));
    for d in path(START, |r| r == home) {
        bot.command(&d).await?;
    }
    let (_, room, _) = bot.where_().await?;
    anyhow::ensure!(room == home, "{name} at {room}, not {home}");
    let (dir_out, across) = there;
    let mut steps = Vec::new();
    let mut written = Vec::new();
    let mut at = home.clone();
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        let (dir, to) = if at == home {
            (dir_out.clone(), across.clone())
        } else {
            (back.clone(), home.clone())
        };
        let sent = Instant::now();
        let text = bot.command(&dir).await?;
        let took = sent.elapsed();
        let (_, room, _) = bot.where_().await?;
        steps.push(Step {
            sent,
            took,
            text,
            from: at.clone(),
            to: to.clone(),
        });
        at = room;
        let line = format!("{} {n}", name.to_lowercase());
        let noted = bot.command(&format!("journal {line}")).await?;
        anyhow::ensure!(noted.contains("Noted."), "{name}: {noted:?}");
        written.push(line);
        n += 1;
        tokio::time::sleep(PACE).await;
    }
    Ok((steps, written, bot))
}

/// Run walkers on both sides of every boundary of the moving zone, apply
/// `fault` after a calm spell, walk on, then check every step and journal.
async fn walk_through<F, Fut>(tag: &str, fault: F) -> anyhow::Result<()>
where
    F: FnOnce(Arc<Mutex<Cluster>>, Arc<Mutex<Window>>) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let cluster = Arc::new(Mutex::new(Cluster::start().await?));
    let gate = cluster.lock().await.gate.addr.clone();
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for (i, (inside, out, outside, back_in)) in boundaries().into_iter().enumerate() {
        for (side, (home, there, back)) in [
            (
                inside.clone(),
                (out.clone(), outside.clone()),
                back_in.clone(),
            ),
            (
                outside.clone(),
                (back_in.clone(), inside.clone()),
                out.clone(),
            ),
        ]
        .into_iter()
        .enumerate()
        {
            let name = format!(
                "{tag}{}{}",
                (b'a' + i as u8) as char,
                (b'a' + side as u8) as char
            );
            tasks.push(tokio::spawn(walker(
                gate.clone(),
                name,
                home,
                there,
                back,
                stop.clone(),
            )));
        }
    }
    tokio::time::sleep(CALM).await;
    let window = Arc::new(Mutex::new(Window::default()));
    fault(cluster.clone(), window.clone()).await?;
    tokio::time::sleep(CALM).await;
    stop.store(true, Ordering::Relaxed);

    let map = WorldMap::starter();
    let (fault_start, fault_end) = {
        let w = window.lock().await;
        (
            w.started.context("fault started")?,
            w.ended.context("fault ended")?,
        )
    };
    let mut problems = Vec::new();
    for task in tasks {
        let (steps, written, mut bot) = task.await??;
        anyhow::ensure!(!bot.is_closed(), "{}: socket closed", bot.name);
        for s in &steps {
            let arrived = s
                .text
                .lines()
                .any(|l| map.room(&s.to).is_some_and(|r| l.trim() == r.name));
            let refused = s.text.lines().any(|l| l.starts_with(REFUSED));
            if !arrived && !refused {
                problems.push(format!(
                    "{}: {} -> {} unanswered: {:?}",
                    bot.name, s.from, s.to, s.text
                ));
            }
            // 2 s beyond the fault in progress when the step was sent.
            let allowed = if s.sent < fault_end && s.sent + s.took > fault_start {
                fault_end.saturating_duration_since(s.sent) + BOUND + SLACK
            } else {
                BOUND + SLACK
            };
            if s.took > allowed {
                problems.push(format!(
                    "{}: {} -> {} took {:?} (allowed {allowed:?})",
                    bot.name, s.from, s.to, s.took
                ));
            }
        }
        let journal = bot.journal_list().await?;
        if journal != written {
            problems.push(format!(
                "{}: journal {journal:?} != written {written:?}",
                bot.name
            ));
        }
        anyhow::ensure!(steps.len() >= 4, "{}: only {} steps", bot.name, steps.len());
    }
    let c = cluster.lock().await;
    anyhow::ensure!(
        problems.is_empty(),
        "{}\n--- a:\n{}\n--- c:\n{}",
        problems.join("\n"),
        c.a.plain_log(),
        c.c.plain_log()
    );
    Ok(())
}

/// SIGTERM the moving zone's shard (the zone is adopted by a peer while
/// walkers cross into and out of it), then start it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn walkers_cross_a_zone_drained_and_its_shard_restarted() -> anyhow::Result<()> {
    walk_through("Drn", |cluster, window| async move {
        let mut c = cluster.lock().await;
        window.lock().await.started = Some(Instant::now());
        let status = c.a.stop_with(libc::SIGTERM, WAIT)?;
        anyhow::ensure!(status.success(), "{}", c.a.plain_log());
        wait_served(&c.dir, MOVING, |o| o != "shard-a").await?;
        c.restart_a(false)?;
        window.lock().await.ended = Some(Instant::now());
        Ok(())
    })
    .await
}

/// An operator moves the zone to another shard while walkers cross its
/// boundaries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn walkers_cross_a_zone_being_transferred() -> anyhow::Result<()> {
    walk_through("Trn", |cluster, window| async move {
        let c = cluster.lock().await;
        window.lock().await.started = Some(Instant::now());
        let url = c.redis.url.clone();
        let out = tokio::task::block_in_place(|| {
            telosctl(&url, &["transfer", MOVING, "--to", "shard-c", "--wait"])
        })?;
        anyhow::ensure!(out.success(), "{}{}", out.stdout, out.stderr);
        wait_served(&c.dir, MOVING, |o| o == "shard-c").await?;
        window.lock().await.ended = Some(Instant::now());
        Ok(())
    })
    .await
}

/// The moving zone's shard is SIGKILLed and restarted while walkers cross
/// its boundaries: players inside are resumed by the gate, walks into it
/// are refused or land once it is served again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn walkers_cross_a_zone_whose_shard_crashes() -> anyhow::Result<()> {
    walk_through("Crs", |cluster, window| async move {
        let mut c = cluster.lock().await;
        window.lock().await.started = Some(Instant::now());
        c.restart_a(true)?;
        // Served again by the restarted shard (same id: it takes its own
        // live lease back).
        c.a.wait_log("zone lease acquired", WAIT).await?;
        window.lock().await.ended = Some(Instant::now());
        Ok(())
    })
    .await
}
