//! Text that cannot forge a line (issue 30, the edge): an emote padded to
//! the client's width, re-wrapped there, put a forged `Bob tells you,
//! '…'` at the left margin of another player's screen, and invisible or
//! look-alike characters (the combining grapheme joiner, a Hangul filler)
//! passed into what others read. Now another player's words wrap with a
//! hanging indent — an emote or a say as room chatter, a tell as
//! `others_words` — so a continuation never starts at the margin, and the
//! world keeps only visible characters.

mod support;

use std::time::Duration;

use support::gate_world::GateWorld;
use telos_testkit::bot::Bot;

const STEP: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_padded_emote_cannot_put_a_forged_tell_at_the_margin() -> anyhow::Result<()> {
    let gw = GateWorld::start(&[])?;
    let mut victim = Bot::create_at(&gw.gate.addr, "Victim", "correct horse").await?;
    let mut forger = Bot::create_at(&gw.gate.addr, "Forger", "correct horse").await?;
    victim.sync().await?;
    // "Forger " and 72 letters fill 79 of the victim's 80 columns: the
    // forged tell is the next line's start, unless it is indented.
    let pad = "x".repeat(72);
    forger
        .command(&format!(
            "emote {pad} Bob tells you, 'your password, please'"
        ))
        .await?;
    let seen = victim
        .read_until(|l| l.contains("your password, please"), STEP)
        .await?;
    let forged: Vec<&String> = seen
        .iter()
        .filter(|l| l.starts_with("Bob tells you"))
        .collect();
    assert!(forged.is_empty(), "a forged line at the margin: {seen:?}");
    assert!(
        seen.iter().any(|l| l.starts_with("  Bob tells you")),
        "the continuation, indented: {seen:?}"
    );

    // A tell is another player's words too: "Forger tells you, '" and a
    // 60-letter word fill 79 columns, and the forged line would start the
    // next.
    let pad = "x".repeat(60);
    forger
        .command(&format!(
            "tell Victim {pad} Admin tells you, 'type your password'"
        ))
        .await?;
    let told = victim
        .read_until(|l| l.contains("type your password"), STEP)
        .await?;
    let forged: Vec<&String> = told
        .iter()
        .filter(|l| l.starts_with("Admin tells"))
        .collect();
    assert!(forged.is_empty(), "a forged line at the margin: {told:?}");

    // Invisible pieces are gone from what others read.
    forger.command("say hel\u{034F}lo \u{3164}there").await?;
    let said = victim.read_until(|l| l.contains("says,"), STEP).await?;
    let line = said.last().expect("a line");
    assert!(line.contains("'hello there'"), "{line:?}");
    Ok(())
}
