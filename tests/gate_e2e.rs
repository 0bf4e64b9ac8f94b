//! End to end through the gate: a real `redis-server`, two real
//! `telos-world` shards splitting the starter zones (keyed, so walks cross
//! shards) and a real `telos-gate`, driven by [`Bot`]s over TCP the way a
//! player's client would.
//!
//! - many players in one room hear every `say` exactly once;
//! - `who` lists players on both shards;
//! - the journal survives `quit` and a new login;
//! - a shard SIGKILLed and restarted on its address under journaling
//!   players: no socket closes, and every journal line is kept exactly once,
//!   in order;
//! - hostile clients (telnet garbage, NULs, a mebibyte line, a 10 000-line
//!   burst, half-open and never-reading connections) leave the stack up and
//!   another player's commands prompt;
//! - a real `telnet` client, driven by `expect`, logs in and walks.

use std::future::Future;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use telos_testkit::RedisServer;
use telos_testkit::bot::{Bot, MARKER_WORDS};
use telos_testkit::cli::run_to_exit;
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{Proc, start_keyed_gate, start_keyed_world};
use telos_testkit::wait::until_count;
use telos_testkit::world::{path_to_zone, start_room, starter_zones, walk, zone_of};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::Instant;

const PASSWORD: &str = "correct horse";

/// Polled conditions (presence in `who`, a log line) settle within a few
/// heartbeat periods; this only bounds a broken build.
const SETTLE: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(100);

/// Letters-only player names (the contract allows nothing else).
const NAMES: [&str; 16] = [
    "Alfa", "Bravo", "Charlie", "Delta", "Echo", "Foxtrot", "Golf", "Hotel", "India", "Juliett",
    "Kilo", "Lima", "Mike", "November", "Oscar", "Papa",
];

/// Redis, shards `shard-a` and `shard-b` splitting the starter zones (the
/// start room's zone on `a`), and a gate.
struct Cluster {
    // Field order is drop order: the gate first, Redis last.
    gate: Proc,
    a: Proc,
    b: Proc,
    zones_a: Vec<String>,
    zones_b: Vec<String>,
    keys: TempKeys,
    redis: RedisServer,
}

/// The shards run with no flags beyond their keys.
const NO_FLAGS: &[&str] = &[];

impl Cluster {
    fn start() -> anyhow::Result<Cluster> {
        let redis = RedisServer::start()?;
        let keys = TempKeys::generate()?;
        let zones = starter_zones();
        let (first, second) = zones.split_at(zones.len().div_ceil(2));
        let (zones_a, zones_b) = (first.to_vec(), second.to_vec());
        let start_zone = zone_of(&start_room()).to_string();
        assert!(zones_a.contains(&start_zone), "{zones_a:?}");
        let a = start_keyed_world("shard-a", &redis.url, &zones_a, keys.path(), None, NO_FLAGS)?;
        let b = start_keyed_world("shard-b", &redis.url, &zones_b, keys.path(), None, NO_FLAGS)?;
        let gate = start_keyed_gate(&redis.url, keys.path(), &[])?;
        Ok(Cluster {
            gate,
            a,
            b,
            zones_a,
            zones_b,
            keys,
            redis,
        })
    }

    fn addr(&self) -> &str {
        &self.gate.addr
    }

    /// The zone of `shard-b` nearest the start room, and the walk there.
    fn route_to_b(&self) -> (String, Vec<String>) {
        let start = start_room();
        self.zones_b
            .iter()
            .map(|z| (z.clone(), path_to_zone(&start, z)))
            .min_by_key(|(_, path)| path.len())
            .expect("shard-b has zones")
    }

    fn all_running(&mut self) -> bool {
        [&mut self.gate, &mut self.a, &mut self.b]
            .iter_mut()
            .all(|p| matches!(p.child.try_wait(), Ok(None)))
    }
}

/// Run `f` on every item concurrently (one task each); results in order.
async fn each<T, R, F, Fut>(items: Vec<T>, f: F) -> anyhow::Result<Vec<R>>
where
    T: Send + 'static,
    R: Send + 'static,
    F: Fn(T) -> Fut,
    Fut: Future<Output = anyhow::Result<R>> + Send + 'static,
{
    let tasks: Vec<_> = items.into_iter().map(|t| tokio::spawn(f(t))).collect();
    let mut out = Vec::with_capacity(tasks.len());
    for task in tasks {
        out.push(task.await??);
    }
    Ok(out)
}

