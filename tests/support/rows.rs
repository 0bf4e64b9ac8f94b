//! Reading what the world saved: a character's durable row, straight from
//! the store.

use std::time::Duration;

use anyhow::Context;
use telos_redis::store::Store;
use telos_world::game::from_state_json;
use tokio::time::Instant;

/// How often [`wait_journal`] looks again.
const POLL: Duration = Duration::from_millis(50);

/// The journal of `name`'s durable row.
pub async fn row_journal(store: &Store, name: &str) -> anyhow::Result<Vec<String>> {
    let row = store
        .load(&name.to_ascii_lowercase())
        .await?
        .with_context(|| format!("no row for {name}"))?;
    Ok(from_state_json(&row.state_json)?
        .journal
        .into_iter()
        .collect())
}

/// Wait until `name`'s durable row holds exactly `expected` as its journal
/// (saves land on the world's cadence); fails after `within`.
pub async fn wait_journal(
    store: &Store,
    name: &str,
    expected: &[String],
    within: Duration,
) -> anyhow::Result<()> {
    let until = Instant::now() + within;
    loop {
        let journal = row_journal(store, name).await;
        if journal.as_deref().ok() == Some(expected) {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < until,
            "{name}: the saved journal is {journal:?}, expected {expected:?}"
        );
        tokio::time::sleep(POLL).await;
    }
}
