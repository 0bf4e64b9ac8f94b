//! The MUD client protocols end to end: a real `redis-server`, two keyed
//! `telos-world` shards splitting the starter zones, a third shard that
//! joins later, and a real `telos-gate`. A GMCP client with MCCP2 on
//! creates a character and walks across the shard boundary; its shard is
//! drained (SIGTERM); its zone is transferred (`telosctl transfer`). After
//! every move it has a `Room.Info` for the room it stands in with the same
//! `num` as before the move (the number is the room id's, on every shard),
//! and `Char.Vitals`; its output is one zlib stream throughout; MSSP,
//! asked before login, counts the player online on another shard.

use std::time::Duration;

use serde_json::Value;
use telos_proto::ids::room_num;
use telos_testkit::RedisServer;
use telos_testkit::cli::telosctl;
use telos_testkit::keys::TempKeys;
use telos_testkit::mudclient::{DO, IAC, MudClient, SB, SE};
use telos_testkit::process::{blocking, start_keyed_gate, start_keyed_world};
use telos_testkit::world::{path_to_zone, start_room, starter_zones, zone_of};

const MSSP: u8 = 70;
const NO_FLAGS: &[&str] = &[];

/// The last `Room.Info` seen: (id, num).
fn last_room(c: &MudClient) -> Option<(String, u64)> {
    c.gmcp_of("Room.Info").last().map(|v| {
        (
            v["id"].as_str().unwrap_or_default().to_string(),
            v["num"].as_u64().unwrap_or_default(),
        )
    })
}

/// Wait until the client has seen `more` Room.Info messages beyond `seen`
/// and Char.Vitals beyond `vitals`; return the newest room.
async fn next_room(
    c: &mut MudClient,
    seen: usize,
    vitals: usize,
    after: &str,
) -> anyhow::Result<(String, u64)> {
    let what = format!("Room.Info and Char.Vitals after {after}");
    c.until_gmcp(&what, |all| {
        all.iter().filter(|(p, _)| p == "Room.Info").count() > seen
            && all.iter().filter(|(p, _)| p == "Char.Vitals").count() > vitals
    })
    .await?;
    Ok(last_room(c).expect("seen"))
}

fn counts(c: &MudClient) -> (usize, usize) {
    (c.gmcp_of("Room.Info").len(), c.gmcp_of("Char.Vitals").len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn room_info_keeps_its_number_across_a_walk_a_drain_and_a_transfer() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let zones = starter_zones();
    let (first, second) = zones.split_at(zones.len().div_ceil(2));
    let start_zone = zone_of(&start_room()).to_string();
    assert!(first.contains(&start_zone));
    let _a = start_keyed_world("shard-a", &redis.url, first, keys.path(), None, NO_FLAGS)?;
    let mut b = start_keyed_world("shard-b", &redis.url, second, keys.path(), None, NO_FLAGS)?;
    let gate = start_keyed_gate(&redis.url, keys.path(), &[])?;

    let mut c = MudClient::connect(&gate.addr, &["Room", "Char"], true).await?;
    c.expect("create <name> <password>").await?;
    c.line("create Mappy correct horse").await?;
    c.expect("Welcome, Mappy").await?;
    let (room, num) = next_room(&mut c, 0, 0, "the login").await?;
    assert_eq!(room, start_room());
    assert_eq!(num, u64::from(room_num(&room)));
    assert!(c.compressed, "MCCP2 on from before the login");

    // Walk to the nearest zone on shard-b, one Room.Info a step.
    let (zone_b, path) = second
        .iter()
        .map(|z| (z.clone(), path_to_zone(&start_room(), z)))
        .min_by_key(|(_, p)| p.len())
        .expect("shard-b has zones");
    for dir in &path {
        let (rooms, vitals) = counts(&c);
        c.line(dir).await?;
        let (id, num) = next_room(&mut c, rooms, vitals, dir).await?;
        assert_eq!(num, u64::from(room_num(&id)), "{id}");
    }
    c.line("where").await?;
    let here = c.expect("shard=shard-b").await?;
    let (room_b, num_b) = last_room(&c).expect("walked");
    assert!(here.contains(&format!("room={room_b}")), "{here}");
    assert_eq!(zone_of(&room_b), zone_b);

    // MSSP before login, from a crawler: the player on shard-b counts.
    let mut players = String::new();
    // The gate reads the count every couple of seconds: ask until it shows.
    for _ in 0..100 {
        let mut crawler = MudClient::connect(&gate.addr, &[], false).await?;
        crawler.send(&[IAC, DO, MSSP]).await?;
        crawler.until_bytes(&[IAC, SB, MSSP]).await?;
        crawler.until_bytes(&[IAC, SE]).await?;
        let raw = &crawler.plain;
        let at = raw.windows(3).position(|w| w == [IAC, SB, MSSP]).unwrap();
        let end = raw[at..].windows(2).position(|w| w == [IAC, SE]).unwrap() + at;
        let body = String::from_utf8_lossy(&raw[at + 3..end]).replace(['\u{1}', '\u{2}'], "|");
        players = body
            .split("|PLAYERS|")
            .nth(1)
            .and_then(|s| s.split('|').next())
            .unwrap_or_default()
            .to_string();
        if players == "1" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(players, "1", "MSSP PLAYERS counts the player on shard-b");

    // Drain shard-b: the player moves to shard-a in place; the same room,
    // the same number, vitals again, the same zlib stream.
    let (rooms, vitals) = counts(&c);
    b.signal(libc::SIGTERM);
    let (id, num) = next_room(&mut c, rooms, vitals, "the drain").await?;
    assert_eq!((id.as_str(), num), (room_b.as_str(), num_b));
    blocking(|| b.stop_with(libc::SIGTERM, Duration::from_secs(60)))?;
    c.line("where").await?;
    c.expect("shard=shard-a").await?;

    // A transfer of the player's zone to a shard that joins now.
    let _c3 = start_keyed_world("shard-c", &redis.url, NO_FLAGS, keys.path(), None, NO_FLAGS)?;
    let (rooms, vitals) = counts(&c);
    let url = redis.url.clone();
    let zone = zone_b.clone();
    let done = blocking(move || telosctl(&url, &["transfer", &zone, "--to", "shard-c", "--wait"]))?;
    assert!(done.success(), "{}", done.stderr);
    let (id, num) = next_room(&mut c, rooms, vitals, "the transfer").await?;
    assert_eq!((id.as_str(), num), (room_b.as_str(), num_b));
    c.line("where").await?;
    c.expect("shard=shard-c").await?;
    assert!(
        c.compressed && c.wire < c.plain.len(),
        "one compressed stream throughout"
    );
    let name: Vec<Value> = c.gmcp_of("Char.Name");
    assert_eq!(name[0]["name"], "Mappy");
    Ok(())
}
