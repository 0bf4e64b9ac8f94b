//! A web session's resume token against a page still in play, end to end
//! with a real `telos-gate` (`--web-listen`) and a real keyed shard through
//! a Rust WebSocket client that answers pings as a browser does: a token
//! presented while the session's page answers the gate's ping is refused
//! (that page is told and plays on with a fresh token; the other socket
//! goes on to a fresh login); once the page stops answering (a phone that
//! left its network) a resume takes it over with what it missed. And a
//! page that drops right after sending numbered lines and comes straight
//! back has each applied once, in order.

use anyhow::bail;
use tokio::net::TcpStream;

mod support;
use support::gate_world::{GateWorld, Page, web_addr};

const IN_PLAY: &str = "That session is in play on a live connection";
const TOLD: &str = "refused: this page is in play";

async fn page(addr: &str, query: &str) -> anyhow::Result<Page<TcpStream>> {
    Page::open_at(TcpStream::connect(addr).await?, query, None).await
}

/// The journal entries a `journal` listing shows, in order.
fn entries(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            // After a status prompt, if one shares the line.
            let (n, t) = l[l.find("journal ")? + 8..].split_once(": ")?;
            n.parse::<usize>().ok().map(|_| t.trim().to_string())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_for_a_page_in_play_is_refused_and_a_silent_page_is_taken_over()
-> anyhow::Result<()> {
    let gw = GateWorld::start(&["--web-listen", "127.0.0.1:0"])?;
    let addr = web_addr(&gw.gate, "http")?;
    let mut player = page(&addr, "").await?;
    player.expect("create <name>").await?;
    player.line("create Webbed correct horse").await?;
    player.expect("Welcome, Webbed").await?;
    let token = player.token().await?;

    // Someone else presents the token while the page plays (it reads, so
    // it answers the gate's ping).
    let mut surfer = page(&addr, &format!("?resume={token}&seen=0")).await?;
    let (refused, told) = tokio::join!(surfer.expect(IN_PLAY), player.expect(TOLD));
    refused?;
    told?;
    let fresh = player.token().await?;
    assert_ne!(fresh, token, "the presented token is spent");
    // The refused socket goes on to a fresh login; the player plays on.
    surfer.expect("create <name>").await?;
    surfer.line("create Surfweb correct horse").await?;
    surfer.expect("Welcome, Surfweb").await?;
    player.line("journal kept").await?;
    player.expect("Noted.").await?;

    // The page stops reading (no pong any more); the room talks; the
    // player comes back on another connection with the fresh token.
    surfer.line("say are you there").await?;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let mut phone = page(&addr, &format!("?resume={fresh}&seen={}", player.seen)).await?;
    let next = phone.token().await?;
    assert_ne!(next, fresh);
    phone.expect("are you there").await?;
    phone.line("journal").await?;
    phone.expect("journal end 1").await?;
    assert_eq!(entries(&phone.text), ["kept"], "{}", phone.text);
    // The silent page, read again, was told and closed.
    while player.read_one().await? {}
    assert!(player.text.contains("resumed elsewhere"), "{}", player.text);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_that_drops_right_after_its_lines_and_comes_straight_back_has_each_once()
-> anyhow::Result<()> {
    let gw = GateWorld::start(&["--web-listen", "127.0.0.1:0"])?;
    let addr = web_addr(&gw.gate, "http")?;
    let mut first = page(&addr, "").await?;
    first.expect("create <name>").await?;
    first.line("create Racyweb correct horse").await?;
    first.expect("Welcome, Racyweb").await?;
    let token = first.token().await?;
    let lines = ["one", "two", "three"];
    for (n, text) in lines.iter().enumerate() {
        let input = serde_json::json!({"n": n + 1, "text": format!("journal {text}")});
        first.gmcp(&format!("Telos.Input {input}")).await?;
    }
    let seen = first.seen;
    drop(first);
    // Back at once, resending every line it has no ack for, and one more.
    let mut back = page(&addr, &format!("?resume={token}&seen={seen}")).await?;
    back.token().await?;
    for (n, text) in lines.iter().chain(&["four"]).enumerate() {
        let input = serde_json::json!({"n": n + 1, "text": format!("journal {text}")});
        back.gmcp(&format!("Telos.Input {input}")).await?;
    }
    let input = serde_json::json!({"n": 5, "text": "journal"});
    back.gmcp(&format!("Telos.Input {input}")).await?;
    back.expect("journal end").await?;
    if !back.text.contains("journal end 4") {
        bail!("each line once: {}", back.text);
    }
    assert_eq!(
        entries(&back.text),
        ["one", "two", "three", "four"],
        "{}",
        back.text
    );
    Ok(())
}
