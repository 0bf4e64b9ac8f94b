//! A prompt ends every answer, on every path (issue 29): a client that
//! turned EOR on (as Mudlet and TinTin++ do) sees `<…> IAC EOR` after its
//! login, after each step — within a shard and across the boundary onto
//! another shard — and after a telnet resume, the same bytes a step within
//! one shard ends with. Real `redis-server`, two keyed shards, a keyed gate.

use std::time::Duration;

use telos_testkit::RedisServer;
use telos_testkit::keys::TempKeys;
use telos_testkit::mudclient::{DO, IAC, MudClient};
use telos_testkit::process::{start_keyed_gate, start_keyed_world};
use telos_testkit::world::{path_to_zone, start_room, starter_zones, zone_of};

const OPT_EOR: u8 = 25;
const CMD_EOR: u8 = 239;
/// How a prompt ends: its trailing space, then `IAC EOR`.
const PROMPT_END: [u8; 4] = [b'>', b' ', IAC, CMD_EOR];
const NO_FLAGS: &[&str] = &[];
/// Bounds a hang; a prompt comes in milliseconds.
const STEP: Duration = Duration::from_secs(15);

fn prompts(plain: &[u8]) -> usize {
    plain
        .windows(PROMPT_END.len())
        .filter(|w| *w == PROMPT_END)
        .count()
}

/// An EOR-aware client (GMCP Char for the vitals a prompt shows).
async fn client(addr: &str) -> anyhow::Result<MudClient> {
    let mut c = MudClient::connect(addr, &["Char"], false).await?;
    c.send(&[IAC, DO, OPT_EOR]).await?;
    c.timeout = STEP;
    Ok(c)
}

/// Wait for one more prompt than `before`, after `what`.
async fn next_prompt(c: &mut MudClient, before: usize, what: &str) -> anyhow::Result<()> {
    c.until_plain(&format!("a prompt with EOR after {what}"), |p| {
        prompts(p) > before
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_with_eor_follows_login_every_step_across_shards_and_a_resume()
-> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let zones = starter_zones();
    let (first, second) = zones.split_at(zones.len().div_ceil(2));
    assert!(first.contains(&zone_of(&start_room()).to_string()));
    let _a = start_keyed_world("shard-a", &redis.url, first, keys.path(), None, NO_FLAGS)?;
    let _b = start_keyed_world("shard-b", &redis.url, second, keys.path(), None, NO_FLAGS)?;
    let gate = start_keyed_gate(
        &redis.url,
        keys.path(),
        &["--telnet-resume-grace-secs", "60"],
    )?;

    let mut c = client(&gate.addr).await?;
    c.expect("create <name> <password>").await?;
    c.line("create Prompty correct horse").await?;
    c.expect("Welcome, Prompty").await?;
    next_prompt(&mut c, 0, "the login").await?;
    c.expect("and type:").await?;
    c.expect("\n").await?;
    c.expect("\n").await?;
    let text = c.text();
    let token = text
        .split("and type:")
        .nth(1)
        .and_then(|r| {
            r.lines()
                .map(str::trim)
                .find_map(|l| l.strip_prefix("resume "))
        })
        .unwrap_or_default()
        .to_string();
    assert!(!token.is_empty(), "no resume token in {text:?}");

    // Walk onto the nearest zone of shard-b: every step, the last onto
    // another shard, ends with a prompt.
    let path = second
        .iter()
        .map(|z| path_to_zone(&start_room(), z))
        .min_by_key(Vec::len)
        .expect("shard-b has zones");
    for dir in &path {
        let before = prompts(&c.plain);
        c.line(dir).await?;
        next_prompt(&mut c, before, &format!("the step {dir}")).await?;
    }
    c.line("where").await?;
    c.expect("shard=shard-b").await?;

    // The link drops; a new connection resumes, and the screen it gets
    // ends with a prompt too.
    drop(c);
    let mut r = client(&gate.addr).await?;
    r.expect("create <name> <password>").await?;
    r.line(&format!("resume {token}")).await?;
    r.expect("*** Session resumed.").await?;
    let at = r
        .plain
        .windows(7)
        .position(|w| w == b"resumed")
        .expect("the line just seen");
    r.until_plain("a prompt with EOR after the resume", |p| {
        prompts(&p[at.min(p.len())..]) > 0
    })
    .await?;
    r.line("where").await?;
    r.expect("shard=shard-b").await?;
    Ok(())
}
