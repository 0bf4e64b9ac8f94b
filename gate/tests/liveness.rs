//! The gate's hung-shard watch ([`telos_gate::liveness`]) against fake
//! shards: a shard missing from the registry that still answers keeps its
//! links (a Redis restart empties the registry at once), and one that
//! stopped answering — its traffic frozen behind a proxy, as a SIGSTOPped
//! process freezes it — loses them within the watch's bound, its players
//! resuming elsewhere with their unapplied lines.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::*;
use telos_gate::liveness::WATCH_PERIOD;
use telos_gate::probe::PROBE_TIMEOUT;
use telos_gate::registry::{BoxFuture, RegistryError};
use telos_gate::{LiveShard, ShardRegistry, serve};
use telos_proto::v1::client_frame::Frame as C;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// A registry the test rewrites: where logins go, who heartbeats, and how
/// often the gate has asked who heartbeats.
#[derive(Default)]
struct TestRegistry {
    live: Mutex<Vec<String>>,
    heartbeating: Mutex<Vec<String>>,
    asked: AtomicUsize,
}

fn shards(addrs: &Mutex<Vec<String>>) -> Vec<LiveShard> {
    addrs
        .lock()
        .unwrap()
        .iter()
        .map(|a| LiveShard {
            id: a.clone(),
            addr: a.clone(),
            incarnation: 0,
        })
        .collect()
}

impl TestRegistry {
    fn set(&self, live: &[&str], heartbeating: &[&str]) {
        *self.live.lock().unwrap() = live.iter().map(|s| s.to_string()).collect();
        *self.heartbeating.lock().unwrap() = heartbeating.iter().map(|s| s.to_string()).collect();
    }

    /// Wait until the gate asked who heartbeats `n` more times: the watch
    /// finishes a round (its probes) before it asks again.
    async fn rounds(&self, n: usize) {
        let until = self.asked.load(Ordering::SeqCst) + n;
        tokio::time::timeout(WAIT, async {
            while self.asked.load(Ordering::SeqCst) < until {
                tokio::time::sleep(WATCH_PERIOD / 10).await;
            }
        })
        .await
        .expect("the gate stopped watching the registry");
    }
}

impl ShardRegistry for TestRegistry {
    fn live_shards(&self) -> BoxFuture<'_, Result<Vec<LiveShard>, RegistryError>> {
        Box::pin(async move { Ok(shards(&self.live)) })
    }

    fn heartbeating(&self) -> BoxFuture<'_, Result<Vec<LiveShard>, RegistryError>> {
        Box::pin(async move {
            self.asked.fetch_add(1, Ordering::SeqCst);
            Ok(shards(&self.heartbeating))
        })
    }
}

async fn gate_with(registry: Arc<TestRegistry>) -> (std::net::SocketAddr, CancellationToken) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    tokio::spawn(serve(listener, test_config(), registry, stop.clone()));
    (addr, stop)
}

/// A TCP proxy to `upstream` that can freeze: while frozen it moves no
/// byte either way and keeps every connection open, as a stopped process
/// does. Returns its address and the switch.
async fn freezable_proxy(upstream: String) -> (String, watch::Sender<bool>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (frozen, _) = watch::channel(false);
    let switch = frozen.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = TcpStream::connect(&upstream).await else {
                continue;
            };
            let (cr, cw) = client.into_split();
            let (sr, sw) = server.into_split();
            tokio::spawn(pump(cr, sw, frozen.subscribe()));
            tokio::spawn(pump(sr, cw, frozen.subscribe()));
        }
    });
    (addr, switch)
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut frozen: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let thawed = frozen.wait_for(|f| !*f).await.is_ok();
        if !thawed || to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

#[tokio::test]
async fn a_shard_missing_from_the_registry_that_answers_keeps_its_links() {
    let mut shard = FakeShard::start().await;
    let registry = Arc::new(TestRegistry::default());
    registry.set(&[&shard.addr], &[&shard.addr]);
    let (gate, _stop) = gate_with(registry.clone()).await;
    let mut p = Player::connect(gate).await;
    p.send("connect Ivy password1\n").await;
    let (mut s, _) = accept_login(&mut shard, "Ivy", "cred-i").await;
    p.expect("Welcome, Ivy").await;

    // The registry empties, as after a Redis restart: the shard is probed,
    // answers (a fake serves no health check: `Unimplemented` is an
    // answer), and its link stays.
    registry.set(&[], &[]);
    registry.rounds(3).await;
    p.send("still here\n").await;
    assert_eq!(s.input().await, (1, "still here".into()));
    assert!(
        !p.text().contains("shimmers"),
        "a healthy link was torn down: {:?}",
        p.text()
    );
}

#[tokio::test]
async fn a_shard_that_stops_answering_loses_its_links_within_the_bound() {
    let mut hung = FakeShard::start().await;
    let (proxy, freeze) = freezable_proxy(hung.addr.clone()).await;
    let mut next = FakeShard::start().await;
    let registry = Arc::new(TestRegistry::default());
    registry.set(&[&proxy], &[&proxy]);
    let (gate, _stop) = gate_with(registry.clone()).await;
    let mut p = Player::connect(gate).await;
    p.send("connect Jody password1\n").await;
    let (mut s1, login) = accept_login(&mut hung, "Jody", "cred-j").await;
    p.expect("Welcome, Jody").await;
    p.send("one\n").await;
    assert_eq!(s1.input().await, (1, "one".into()));

    // The shard hangs with its connection open, and its heartbeat lapses.
    freeze.send_replace(true);
    registry.set(&[&next.addr], &[&next.addr]);
    p.send("two\n").await;
    let hung_at = tokio::time::Instant::now();

    let mut s2 = next.next().await;
    let took = hung_at.elapsed();
    match s2.recv().await {
        Some(C::Resume(r)) => {
            assert_eq!((r.name.as_str(), r.credential.as_str()), ("Jody", "cred-j"));
            assert_eq!(r.conn_id, login.conn_id);
        }
        other => panic!("expected Resume, got {other:?}"),
    }
    // A round to see the lapse, the probe's bound, and slack for the
    // resume itself; the HTTP/2 keepalive would take 10–20 s.
    let bound = WATCH_PERIOD * 2 + PROBE_TIMEOUT + Duration::from_secs(1);
    assert!(
        took <= bound,
        "left the hung shard after {took:?} (bound {bound:?})"
    );
    p.expect("The world shimmers").await;
    s2.attached(0, "Jody", "cred-j2").await;
    assert_eq!(s2.input().await, (1, "one".into()));
    assert_eq!(s2.input().await, (2, "two".into()));
}
