//! A real MUD client end to end (issue 20): TinTin++ (`tt++`, Debian's
//! `tintin++`, installed by `scripts/ensure-tools`) against a real
//! `redis-server`, two keyed `telos-world` shards (the city on `shard-a`,
//! every other zone on `shard-b`) and a real `telos-gate`.
//!
//! TinTin++ runs non-interactively (`-H -G`) on a command file written
//! here. It negotiates MCCP2, EOR, CHARSET, NAWS and TTYPE/MTTS by itself;
//! GMCP it enables the way every TinTin++ GMCP script does (it answers
//! `DONT GMCP` otherwise): `#event {IAC WILL GMCP}` sends `DO GMCP`,
//! `Core.Hello` and `Core.Supports.Set`. It creates a character, walks
//! from the start room across the shard boundary into the forest, one step
//! per `Room.Info` received, records every `Room.Info` through
//! `#event {IAC SB GMCP Room.Info IAC SE}` to a log file, asks `where` and
//! quits.
//!
//! The test asserts the recorded `Room.Info`s name every room of the walk
//! on both shards (id, name, `num` = the id's number, exits' numbers), that
//! `where` put the player on `shard-b`, and that compression was on: what
//! the gate sent (recorded by a tap in front of it) is one MCCP2 zlib
//! stream, started before the login, that carries every `Room.Info`, and
//! TinTin++ itself reported MCCP2 on. Waits are bounded by progress.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use telos_proto::ids::room_num;
use telos_testkit::tap::{Tap, decode_wire};
use telos_testkit::wait::until_progress;
use telos_testkit::world::{WorldMap, path_to_zone, start_room, zone_of};

mod support;
use support::two_shards::TwoShards;

/// No new `Room.Info`, no new byte from the gate, no exit for this long:
/// TinTin++ (or the cluster) is stuck.
const STALL: Duration = Duration::from_secs(60);

/// TinTin++, killed (by pid) if the test ends first.
struct TinTin(Child);

impl Drop for TinTin {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The command file: enable GMCP, log in, walk `path` one step per
/// `Room.Info`, then `where` and quit.
fn script(dir: &Path, addr: &str, path: &[String]) -> String {
    let (host, port) = addr.rsplit_once(':').expect("host:port");
    let steps: String = path
        .iter()
        .enumerate()
        .map(|(i, d)| format!("{{{}}}{{{d}}}", i + 1))
        .collect();
    let log = |name: &str| dir.join(name).display().to_string();
    format!(
        r#"#config {{debug telnet}} {{on}}
#variable path {{{steps}}}
#variable step 0
#event {{IAC WILL GMCP}} {{#send {{\xFF\xFD\xC9\}};#send {{\xFF\xFA\xC9Core.Hello {{"client":"TinTin++","version":"2"}}\xFF\xF0\}};#send {{\xFF\xFA\xC9Core.Supports.Set ["Room 1","Char 1"]\xFF\xF0\}}}}
#event {{IAC SB GMCP Room.Info IAC SE}} {{#line log {{{rooms}}} {{%1}};#math step {{$step + 1}};#if {{$step <= &path[]}} {{#send {{$path[$step]}}}} {{#send {{where}}}}}}
#action {{`create <name> <password>`}} {{#send {{create Tintin correct horse}}}}
#action {{shard=%1}} {{#line log {{{where}}} {{%0}};#end}}
#session telos {host} {port}
"#,
        rooms = log("rooms.log"),
        where = log("where.log"),
    )
}

/// The `Room.Info` bodies recorded, in order (a line is `Room.Info {json}`
/// or the JSON alone, as the TinTin++ version passes it).
fn recorded_rooms(path: &Path) -> anyhow::Result<Vec<Value>> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let json = &l[l.find('{').unwrap_or(0)..];
            serde_json::from_str(json).map_err(|e| anyhow::anyhow!("{l:?}: {e}"))
        })
        .collect()
}

