//! The probes an orchestrator uses (issue 29): `/livez` and `/readyz` on
//! the metrics listener of the world and the gate. Both are ready once up
//! (the world after claiming its zones, the gate once it reaches Redis and
//! a live shard); both flip to not ready while Redis is lost, and back once
//! it returns; a SIGTERM makes the world not ready at once, while it
//! drains (to a peer that stopped answering, so the drain lasts) and
//! still answers `/livez`. Real `redis-server`, real binaries.

use std::time::{Duration, Instant};

use telos_testkit::RedisServer;
use telos_testkit::cli::telosctl;
use telos_testkit::keys::TempKeys;
use telos_testkit::metrics::probe;
use telos_testkit::play::Channels;
use telos_testkit::process::{blocking, start_keyed_gate, start_keyed_world};
use telos_testkit::redis::free_port;
use telos_testkit::world::starter_zones;
use telos_tls::Role;
use tonic::transport::Channel;
use tonic_health::ServingStatus;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

/// Bounds each wait; the probes settle in about a second.
const WAIT: Duration = Duration::from_secs(20);

async fn until(addr: &str, path: &str, want: Option<u16>, what: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + WAIT;
    loop {
        let got = probe(addr, path).await;
        if got == want {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{what}: {addr}{path} answered {got:?}, not {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether `shard` holds the start zone's lease, as `telosctl` reads it.
/// Ask `grpc.health.v1` (service "") until it answers `want`.
async fn grpc_until(
    client: &HealthClient<Channel>,
    want: ServingStatus,
    what: &str,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + WAIT;
    loop {
        let asked = client
            .clone()
            .check(HealthCheckRequest {
                service: String::new(),
            })
            .await;
        let status = asked.as_ref().map(|r| r.get_ref().status);
        if status.as_ref().is_ok_and(|s| *s == want as i32) {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "grpc.health.v1 never said {want:?} ({what}): {asked:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn owns_city(url: &str, shard: &str) -> bool {
    let Ok(out) = telosctl(url, &["status", "--json"]) else {
        return false;
    };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&out.stdout) else {
        return false;
    };
    v["zones"].as_array().is_some_and(|zones| {
        zones
            .iter()
            .any(|z| z["id"] == "city" && z["owner"] == shard)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_flips_with_redis_and_at_a_drain_while_liveness_holds() -> anyhow::Result<()> {
    // Durable: the restart keeps the leases, as a production Redis does.
    let mut redis = RedisServer::start_durable()?;
    let keys = TempKeys::generate()?;
    let zones = starter_zones();
    let world_metrics = format!("127.0.0.1:{}", free_port());
    let flags = ["--metrics-listen", world_metrics.as_str()];
    let mut world = start_keyed_world("health", &redis.url, &zones, keys.path(), None, &flags)?;
    let gate_metrics = format!("127.0.0.1:{}", free_port());
    let _gate = start_keyed_gate(
        &redis.url,
        keys.path(),
        &["--metrics-listen", &gate_metrics],
    )?;
    let both = [("world", &world_metrics), ("gate", &gate_metrics)];

    // grpc.health.v1 on the world's gRPC port, asked with a certificate of
    // the cluster (any role): SERVING exactly while /readyz says 200.
    let grpc = Channels::tls(keys.tls(Role::Gate)).channel(&world.addr)?;
    let grpc = HealthClient::new(grpc);
    for (who, addr) in both {
        until(addr, "/readyz", Some(200), &format!("{who} up")).await?;
        until(addr, "/livez", Some(200), who).await?;
        until(addr, "/metrics", Some(200), who).await?;
    }

    // What the Compose healthchecks run (the image has no HTTP client).
    let telosctl_probe = |addr: &str| {
        let mut cmd = telos_testkit::cli::clean_command("telosctl");
        cmd.args(["probe", &format!("http://{addr}/readyz")]);
        blocking(|| telos_testkit::cli::run_to_exit("telosctl-probe", cmd, WAIT))
    };
    for (who, addr) in both {
        let ok = telosctl_probe(addr)?;
        assert!(
            ok.success() && ok.stdout.starts_with("200 OK"),
            "{who}: {ok:?}"
        );
    }

    grpc_until(&grpc, ServingStatus::Serving, "the world up").await?;
    redis.kill();
    grpc_until(&grpc, ServingStatus::NotServing, "the world without Redis").await?;
    for (who, addr) in both {
        until(addr, "/readyz", Some(503), &format!("{who} without Redis")).await?;
        assert_eq!(probe(addr, "/livez").await, Some(200), "{who} alive");
        let refused = telosctl_probe(addr)?;
        assert!(
            !refused.success() && refused.stderr.contains("503"),
            "{who}: {refused:?}"
        );
    }
    redis.restart()?;
    for (who, addr) in both {
        until(
            addr,
            "/readyz",
            Some(200),
            &format!("{who} with Redis back"),
        )
        .await?;
    }
    grpc_until(&grpc, ServingStatus::Serving, "the world with Redis back").await?;

    // The restarted Redis forgot the leases: the world claims its zones
    // again (its boot loop), and has them to drain below.
    let deadline = Instant::now() + WAIT;
    while !owns_city(&redis.url, "health") {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the world never claimed city again"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // A peer that stopped answering (SIGSTOP) is where the drain hands the
    // zones: it waits on it, and meanwhile the world says it is alive but
    // takes no one.
    let peer_metrics = format!("127.0.0.1:{}", free_port());
    let flags = ["--metrics-listen", peer_metrics.as_str()];
    let no_zones: &[&str] = &[];
    let mut peer = start_keyed_world("peer", &redis.url, no_zones, keys.path(), None, &flags)?;
    until(&peer_metrics, "/readyz", Some(200), "the peer up").await?;
    peer.signal(libc::SIGSTOP);
    world.signal(libc::SIGTERM);
    until(&world_metrics, "/readyz", Some(503), "world draining").await?;
    grpc_until(&grpc, ServingStatus::NotServing, "the world draining").await?;
    assert_eq!(probe(&world_metrics, "/livez").await, Some(200));
    peer.signal(libc::SIGCONT);
    world.kill();
    peer.kill();
    Ok(())
}
