//! `docker-compose.yml` is valid and wired as the operator guide says.
//! Debian's `docker-compose` validates without a Docker engine.

use std::process::Command;

use telos_testkit::process::repo_root;

#[test]
fn compose_file_validates_and_drains_before_it_kills() {
    let out = Command::new("docker-compose")
        .arg("-f")
        .arg(repo_root().join("docker-compose.yml"))
        .arg("config")
        .output()
        .expect("docker-compose is installed (scripts/ensure-tools)");
    assert!(
        out.status.success(),
        "docker-compose config failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let config = String::from_utf8_lossy(&out.stdout);
    for service in [
        "redis:",
        "world-a:",
        "world-b:",
        "world-c:",
        "gate:",
        "jaeger:",
        "prometheus:",
    ] {
        assert!(config.contains(service), "missing service {service}");
    }
    // Mutual TLS between every process: each world runs on the shard key
    // folder, the gate on the gate's.
    assert_eq!(
        config.matches("TELOS_KEYS: /keys/shard").count(),
        3,
        "every world runs keyed (TLS)"
    );
    assert_eq!(
        config.matches("TELOS_KEYS: /keys/gate").count(),
        1,
        "the gate dials the shards with its certificate"
    );
    assert!(
        config.contains("--appendonly"),
        "Redis runs with the append-only file"
    );
    // Every world shard gets longer than its drain deadline (30 s) to exit.
    let graces: Vec<&str> = config
        .lines()
        .filter_map(|l| l.trim().strip_prefix("stop_grace_period:"))
        .map(str::trim)
        .collect();
    assert!(
        graces.iter().filter(|g| **g == "45s").count() >= 3,
        "{graces:?}"
    );
    // Every Telos process is probed on its readiness endpoint (the image
    // has no HTTP client: telosctl probe).
    assert_eq!(
        config.matches("http://127.0.0.1:9100/readyz").count(),
        4,
        "three worlds and the gate probed:\n{config}"
    );
    // Every shard advertises an address its peers can dial.
    for w in ["world-a:7100", "world-b:7100", "world-c:7100"] {
        assert!(config.contains(w), "{w} not advertised");
    }
}

/// The Sentinel override (`deploy/docker-compose.sentinel.yml`, merged over
/// the base file as docs/operations.md runs it): two replicas of `redis`,
/// three Sentinels monitoring it with quorum 2, and every Telos process
/// finding the primary through all three.
#[test]
fn sentinel_override_adds_a_replica_three_sentinels_and_points_telos_at_them() {
    let out = Command::new("docker-compose")
        .arg("-f")
        .arg(repo_root().join("docker-compose.yml"))
        .arg("-f")
        .arg(repo_root().join("deploy/docker-compose.sentinel.yml"))
        .arg("config")
        .output()
        .expect("docker-compose is installed (scripts/ensure-tools)");
    assert!(
        out.status.success(),
        "docker-compose config failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let config = String::from_utf8_lossy(&out.stdout);
    for service in [
        "redis-replica:",
        "redis-replica-2:",
        "sentinel-1:",
        "sentinel-2:",
        "sentinel-3:",
    ] {
        assert!(config.contains(service), "missing service {service}");
    }
    assert!(config.contains("--replicaof"), "the replica follows redis");
    assert_eq!(
        config
            .matches("sentinel monitor telos redis 6379 2")
            .count(),
        3,
        "three Sentinels, quorum 2"
    );
    let url = "redis+sentinel://sentinel-1:26379,sentinel-2:26379,sentinel-3:26379/telos";
    assert_eq!(
        config.matches(url).count(),
        4,
        "three worlds and the gate find the primary through Sentinel"
    );
    assert!(
        !config.contains("TELOS_REDIS_URL: redis://redis:6379"),
        "nothing talks to the first primary directly"
    );
    // Leases outlast a failover (3 s down-after plus the promotion).
    assert_eq!(config.matches("TELOS_LEASE_TTL_MS: '10000'").count(), 3);
}