/// Log `n` new characters in, concurrently.
async fn create_bots(addr: &str, n: usize) -> anyhow::Result<Vec<Bot>> {
    let addr = addr.to_string();
    each(NAMES[..n].to_vec(), move |name| {
        let addr = addr.clone();
        async move { Bot::create_at(&addr, name, PASSWORD).await }
    })
    .await
}

/// Walk `dirs`, each step answered with a room (not "You can't go").
async fn walk_bot(bot: &mut Bot, dirs: &[String]) -> anyhow::Result<()> {
    for dir in dirs {
        let out = bot.command(dir).await?;
        anyhow::ensure!(
            !out.contains("You can't go that way"),
            "{}: {dir}: {out}",
            bot.name
        );
    }
    Ok(())
}

/// `who` from `bot`, parsed: the names listed, and the count line. A
/// player is not shown which shard hosts whom.
async fn who(bot: &mut Bot) -> anyhow::Result<(Vec<String>, usize)> {
    let text = bot.command("who").await?;
    let mut entries = Vec::new();
    let mut count = None;
    for line in text.lines() {
        if let Some(n) = line
            .strip_suffix(" players online")
            .or_else(|| line.strip_suffix(" player online"))
        {
            count = Some(n.trim().parse()?);
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        match words[..] {
            [name, tier] if tier.starts_with('[') && tier.ends_with(']') => {
                entries.push(name.to_string());
            }
            [_, _, shard, ..] => anyhow::bail!("a player was shown a shard ({shard}): {text:?}"),
            _ => {}
        }
    }
    let count = count.ok_or_else(|| anyhow::anyhow!("no count line in {text:?}"))?;
    Ok((entries, count))
}

/// A journal entry's answer, among whatever else the room said meanwhile
/// (a wandering mob, a player arriving).
fn assert_noted(out: &str) {
    assert!(out.lines().any(|l| l == "Noted."), "{out:?}");
}

#[test]
fn marker_words_are_command_words() {
    // The bot's marker relies on the world refusing these as alias names.
    for word in MARKER_WORDS {
        assert!(
            telos_world::game::command::is_command_word(word),
            "{word} is not a command word; the bot's marker would set an alias"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twelve_players_in_one_room_hear_every_say_exactly_once() -> anyhow::Result<()> {
    let c = Cluster::start()?;
    let bots = create_bots(c.addr(), 12).await?;
    let target = walk(&start_room(), &["north".to_string()]);
    // Everyone walks into the same room first, then everyone talks at once.
    let bots = each(bots, |mut bot| async move {
        walk_bot(&mut bot, &["north".to_string()]).await?;
        Ok(bot)
    })
    .await?;
    let mut bots = bots;
    for bot in &mut bots {
        let (_, room, shard) = bot.where_().await?;
        assert_eq!(
            (room.as_str(), shard.as_str()),
            (target.as_str(), "shard-a")
        );
    }
    let said = |name: &str| format!("hello from {name}, all of you!");
    let bots = each(bots, move |mut bot| async move {
        let text = said(&bot.name);
        let out = bot.command(&format!("say {text}")).await?;
        anyhow::ensure!(out.contains(&format!("You say, '{text}'")), "{out}");
        Ok(bot)
    })
    .await?;
    // Every say is applied now. Deliveries to a player are queued in order
    // with its own output, so one more marker each brings in all of them.
    let mut bots = bots;
    for bot in &mut bots {
        bot.sync().await?;
    }
    let names: Vec<String> = bots.iter().map(|b| b.name.clone()).collect();
    for bot in &bots {
        let transcript = bot.transcript();
        for other in &names {
            let (line, want) = if *other == bot.name {
                (format!("You say, '{}'", said(other)), 1)
            } else {
                (format!("{other} says, '{}'", said(other)), 1)
            };
            let seen = transcript.lines().filter(|l| *l == line).count();
            assert_eq!(seen, want, "{} saw {line:?} {seen} times", bot.name);
        }
        let own = format!("{} says, ", bot.name);
        assert!(
            !transcript.lines().any(|l| l.starts_with(&own)),
            "{} heard itself in the third person",
            bot.name
        );
        assert!(!bot.is_closed());
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn who_lists_players_on_both_shards() -> anyhow::Result<()> {
    let c = Cluster::start()?;
    let (zone_b, route) = c.route_to_b();
    let bots = create_bots(c.addr(), 6).await?;
    // The second half crosses into shard-b.
    let mut bots = each(
        bots.into_iter().enumerate().collect(),
        move |(i, mut bot)| {
            let route = route.clone();
            async move {
                if i >= 3 {
                    walk_bot(&mut bot, &route).await?;
                }
                Ok(bot)
            }
        },
    )
    .await?;
    let start_zone = zone_of(&start_room()).to_string();
    let mut expected = Vec::new();
    for bot in &mut bots {
        let (zone, _, shard) = bot.where_().await?;
        let want = if expected.len() >= 3 {
            (zone_b.as_str(), "shard-b")
        } else {
            (start_zone.as_str(), "shard-a")
        };
        assert_eq!((zone.as_str(), shard.as_str()), want, "{}", bot.name);
        expected.push(bot.name.clone());
    }
    expected.sort();
    // Presence is published asynchronously; poll until both viewers agree.
    let deadline = Instant::now() + SETTLE;
    for viewer in [0, 5] {
        loop {
            let (mut entries, count) = who(&mut bots[viewer]).await?;
            entries.sort();
            if entries == expected && count == expected.len() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "who from {} never listed {expected:?}; last: {entries:?}, {count} online",
                bots[viewer].name
            );
            tokio::time::sleep(POLL).await;
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_journal_survives_quit_and_a_new_login() -> anyhow::Result<()> {
    let c = Cluster::start()?;
    let (zone_b, route) = c.route_to_b();
    let mut bot = Bot::create_at(c.addr(), "Scribe", PASSWORD).await?;
    let lines = [
        "first light over the square",
        "a line with: colons, 'quotes' and  two  spaces",
        "ünïcödé ✓",
    ];
    for line in &lines[..2] {
        assert_noted(&bot.command(&format!("journal {line}")).await?);
    }
    // Across the shard boundary before the last entry and the quit.
    walk_bot(&mut bot, &route).await?;
    assert_noted(&bot.command(&format!("journal {}", lines[2])).await?);
    assert_eq!(bot.journal_list().await?, lines);
    let before = bot.where_().await?;
    assert_eq!(
        (before.0.as_str(), before.2.as_str()),
        (zone_b.as_str(), "shard-b")
    );
    bot.quit().await?;
    assert!(bot.is_closed());
    assert!(
        bot.transcript().contains("Goodbye."),
        "{}",
        bot.transcript()
    );

    // A wrong password reads like any failure and leaves the connection
    // at the prompt.
    let mut again = Bot::open(c.addr()).await?;
    let reply = again.login("connect", "scribe", "wrong password").await?;
    assert!(
        matches!(&reply, telos_testkit::bot::LoginReply::Refused(l) if l.starts_with("Login failed")),
        "{reply:?}"
    );
    again.connect("scribe", PASSWORD).await?;
    assert_eq!(again.name, "Scribe");
    assert_eq!(again.journal_list().await?, lines);
    assert_eq!(again.where_().await?, before);
    again.quit().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_killed_and_restarted_keeps_sockets_and_every_journal_line_once()
-> anyhow::Result<()> {
    /// Lines each bot writes (and syncs) before journaling goes on in the
    /// background, while the kill lands, and after the restart.
    const BEFORE: usize = 20;
    const DURING: usize = 60;
    const AFTER: usize = 10;
    /// The kill waits until every bot is this far into `DURING`.
    const KILL_AFTER: usize = 10;
    /// Pace of the journaling: spreads `DURING` over ~1.5 s, so the kill
    /// lands while lines are in flight.
    const PACE: Duration = Duration::from_millis(25);
    /// A bot rides out the outage: resume backoff plus the shard's start.
    const RIDE_OUT: Duration = Duration::from_secs(60);

    let mut c = Cluster::start()?;
    let (_, route) = c.route_to_b();
    let bots = create_bots(c.addr(), 8).await?;
    let players = bots.len();
    // Lines sent in the `DURING` phase, all bots together.
    let progress = Arc::new(AtomicUsize::new(0));
    let (restarted_tx, restarted) = tokio::sync::watch::channel(false);

    let tasks: Vec<_> = bots
        .into_iter()
        .enumerate()
        .map(|(i, mut bot)| {
            let (route, progress, mut restarted) =
                (route.clone(), progress.clone(), restarted.clone());
            tokio::spawn(async move {
                bot.set_timeout(RIDE_OUT);
                // Half the players stand on the shard that survives.
                if i % 2 == 1 {
                    walk_bot(&mut bot, &route).await?;
                }
                let (_, _, home) = bot.where_().await?;
                let mut written = Vec::new();
                let key = bot.name.to_lowercase();
                let line = |n: usize| format!("{key} entry {n}");
                for n in 0..BEFORE {
                    written.push(line(n));
                }
                for text in &written {
                    bot.send(&format!("journal {text}")).await?;
                }
                bot.sync().await?;
                for n in BEFORE..BEFORE + DURING {
                    let text = line(n);
                    bot.send(&format!("journal {text}")).await?;
                    written.push(text);
                    progress.fetch_add(1, Ordering::Relaxed);
                    if n % 10 == 9 {
                        bot.sync().await?;
                    }
                    tokio::time::sleep(PACE).await;
                }
                restarted.wait_for(|r| *r).await?;
                for n in BEFORE + DURING..BEFORE + DURING + AFTER {
                    let text = line(n);
                    bot.send(&format!("journal {text}")).await?;
                    written.push(text);
                }
                let journal = bot.journal_list().await?;
                anyhow::Ok((bot, home, written, journal))
            })
        })
        .collect();

    // Bounded by progress (a line sent resets the clock), not by a total
    // a loaded machine can exceed.
    until_count(
        "the bots getting going",
        players * KILL_AFTER,
        SETTLE,
        || progress.load(Ordering::Relaxed),
    )
    .await?;
    let killed_addr = c.a.addr.clone();
    c.a.kill();
    let (url, keys, zones) = (
        c.redis.url.clone(),
        c.keys.path().to_path_buf(),
        c.zones_a.clone(),
    );
    let addr = killed_addr.clone();
    c.a = tokio::task::spawn_blocking(move || {
        start_keyed_world("shard-a", &url, &zones, &keys, Some(&addr), NO_FLAGS)
    })
    .await??;
    assert_eq!(c.a.addr, killed_addr);
    restarted_tx.send(true)?;

    let mut on_a = 0;
    for task in tasks {
        let (bot, home, written, journal) = task.await??;
        assert!(!bot.is_closed(), "{}: socket closed", bot.name);
        assert_eq!(
            journal, written,
            "{} (on {home}): the journal must hold every line once, in order",
            bot.name
        );
        if home == "shard-a" {
            on_a += 1;
            assert!(
                bot.transcript().contains("The world shimmers"),
                "{}: the kill should have been noticed",
                bot.name
            );
        }
    }
    assert_eq!(on_a, 4);
    assert!(c.all_running());
    Ok(())
}

/// Deterministic bytes heavy in telnet commands (IAC, SB, SE, WILL...),
/// including unterminated subnegotiations and long runs without a line end.
fn telnet_garbage(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // About one line end per 64 bytes: before login every garbage
            // line earns a usage hint, and a burst of thousands of hints
            // would test the output bound instead of the parser.
            match x % 64 {
                0..=20 => 240 + (x >> 8) as u8 % 16,
                21 => b'\n',
                _ => (x >> 16) as u8,
            }
        })
        .collect()
}

/// What the hostile clients leave behind: connections to keep open until
/// the witness is done, and what they measured.
#[derive(Default)]
struct Hostile {
    keep_streams: Vec<TcpStream>,
    keep_bots: Vec<Bot>,
    notes: Vec<String>,
}

/// Telnet garbage, then a normal login on the same connection.
async fn garbage_client(addr: String) -> anyhow::Result<Hostile> {
    const IAC: u8 = 255;
    const SE: u8 = 240;
    let mut bot = Bot::open(&addr).await?;
    bot.send_raw(&telnet_garbage(64 * 1024)).await?;
    // Whatever state the garbage left the telnet parser in (inside a
    // subnegotiation, after a lone IAC), two `IAC SE` bring it back to data.
    bot.send_raw(&[IAC, SE, IAC, SE, b'\r', b'\n']).await?;
    bot.send("connect zz").await?;
    bot.read_until(|l| l.starts_with("Names are"), SETTLE)
        .await?;
    bot.create("Garbo", PASSWORD).await?;
    let (_, _, shard) = bot.where_().await?;
    anyhow::ensure!(shard == "shard-a", "{shard}");
    Ok(Hostile {
        keep_bots: vec![bot],
        ..Hostile::default()
    })
}

/// NUL bytes inside the login line and a command: stripped, not fatal.
async fn nul_client(addr: String) -> anyhow::Result<Hostile> {
    let mut bot = Bot::open(&addr).await?;
    bot.send_raw(b"\0\0cre\0ate Nully corr\0ect horse\0\r\n")
        .await?;
    let lines = bot
        .read_until(
            |l| l.starts_with("Welcome, ") || l.starts_with("Login failed"),
            SETTLE,
        )
        .await?;
    let last = lines.last().expect("a line");
    anyhow::ensure!(last == "Welcome, Nully.", "{last}");
    bot.name = "Nully".into();
    bot.sync().await?;
    bot.send_raw(b"jour\0nal a\0b\0\r\n").await?;
    let journal = bot.journal_list().await?;
    anyhow::ensure!(journal == ["ab"], "{journal:?}");
    Ok(Hostile {
        keep_bots: vec![bot],
        ..Hostile::default()
    })
}

/// A mebibyte without a line end: refused once, the connection carries on.
async fn mebibyte_client(addr: String) -> anyhow::Result<Hostile> {
    let mut bot = Bot::create_at(&addr, "Biggs", PASSWORD).await?;
    bot.send_raw(&vec![b'x'; 1 << 20]).await?;
    bot.read_until(|l| l.starts_with("Line too long"), SETTLE)
        .await?;
    bot.send_raw(b"\r\n").await?;
    let (_, room, _) = bot.where_().await?;
    anyhow::ensure!(room == start_room(), "{room}");
    let notices = bot
        .transcript()
        .lines()
        .filter(|l| l.starts_with("Line too long"))
        .count();
    anyhow::ensure!(notices == 1, "{notices} notices");
    Ok(Hostile {
        keep_bots: vec![bot],
        ..Hostile::default()
    })
}

/// 10 000 journal lines in one write: every one applied exactly once.
async fn flood_client(addr: String, lines: usize, keep: usize) -> anyhow::Result<Hostile> {
    let mut bot = Bot::create_at(&addr, "Flood", PASSWORD).await?;
    bot.set_timeout(Duration::from_secs(120));
    let started = Instant::now();
    let burst: String = (0..lines)
        .map(|i| format!("journal flood {i}\r\n"))
        .collect();
    bot.send_raw(burst.as_bytes()).await?;
    bot.sync().await?;
    let took = started.elapsed();
    let journal = bot.journal_list().await?;
    let expected: Vec<String> = (lines - keep..lines)
        .map(|i| format!("flood {i}"))
        .collect();
    anyhow::ensure!(
        journal == expected,
        "the journal is not the last {keep} lines"
    );
    Ok(Hostile {
        keep_bots: vec![bot],
        notes: vec![format!("{lines} lines applied in {took:?}")],
        ..Hostile::default()
    })
}

/// Half a line, never finished: before login, after login, and with the
/// write side shut.
async fn half_open_clients(addr: String) -> anyhow::Result<Hostile> {
    let mut pre = TcpStream::connect(&addr).await?;
    pre.write_all(b"create Halfway corr").await?;
    let mut shut = TcpStream::connect(&addr).await?;
    shut.write_all(b"conn").await?;
    shut.shutdown().await?;
    let mut bot = Bot::create_at(&addr, "Halfling", PASSWORD).await?;
    bot.send_raw(b"jour").await?;
    Ok(Hostile {
        keep_streams: vec![pre, shut],
        keep_bots: vec![bot],
        ..Hostile::default()
    })
}

/// Logs in, asks for lots of output and never reads: the gate must cut it
/// off as a slow client instead of queueing without bound.
async fn never_reading_client(addr: String) -> anyhow::Result<Hostile> {
    let socket = TcpSocket::new_v4()?;
    socket.set_recv_buffer_size(4096)?;
    let mut stream = socket.connect(addr.parse()?).await?;
    let mut lines = format!("create Sloth {PASSWORD}\r\n");
    lines.push_str(&"help\r\n".repeat(4000));
    tokio::time::timeout(SETTLE, stream.write_all(lines.as_bytes())).await??;
    Ok(Hostile {
        keep_streams: vec![stream],
        ..Hostile::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_clients_leave_the_stack_up_and_others_unaffected() -> anyhow::Result<()> {
    /// A prompt answer under all of this, on a loaded 2-core machine.
    const PROMPT: Duration = Duration::from_secs(3);
    /// Bound on the whole hostile phase.
    const HOSTILE_DEADLINE: Duration = Duration::from_secs(150);
    const FLOOD_LINES: usize = 10_000;
    /// The journal keeps the last 1000 entries (CONTRACT.md).
    const JOURNAL_KEEP: usize = 1000;

    let mut c = Cluster::start()?;
    let addr = c.addr().to_string();
    let mut witness = Bot::create_at(&addr, "Witness", PASSWORD).await?;
    witness.set_timeout(PROMPT * 5);

    let tasks = vec![
        ("garbage", tokio::spawn(garbage_client(addr.clone()))),
        ("nul", tokio::spawn(nul_client(addr.clone()))),
        ("mebibyte", tokio::spawn(mebibyte_client(addr.clone()))),
        (
            "flood",
            tokio::spawn(flood_client(addr.clone(), FLOOD_LINES, JOURNAL_KEEP)),
        ),
        ("half-open", tokio::spawn(half_open_clients(addr.clone()))),
        (
            "never-reading",
            tokio::spawn(never_reading_client(addr.clone())),
        ),
    ];

    // The witness plays in the same zone the whole time.
    let deadline = Instant::now() + HOSTILE_DEADLINE;
    let mut worst = Duration::ZERO;
    let mut asked = 0u32;
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    while !tasks.iter().all(|(_, t)| t.is_finished()) {
        assert!(Instant::now() < deadline, "hostile clients still running");
        tick.tick().await;
        let t = Instant::now();
        let (_, room, _) = witness.where_().await?;
        worst = worst.max(t.elapsed());
        asked += 1;
        assert_eq!(room, start_room());
    }
    let mut kept = Vec::new();
    for (what, task) in tasks {
        let h = task
            .await?
            .map_err(|e| e.context(format!("{what} client")))?;
        for note in &h.notes {
            eprintln!("{what}: {note}");
        }
        kept.push(h);
    }
    eprintln!("witness: {asked} commands, slowest {worst:?}");
    assert!(asked > 0);
    assert!(
        worst <= PROMPT,
        "the witness waited {worst:?} for an answer"
    );

    // The never-reading client was cut off by the gate, with a notice.
    let deadline = Instant::now() + SETTLE;
    while !c.gate.log_text().contains("slow client disconnected") {
        assert!(
            Instant::now() < deadline,
            "the slow client was never cut off"
        );
        tokio::time::sleep(POLL).await;
    }
    let mut sloth = kept
        .last_mut()
        .and_then(|h| h.keep_streams.pop())
        .expect("the never-reading client's stream (the last task)");
    // The socket ends: with the notice, or with a reset when the gate
    // closed while the client's unread input was still queued (TCP then
    // drops what was in flight). Either way it is closed, not left hanging.
    let mut seen = Vec::new();
    let end = tokio::time::timeout(SETTLE, sloth.read_to_end(&mut seen)).await?;
    let seen = String::from_utf8_lossy(&seen);
    match end {
        Ok(_) => assert!(
            seen.contains("slow client"),
            "{}",
            &seen[seen.len().saturating_sub(500)..]
        ),
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
    }

    // Everything is still up and still plays, old connections and new.
    assert!(c.all_running());
    for h in &mut kept {
        for bot in &mut h.keep_bots {
            if bot.name != "Halfling" {
                bot.where_().await?;
            }
        }
    }
    assert_noted(&witness.command("journal still here").await?);
    let mut late = Bot::create_at(&addr, "Latecomer", PASSWORD).await?;
    let (_, room, _) = late.where_().await?;
    assert_eq!(room, start_room());
    drop(kept);
    Ok(())
}

/// A password only ever typed at a prompt with echo off.
const HIDDEN: &str = "quiet-lantern-4711";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_telnet_client_logs_in_and_walks() -> anyhow::Result<()> {
    for tool in ["/usr/bin/telnet", "/usr/bin/expect"] {
        assert!(
            Path::new(tool).exists(),
            "{tool} is missing; run scripts/ensure-tools (scripts/test does)"
        );
    }
    let c = Cluster::start()?;
    let port = c.addr().rsplit(':').next().expect("port").to_string();
    let next_room = walk(&start_room(), &["north".to_string()]);
    // Two sessions: `create` on one line, then `connect` with the password
    // prompt (echo off via telnet ECHO). Each step fails the script on
    // timeout with a message naming the step.
    let script = format!(
        r#"
set timeout 20
proc step {{what pattern}} {{
    expect {{
        -ex $pattern {{}}
        timeout {{ puts "\nTIMEOUT waiting for $what"; exit 2 }}
        eof {{ puts "\nEOF waiting for $what"; exit 3 }}
    }}
}}
spawn /usr/bin/telnet 127.0.0.1 {port}
step banner "create <name> <password>"
send "create Telly {PASSWORD}\r"
step welcome "Welcome, Telly"
send "north\r"
send "where\r"
step where "room={next_room} shard=shard-a"
send "quit\r"
expect {{
    eof {{}}
    timeout {{ puts "\nTIMEOUT waiting for the close"; exit 2 }}
}}
spawn /usr/bin/telnet 127.0.0.1 {port}
step banner "create <name> <password>"
send "connect Telly\r"
step prompt "Password: "
send "{PASSWORD}\r"
step welcome "Welcome, Telly"
send "where\r"
step where "room={next_room} shard=shard-a"
send "quit\r"
expect {{
    eof {{}}
    timeout {{ puts "\nTIMEOUT waiting for the close"; exit 2 }}
}}
spawn /usr/bin/telnet 127.0.0.1 {port}
step banner "create <name> <password>"
send "create Hushed\r"
step prompt "Password: "
sleep 0.5
send "{HIDDEN}\r"
step again "Password again: "
sleep 0.5
send "{HIDDEN}\r"
step welcome "Welcome, Hushed"
send "quit\r"
expect {{
    eof {{}}
    timeout {{ puts "\nTIMEOUT waiting for the close"; exit 2 }}
}}
spawn /usr/bin/telnet 127.0.0.1 {port}
step banner "create <name> <password>"
send "connect Hushed\r"
step prompt "Password: "
sleep 0.5
send "{HIDDEN}\r"
step welcome "Welcome, Hushed"
send "quit\r"
expect {{
    eof {{}}
    timeout {{ puts "\nTIMEOUT waiting for the close"; exit 2 }}
}}
puts "\nSCRIPT DONE"
"#
    );
    let path = std::env::temp_dir().join(format!(
        "telos-telnet-{}-{}.exp",
        std::process::id(),
        telos_testkit::unique()
    ));
    std::fs::write(&path, script)?;
    let mut cmd = Command::new("/usr/bin/expect");
    cmd.arg("-f").arg(&path);
    let run =
        tokio::task::spawn_blocking(move || run_to_exit("expect", cmd, Duration::from_secs(90)))
            .await?;
    let _ = std::fs::remove_file(&path);
    let out = run?;
    let printed = &out.stdout;
    assert!(
        out.success(),
        "expect failed ({}):\n{printed}\n{}",
        out.status,
        out.stderr
    );
    for want in [
        "Connected to 127.0.0.1",
        "=== Telos ===",
        "Welcome, Telly.",
        &format!(
            "where: zone={} room={next_room} shard=shard-a",
            zone_of(&next_room)
        ),
        "Password: ",
        "Goodbye.",
        "Connection closed by foreign host.",
        "SCRIPT DONE",
    ] {
        assert!(
            printed.contains(want),
            "telnet printed no {want:?}:\n{printed}"
        );
    }
    assert_eq!(printed.matches("Welcome, Telly.").count(), 2, "{printed}");
    // Typed only at prompts with echo off (RFC 1143: netkit telnet agrees
    // to WILL ECHO): never on the screen, through both of `create`'s
    // prompts and `connect`'s.
    assert!(printed.contains("Password again: "), "{printed}");
    assert_eq!(printed.matches("Welcome, Hushed.").count(), 2, "{printed}");
    assert!(
        !printed.contains(HIDDEN),
        "a password was echoed:\n{printed}"
    );
    // Negotiation bytes never reach the terminal as text.
    assert!(!printed.contains('\u{fffd}'), "{printed}");
    Ok(())
}
