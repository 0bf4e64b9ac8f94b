//! The soak harness restarts a shard whose port was taken meanwhile (issue
//! 17; overlap seed 749446916: a shard's `/metrics` port, picked free,
//! was bound by another process before the shard bound it — `Address
//! already in use` — and the run could not be made). On a shared machine
//! any port the harness picks can go before the shard binds it; the
//! harness starts the shard again on fresh ports instead of running on
//! without it.
//!
//! Made exact: the test kills a shard, binds its metrics port itself, and
//! restarts the shard.

use std::net::TcpListener;
use std::time::Duration;

use telos_testkit::metrics::scrape;
use telos_testkit::soak::cluster::Cluster;
use tokio::time::Instant;

/// Bounds a broken build's wait, not a timing claim.
const SETTLE: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_whose_metrics_port_was_taken_restarts_on_a_fresh_one() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut cluster = tokio::task::block_in_place(|| Cluster::start(dir.path(), 3, "info", false))?;
    let metrics = cluster.metrics_addrs();
    let old_addr = metrics.lock().unwrap()["shard-a#1"].clone();

    cluster.kill_shard(0);
    // Taken by someone else while the shard is down.
    let taken = TcpListener::bind(&old_addr)?;
    tokio::task::block_in_place(|| cluster.start_shard(0))?;

    let until = Instant::now() + SETTLE;
    let addr = loop {
        if let Some(status) = cluster.shard_exit(0)? {
            panic!(
                "the restarted shard exited ({status}) on its taken port:\n{}",
                cluster.shard_log(0)
            );
        }
        let now: Vec<(String, String)> = metrics
            .lock()
            .unwrap()
            .iter()
            .filter(|(name, _)| name.starts_with("shard-a#"))
            .map(|(n, a)| (n.clone(), a.clone()))
            .collect();
        assert_eq!(now.len(), 1, "one shard-a process is scraped: {now:?}");
        let (_, addr) = &now[0];
        if addr != &old_addr && scrape(addr).await.is_ok() {
            break addr.clone();
        }
        assert!(
            Instant::now() < until,
            "the restarted shard never served /metrics:\n{}",
            cluster.shard_log(0)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_ne!(addr, old_addr);
    drop(taken);
    Ok(())
}
