//! Colour end to end: a real `redis-server`, two keyed `telos-world`
//! shards splitting the starter zones and a real `telos-gate`. A client
//! that says truecolour through MTTS sees room names in 24-bit colour on
//! both shards; its player's `colour 16` holds across the walk back over
//! the shard boundary (the choice is the character's, the option state
//! the gate's) and a new connection; a raw line client in the same rooms never sees an ESC
//! byte and reads the contract's lines.

use telos_testkit::RedisServer;
use telos_testkit::keys::TempKeys;
use telos_testkit::mudclient::{IAC, MudClient, SB, SE};
use telos_testkit::process::{start_keyed_gate, start_keyed_world};
use telos_testkit::world::{
    WorldMap, opposite, path_to_zone, start_room, starter_zones, walk, zone_of,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const NO_FLAGS: &[&str] = &[];
const WILL: u8 = 251;
const TTYPE: u8 = 24;
/// MTTS: ANSI, UTF-8, 256 colours, truecolour.
const MTTS_TRUECOLOUR: u32 = 1 | 4 | 8 | 256;

/// A room's name as the gate paints it: bold, the palette's room colour.
const ROOM_TRUECOLOUR: &str = "\x1b[1m\x1b[38;2;95;215;255m";
const ROOM_16: &str = "\x1b[1m\x1b[96m";

async fn say_mtts(c: &mut MudClient, bits: u32) -> anyhow::Result<()> {
    let mut bytes = vec![IAC, WILL, TTYPE];
    for answer in ["MUDLET", "ANSI-TRUECOLOR", &format!("MTTS {bits}")] {
        bytes.extend_from_slice(&[IAC, SB, TTYPE, 0]);
        bytes.extend_from_slice(answer.as_bytes());
        bytes.extend_from_slice(&[IAC, SE]);
    }
    c.send(&bytes).await
}

/// A line client on a bare socket, as the contract's test clients are.
struct Raw {
    stream: TcpStream,
    seen: Vec<u8>,
}

impl Raw {
    async fn expect(&mut self, needle: &str) -> anyhow::Result<()> {
        let read = async {
            while !String::from_utf8_lossy(&self.seen).contains(needle) {
                let mut buf = [0u8; 4096];
                let n = self.stream.read(&mut buf).await?;
                anyhow::ensure!(n > 0, "closed before {needle:?}");
                self.seen.extend_from_slice(&buf[..n]);
            }
            Ok(())
        };
        tokio::time::timeout(std::time::Duration::from_secs(30), read)
            .await
            .map_err(|_| {
                anyhow::anyhow!(
                    "timed out waiting for {needle:?}; saw {:?}",
                    String::from_utf8_lossy(&self.seen)
                )
            })?
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn colour_holds_across_a_shard_walk_and_a_raw_client_sees_none() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let zones = starter_zones();
    let (first, second) = zones.split_at(zones.len().div_ceil(2));
    let start = start_room();
    assert!(first.contains(&zone_of(&start).to_string()));
    let _a = start_keyed_world("shard-a", &redis.url, first, keys.path(), None, NO_FLAGS)?;
    let _b = start_keyed_world("shard-b", &redis.url, second, keys.path(), None, NO_FLAGS)?;
    let gate = start_keyed_gate(&redis.url, keys.path(), &[])?;
    let map = WorldMap::starter();
    let name_of = |room: &str| map.room(room).expect("a starter room").name.clone();

    let mut c = MudClient::connect(&gate.addr, &[], false).await?;
    c.expect("create <name> <password>").await?;
    say_mtts(&mut c, MTTS_TRUECOLOUR).await?;
    c.line("create Rainbow correct horse").await?;
    c.expect("Welcome, Rainbow").await?;
    c.expect(&format!("{ROOM_TRUECOLOUR}{}\x1b[0m\r\n", name_of(&start)))
        .await?;

    // Walk to the nearest zone on shard-b.
    let (zone_b, path) = second
        .iter()
        .map(|z| (z.clone(), path_to_zone(&start, z)))
        .min_by_key(|(_, p)| p.len())
        .expect("shard-b has zones");
    for dir in &path {
        c.line(dir).await?;
        c.expect(ROOM_TRUECOLOUR).await?;
    }
    let room_b = walk(&start, &path);
    assert_eq!(zone_of(&room_b), zone_b);
    c.line("where").await?;
    c.expect("shard=shard-b").await?;
    c.line("look").await?;
    c.expect(&format!("{ROOM_TRUECOLOUR}{}\x1b[0m\r\n", name_of(&room_b)))
        .await?;

    // The player's choice, made on shard-b, holds on shard-a.
    c.line("colour 16").await?;
    c.expect("Colour: 16 colours.").await?;
    let back = opposite(path.last().expect("a step"));
    let room_a = walk(&room_b, &[back.to_string()]);
    assert_ne!(
        zone_of(&room_a),
        zone_b,
        "the step back crosses the boundary"
    );
    c.line(back).await?;
    c.expect(&format!("{ROOM_16}{}\x1b[0m\r\n", name_of(&room_a)))
        .await?;
    c.line("where").await?;
    c.expect("shard=shard-a").await?;

    // A raw line client next to it: the contract's lines, not one ESC,
    // whatever the others' clients show.
    let prefix = &path[..path.len() - 1];
    assert_eq!(
        walk(&start, prefix),
        room_a,
        "the starter world's exits go both ways"
    );
    let mut raw = Raw {
        stream: TcpStream::connect(&gate.addr).await?,
        seen: Vec::new(),
    };
    raw.stream
        .write_all(b"create Plainly correct horse\r\n")
        .await?;
    raw.expect("Welcome, Plainly").await?;
    for dir in prefix {
        raw.stream
            .write_all(format!("{dir}\r\n").as_bytes())
            .await?;
    }
    raw.stream.write_all(b"where\r\n").await?;
    raw.expect(&format!("room={room_a}")).await?;
    c.line("say can you see me").await?;
    raw.expect("Rainbow says, 'can you see me'\r\n").await?;
    raw.stream.write_all(b"look\r\n").await?;
    raw.expect(&format!("{}\r\n", name_of(&room_a))).await?;
    raw.expect("Rainbow is here.").await?;
    assert!(
        !raw.seen.contains(&0x1b),
        "{:?}",
        String::from_utf8_lossy(&raw.seen)
    );
    // The speaker's own line is speech-coloured, at its chosen depth.
    c.expect("\x1b[33mYou say, 'can you see me'\x1b[0m").await?;

    // The choice is saved with the character: a new connection from the
    // truecolour client shows its first room at 16 colours.
    c.line("quit").await?;
    c.expect("Goodbye.").await?;
    let mut c = MudClient::connect(&gate.addr, &[], false).await?;
    c.expect("create <name> <password>").await?;
    say_mtts(&mut c, MTTS_TRUECOLOUR).await?;
    c.line("connect Rainbow correct horse").await?;
    c.expect("Welcome, Rainbow").await?;
    let first = c
        .expect(&format!("{}\x1b[0m\r\n", name_of(&room_a)))
        .await?;
    assert!(
        first.ends_with(&format!("{ROOM_16}{}\x1b[0m\r\n", name_of(&room_a))),
        "{first:?}"
    );
    Ok(())
}
