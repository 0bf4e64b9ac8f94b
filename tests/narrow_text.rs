//! Text is shaped once, at the client's width (issue 29): the world sends
//! a room's description as one paragraph and the gate wraps it to the NAWS
//! width, so at 50 and 60 columns no line is wider than the client, no word
//! is broken, and no line ends short of room for the next word (text wrapped
//! twice — by the world at 78, then by the gate — read `…houses. The` /
//! `barracks of the city` / `watch stand…`). The resume command is a line of
//! its own, its token whole. Real `redis-server`, a keyed shard and gate.

mod support;

use std::time::Duration;

use support::gate_world::GateWorld;
use telos_testkit::mudclient::{IAC, MudClient, SB, SE};
use telos_testkit::process::strip_ansi;
use telos_testkit::world::{start_room, world_dir, zone_of};

const WILL: u8 = 251;
const OPT_NAWS: u8 = 31;

/// The start room's description, as the world file has it.
fn start_description() -> anyhow::Result<String> {
    let room = start_room();
    let file = world_dir().join(format!("{}.json", zone_of(&room)));
    let zone: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(file)?)?;
    let found = zone["rooms"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["id"] == room.as_str())
        .and_then(|r| r["description"].as_str())
        .map(str::to_string);
    found.ok_or_else(|| anyhow::anyhow!("no description of {room}"))
}

/// A client `width` columns wide (it offers NAWS and tells its size).
async fn client_at(addr: &str, width: u8) -> anyhow::Result<MudClient> {
    let mut c = MudClient::connect(addr, &[], false).await?;
    c.send(&[IAC, WILL, OPT_NAWS]).await?;
    c.send(&[IAC, SB, OPT_NAWS, 0, width, 0, 24, IAC, SE])
        .await?;
    c.timeout = Duration::from_secs(15);
    Ok(c)
}

/// The text lines of what the client saw, telnet and colour removed.
fn seen_lines(c: &MudClient) -> Vec<String> {
    strip_ansi(&c.text())
        .lines()
        .map(|l| l.trim_end_matches('\r').to_string())
        .collect()
}

/// The lines the description was shown on, and whether they are its
/// words in order, each line filled as far as the width lets it.
fn check_paragraph(lines: &[String], text: &str, width: usize) -> Result<(), String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let first = words[0];
    let start = lines
        .iter()
        .position(|l| l.starts_with(first))
        .ok_or_else(|| format!("no line starts with {first:?}: {lines:#?}"))?;
    let mut shown: Vec<&str> = Vec::new();
    let mut used = Vec::new();
    for line in &lines[start..] {
        if shown.len() >= words.len() {
            break;
        }
        shown.extend(line.split_whitespace());
        used.push(line.as_str());
    }
    if shown != words {
        return Err(format!("the description's words changed: {used:#?}"));
    }
    for (i, line) in used.iter().enumerate() {
        if line.chars().count() > width {
            return Err(format!("line {i} is wider than {width}: {line:?}"));
        }
        let next = used.get(i + 1).and_then(|l| l.split_whitespace().next());
        if let Some(next) = next
            && line.chars().count() + 1 + next.chars().count() <= width
        {
            return Err(format!(
                "line {i} ends short of {next:?} (wrapped twice?): {used:#?}"
            ));
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_50_and_60_columns_text_is_wrapped_once_and_the_token_kept_whole() -> anyhow::Result<()>
{
    let cluster = GateWorld::start(&["--telnet-resume-grace-secs", "60"])?;
    let gate = &cluster.gate;
    let description = start_description()?;
    for (width, name) in [(50u8, "Narrowa"), (60, "Narrowb")] {
        let width_cols = usize::from(width);
        let mut c = client_at(&gate.addr, width).await?;
        c.expect("create <name> <password>").await?;
        c.line(&format!("create {name} correct horse")).await?;
        c.expect(&format!("Welcome, {name}")).await?;
        // The resume command (the sentence before it wraps at 50).
        c.expect("type:").await?;
        c.expect("\n").await?;
        c.expect("\n").await?;
        c.line("look").await?;
        c.expect("Exits:").await?;
        c.expect("Exits:").await?;
        let lines = seen_lines(&c);
        check_paragraph(&lines, &description, width_cols)
            .map_err(|e| anyhow::anyhow!("at {width} columns: {e}"))?;
        let token_line = lines
            .iter()
            .find(|l| l.starts_with("resume "))
            .ok_or_else(|| anyhow::anyhow!("no resume line at {width}: {lines:#?}"))?;
        let token = token_line.trim_start_matches("resume ");
        anyhow::ensure!(
            token.len() == 32 && token.chars().all(|ch| ch.is_ascii_hexdigit()),
            "the resume line at {width} is not the whole command: {token_line:?}"
        );
        for line in &lines {
            anyhow::ensure!(
                line.chars().count() <= width_cols,
                "wider than {width}: {line:?}"
            );
        }
    }
    Ok(())
}
