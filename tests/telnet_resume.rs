//! A telnet client's own drop, end to end over raw sockets with a real
//! `telos-gate` (`--telnet-resume-grace-secs`) and a real keyed shard: the
//! player is shown a resume token at login; their connection drops
//! mid-session; what the room says meanwhile is kept; a new connection
//! types `resume <token>` and carries on in the same session (the journal
//! holds every line once, in order); a token is single-use; a player who
//! missed more than the replay bound gets a notice and a fresh `look`; a
//! resume takes over a connection that still looks alive; after `quit` or
//! the grace period the token resumes nothing.

use std::time::Duration;

use anyhow::{Context, bail};
use telos_testkit::process::Proc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

mod support;
use support::gate_world::GateWorld;

/// Bounds a hang waiting for the next output (not a performance claim).
const STEP: Duration = Duration::from_secs(20);
const REFUSED: &str = "That resume token resumes nothing";
/// What a token presented for a session in play gets (`grace::LIVE_REFUSED`).
const LIVE_REFUSED: &str = "That session is in play on a live connection";
/// Logged once the gate has seen the client's connection close: from then
/// on its output is kept for the resume.
const DROPPED: &str = "telnet client dropped; session kept for its resume";
/// Logged when the output kept for it passes the replay bound (`kept::PAST_THE_BOUND`).
const PAST_THE_BOUND: &str = "output kept for a telnet resume passed --web-replay-bytes";

/// A raw telnet socket: it answers no negotiation (unless told to answer
/// the gate's `DO TIMING-MARK` as a telnet client does); telnet commands
/// are dropped from what it shows.
struct Raw {
    tcp: TcpStream,
    text: String,
    /// Where the next `expect` starts looking.
    from: usize,
    answers_timing_mark: bool,
}

const DO_TIMING_MARK: [u8; 3] = [255, 253, 6];
const WONT_TIMING_MARK: [u8; 3] = [255, 252, 6];

impl Raw {
    async fn connect(addr: &str) -> anyhow::Result<Self> {
        Ok(Self {
            tcp: TcpStream::connect(addr).await?,
            text: String::new(),
            from: 0,
            answers_timing_mark: false,
        })
    }

    async fn line(&mut self, line: &str) -> anyhow::Result<()> {
        self.tcp.write_all(format!("{line}\r\n").as_bytes()).await?;
        Ok(())
    }

    /// Read until `needle` appears after the last match; the text up to
    /// its end.
    async fn expect(&mut self, needle: &str) -> anyhow::Result<String> {
        loop {
            if let Some(at) = self.text[self.from..].find(needle) {
                let end = self.from + at + needle.len();
                let seen = self.text[self.from..end].to_string();
                self.from = end;
                return Ok(seen);
            }
            let mut buf = vec![0u8; 8192];
            let n = tokio::time::timeout(STEP, self.tcp.read(&mut buf))
                .await
                .with_context(|| {
                    format!("waiting for {needle:?} in {:?}", &self.text[self.from..])
                })??;
            if n == 0 {
                bail!(
                    "closed waiting for {needle:?}: {:?}",
                    &self.text[self.from..]
                );
            }
            if self.answers_timing_mark {
                for _ in buf[..n].windows(3).filter(|w| *w == DO_TIMING_MARK) {
                    self.tcp.write_all(&WONT_TIMING_MARK).await?;
                }
            }
            self.text
                .push_str(&String::from_utf8_lossy(&strip_telnet(&buf[..n])));
        }
    }

    /// The rest of the line after `prefix`.
    async fn after(&mut self, prefix: &str) -> anyhow::Result<String> {
        self.expect(prefix).await?;
        let line = self.expect("\n").await?;
        Ok(line.trim().to_string())
    }
}

/// Telnet commands out (IAC x y, IAC SB ... IAC SE); single bytes kept.
fn strip_telnet(bytes: &[u8]) -> Vec<u8> {
    const IAC: u8 = 255;
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != IAC {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        match bytes.get(i + 1) {
            Some(250) => {
                while i + 1 < bytes.len() && !(bytes[i] == IAC && bytes[i + 1] == 240) {
                    i += 1;
                }
                i += 2;
            }
            Some(251..=254) => i += 3,
            _ => i += 2,
        }
    }
    out
}

/// Log in `name` on a raw socket; its resume token.
async fn login(addr: &str, name: &str) -> anyhow::Result<(Raw, String)> {
    let mut c = Raw::connect(addr).await?;
    c.expect("create <name> <password>").await?;
    c.line(&format!("create {name} correct horse")).await?;
    c.expect(&format!("Welcome, {name}")).await?;
    let token = token_of(&mut c).await?;
    Ok((c, token))
}

async fn token_of(c: &mut Raw) -> anyhow::Result<String> {
    c.expect("and type:").await?;
    c.after("resume ").await
}