fn tintin_output(path: &Path) -> String {
    let raw = std::fs::read(path).unwrap_or_default();
    telos_testkit::process::strip_ansi(&String::from_utf8_lossy(&raw))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tintin_walks_across_shards_with_gmcp_and_mccp2() -> anyhow::Result<()> {
    assert_eq!(zone_of(&start_room()), "city");
    let cluster = TwoShards::start(&[], &[])?;
    let gate = &cluster.gate;
    let tap = Tap::start(&gate.addr).await?;

    let path = path_to_zone(&start_room(), "forest");
    let map = WorldMap::starter();
    let mut rooms = vec![start_room()];
    for dir in &path {
        let here = rooms.last().expect("the start");
        let next = map.exit(here, dir).expect("the path's exits exist");
        rooms.push(next.to_string());
    }

    let dir = tempfile::tempdir()?;
    let file = dir.path().join("walk.tin");
    std::fs::write(&file, script(dir.path(), &tap.addr, &path))?;
    let out: PathBuf = dir.path().join("tintin.out");
    // Debian puts tt++ in /usr/games, which a non-login PATH may lack.
    let search = format!(
        "{}:/usr/games",
        std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into())
    );
    let mut tintin = TinTin(
        Command::new("tt++")
            .env("PATH", &search)
            .arg("-H")
            .arg("-G")
            .arg(&file)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out)?)
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| anyhow::anyhow!("tt++ (scripts/ensure-tools tt++): {e}"))?,
    );

    let rooms_log = dir.path().join("rooms.log");
    let mut status = None;
    let walked = until_progress("TinTin++ walking to the forest", STALL, || {
        if let Some(s) = tintin.0.try_wait()? {
            status = Some(s);
            return Ok(None);
        }
        let seen = recorded_rooms(&rooms_log).map(|r| r.len()).unwrap_or(0);
        Ok(Some((seen, tap.received().len())))
    })
    .await;
    let output = tintin_output(&out);
    walked.map_err(|e| anyhow::anyhow!("{e:#}\nTinTin++ printed:\n{output}"))?;
    let status = status.expect("exited");
    assert!(status.success(), "tt++ {status}:\n{output}");

    // Every room of the walk, in order, on both shards.
    let recorded = recorded_rooms(&rooms_log)?;
    let ids: Vec<&str> = recorded
        .iter()
        .map(|r| r["id"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(ids, rooms, "a Room.Info per room walked:\n{output}");
    for (info, id) in recorded.iter().zip(&rooms) {
        let expected = map.room(id).expect("a starter room");
        assert_eq!(info["name"], expected.name.as_str(), "{info}");
        assert_eq!(info["num"], u64::from(room_num(id)), "{info}");
        for (dir, to) in &expected.exits {
            assert_eq!(info["exits"][dir], u64::from(room_num(to)), "{info}");
        }
    }
    assert!(
        recorded
            .iter()
            .any(|r| zone_of(r["id"].as_str().unwrap_or("")) == "city")
    );
    assert!(
        recorded
            .iter()
            .any(|r| zone_of(r["id"].as_str().unwrap_or("")) == "forest")
    );
    let where_ = std::fs::read_to_string(dir.path().join("where.log"))?;
    assert!(where_.contains("shard=shard-b"), "{where_:?}");

    // Compression: TinTin++ says so, and the wire shows one zlib stream,
    // started before the login, carrying every Room.Info.
    assert!(output.contains("MCCP2 INITIALIZED"), "{output}");
    let wire = tap.received();
    let decoded = decode_wire(&wire)?;
    assert_eq!(decoded.streams, 1, "one MCCP2 stream");
    let at = decoded.first_stream_at.expect("a stream");
    let before = String::from_utf8_lossy(&decoded.plain[..at]);
    let after = String::from_utf8_lossy(&decoded.plain[at..]);
    assert!(
        !before.contains("Welcome"),
        "compression on before the login"
    );
    assert!(after.contains("Welcome, Tintin"));
    assert_eq!(after.matches("Room.Info").count(), rooms.len());
    eprintln!(
        "TinTin++ walked {ids:?}; {} bytes of output as {} on the wire",
        decoded.compressed_plain, decoded.compressed_wire
    );
    assert!(
        decoded.compressed_wire < decoded.compressed_plain,
        "{} bytes on the wire for {} of output",
        decoded.compressed_wire,
        decoded.compressed_plain
    );
    Ok(())
}