/// Wait until the gate has logged `needle` `n` times.
async fn logged(gate: &Proc, needle: &str, n: usize) -> anyhow::Result<()> {
    let until = std::time::Instant::now() + STEP;
    while gate.plain_log().matches(needle).count() < n {
        if std::time::Instant::now() > until {
            bail!("{needle:?} not logged {n} times");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_telnet_player_resumes_with_the_token_and_loses_nothing() -> anyhow::Result<()> {
    let flags = [
        "--telnet-resume-grace-secs",
        "60",
        "--web-replay-bytes",
        "2048",
    ];
    let gw = GateWorld::start(&flags)?;
    let gate = &gw.gate;
    let addr = gate.addr.clone();

    let (mut a, first) = login(&addr, "Resa").await?;
    let (mut b, _) = login(&addr, "Bystander").await?;
    a.line("journal one").await?;
    a.line("journal two").await?;
    a.line("say ready").await?;
    a.expect("ready").await?;
    b.expect("ready").await?;

    // Mid-session the connection drops; the room talks meanwhile.
    a.line("journal three").await?;
    drop(a);
    logged(gate, DROPPED, 1).await?;
    b.line("say while you were away").await?;
    b.expect("while you were away").await?;

    let mut a = Raw::connect(&addr).await?;
    a.expect("create <name>").await?;
    a.line(&format!("resume {first}")).await?;
    a.expect("*** Session resumed.").await?;
    a.expect("while you were away").await?;
    let second = token_of(&mut a).await?;
    assert_ne!(second, first, "a fresh token after each resume");
    a.line("journal four").await?;
    a.line("journal").await?;
    let journal = a.expect("journal end").await?;
    let lines: Vec<&str> = journal
        .lines()
        .filter_map(|l| l.trim().split_once(": ").map(|(_, t)| t))
        .collect();
    assert_eq!(lines, ["one", "two", "three", "four"], "{journal}");
    // The room sees the same player: B hears A.
    a.line("say back").await?;
    b.expect("back").await?;

    // The spent token resumes nothing.
    let mut late = Raw::connect(&addr).await?;
    late.expect("create <name>").await?;
    late.line(&format!("resume {first}")).await?;
    late.expect(REFUSED).await?;

    // Missed more than the bound: a notice and a fresh look.
    drop(a);
    logged(gate, DROPPED, 2).await?;
    for i in 0..40 {
        b.line(&format!("say chatter {i} {}", "x".repeat(60)))
            .await?;
    }
    b.expect("chatter 39").await?;
    // The gate has the chatter for A's session (it may lag B's).
    logged(gate, PAST_THE_BOUND, 1).await?;
    let mut a = Raw::connect(&addr).await?;
    a.expect("create <name>").await?;
    a.line(&format!("resume {second}")).await?;
    a.expect("*** Session resumed.").await?;
    let missed = a.expect("missed more output than was kept").await?;
    assert!(!missed.contains("chatter"), "{missed}");
    let third = token_of(&mut a).await?;
    // The fresh look: the room, and who is in it.
    a.expect("Bystander is here.").await?;

    // A resume while the old connection still looks alive (it answers
    // nothing: a half-open socket) takes it over once the probe times out.
    let mut again = Raw::connect(&addr).await?;
    again.expect("create <name>").await?;
    again.line(&format!("resume {third}")).await?;
    again.expect("*** Session resumed.").await?;
    a.expect("resumed from another connection").await?;
    let fourth = token_of(&mut again).await?;

    // After quit the token resumes nothing.
    again.line("quit").await?;
    again.expect("Goodbye").await?;
    // The session has ended once the gate closes the connection.
    let mut rest = Vec::new();
    tokio::time::timeout(STEP, again.tcp.read_to_end(&mut rest)).await??;
    let mut after_quit = Raw::connect(&addr).await?;
    after_quit.expect("create <name>").await?;
    after_quit.line(&format!("resume {fourth}")).await?;
    after_quit.expect(REFUSED).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_grace_period_the_session_ends_and_its_token_is_refused() -> anyhow::Result<()> {
    let gw = GateWorld::start(&["--telnet-resume-grace-secs", "1"])?;
    let gate = &gw.gate;
    let (mut a, token) = login(&gate.addr, "Brief").await?;
    a.line("journal kept").await?;
    a.line("journal").await?;
    a.expect("journal end 1").await?;
    drop(a);
    logged(gate, "not resumed within the grace period", 1).await?;
    let mut late = Raw::connect(&gate.addr).await?;
    late.expect("create <name>").await?;
    late.line(&format!("resume {token}")).await?;
    late.expect(REFUSED).await?;
    // The session ended as a hang-up: the character logs in again and
    // finds its journal.
    late.line("connect Brief correct horse").await?;
    late.expect("Welcome, Brief").await?;
    late.line("journal").await?;
    let journal = late.expect("journal end").await?;
    assert!(journal.contains("journal 1: kept"), "{journal}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_only_half_closes_reads_every_answer_and_can_resume() -> anyhow::Result<()> {
    let gw = GateWorld::start(&["--telnet-resume-grace-secs", "60"])?;
    let gate = &gw.gate;
    let (mut a, token) = login(&gate.addr, "Scripta").await?;
    // A script piping commands into `nc`: lines, then the end of its input.
    for i in 0..5 {
        a.line(&format!("journal scripted {i}")).await?;
    }
    a.line("journal").await?;
    a.tcp.shutdown().await?;
    let journal = a.expect("journal end 5").await?;
    assert!(journal.contains("journal 5: scripted 4"), "{journal}");
    // Its answers read, the gate closes the socket; the session waits.
    let mut rest = Vec::new();
    tokio::time::timeout(STEP, a.tcp.read_to_end(&mut rest)).await??;
    let mut back = Raw::connect(&gate.addr).await?;
    back.expect("create <name>").await?;
    back.line(&format!("resume {token}")).await?;
    back.expect("*** Session resumed.").await?;
    back.line("journal").await?;
    back.expect("journal end 5").await?;
    Ok(())
}

/// The journal entries a `journal` listing shows, in order.
fn entries(journal: &str) -> Vec<String> {
    journal
        .lines()
        .filter_map(|l| {
            // After a status prompt, if one shares the line.
            let (n, t) = l[l.find("journal ")? + 8..].split_once(": ")?;
            n.parse::<usize>().ok().map(|_| t.trim().to_string())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_racing_the_dropped_clients_answers_loses_nothing_and_repeats_nothing()
-> anyhow::Result<()> {
    // Five commands at once, then twenty a second: a pasted burst of
    // twenty takes most of a second to apply, so the resume below comes
    // back while most of it waits in the gate, unapplied and unanswered.
    let flags = [
        "--telnet-resume-grace-secs",
        "60",
        "--command-burst",
        "5",
        "--commands-per-sec",
        "20",
    ];
    let gw = GateWorld::start(&flags)?;
    let addr = gw.gate.addr.clone();
    let (mut a, token) = login(&addr, "Racer").await?;
    let mut burst: String = (0..20).map(|i| format!("journal race {i}\r\n")).collect();
    burst.push_str("say all sent\r\n");
    a.tcp.write_all(burst.as_bytes()).await?;
    drop(a);
    // Back at once: no waiting for the gate to notice the drop or answer.
    let mut back = Raw::connect(&addr).await?;
    back.expect("create <name>").await?;
    back.line(&format!("resume {token}")).await?;
    back.expect("*** Session resumed.").await?;
    let next = token_of(&mut back).await?;
    assert_ne!(next, token);
    back.line("journal").await?;
    let journal = back.expect("journal end").await?;
    let end = back.expect("\n").await?;
    let want: Vec<String> = (0..20).map(|i| format!("race {i}")).collect();
    assert_eq!(
        entries(&journal),
        want,
        "every line once, in order: {journal}"
    );
    assert_eq!(end.trim(), "20", "{journal}");
    // The last line's answer reached the new connection, once.
    assert_eq!(back.text.matches("all sent").count(), 1, "{}", back.text);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_for_a_session_in_play_is_refused_and_a_silent_one_is_taken_over()
-> anyhow::Result<()> {
    let gw = GateWorld::start(&["--telnet-resume-grace-secs", "60"])?;
    let addr = gw.gate.addr.clone();
    let (mut player, token) = login(&addr, "Watched").await?;
    // The player's client answers the gate's probe, as telnet clients do.
    player.answers_timing_mark = true;
    // A shoulder-surfer types the printed token.
    let mut surfer = Raw::connect(&addr).await?;
    surfer.expect("create <name>").await?;
    surfer.line(&format!("resume {token}")).await?;
    let (refused, told) = tokio::join!(
        surfer.expect(LIVE_REFUSED),
        player.expect("The resume was refused"),
    );
    refused?;
    told?;
    assert!(!surfer.text.contains("Session resumed"), "{}", surfer.text);
    // The player plays on, with a fresh token; the old one is spent.
    let fresh = token_of(&mut player).await?;
    assert_ne!(fresh, token);
    player.line("journal mine").await?;
    player.expect("Noted.").await?;
    surfer.line(&format!("resume {token}")).await?;
    surfer.expect(REFUSED).await?;
    // The refused connection is still at the login prompt.
    surfer.line("create Surfer correct horse").await?;
    surfer.expect("Welcome, Surfer").await?;

    // Now the player's connection goes silent (a phone that left its
    // network: nothing read, nothing answered) and the player comes back
    // on a new one: taken over, with what was said meanwhile.
    player.answers_timing_mark = false;
    surfer.line("say are you there").await?;
    player.expect("are you there").await?;
    let mut phone = Raw::connect(&addr).await?;
    phone.expect("create <name>").await?;
    phone.line(&format!("resume {fresh}")).await?;
    phone.expect("*** Session resumed.").await?;
    player.expect("resumed from another connection").await?;
    token_of(&mut phone).await?;
    phone.line("journal").await?;
    let journal = phone.expect("journal end 1").await?;
    assert_eq!(entries(&journal), ["mine"], "{journal}");
    Ok(())
}
