//! The online-player list behind `who`: each shard publishes its own list
//! with a TTL, and a reader merges the lists of every live shard. Also the
//! words between players on different shards (`publish_comm`).

use std::time::Duration;

use super::args::{check_shard, ttl_ms};
use super::error::DirectoryError;
use super::handle::Directory;
use super::key_names;
use super::types::OnlinePlayer;

impl Directory {
    /// Replaces `shard`'s list. It expires after `ttl` unless republished,
    /// so a dead shard's players drop out of `who` by themselves.
    pub async fn publish_online(
        &self,
        shard: &str,
        players: &[OnlinePlayer],
        ttl: Duration,
    ) -> Result<(), DirectoryError> {
        check_shard(shard)?;
        let json = serde_json::to_string(players)
            .map_err(|e| DirectoryError::Invalid(format!("online list: {e}")))?;
        redis::cmd("SET")
            .arg(key_names::shard_online(shard))
            .arg(json)
            .arg("PX")
            .arg(ttl_ms(ttl)?)
            .exec_async(&mut self.conn())
            .await?;
        Ok(())
    }

    /// Everyone online on every live shard, sorted by name (case-insensitive).
    /// Filtering `wizinvis` players is the caller's job: it depends on who asks.
    pub async fn online(&self) -> Result<Vec<OnlinePlayer>, DirectoryError> {
        let shards = self.shards().await?;
        if shards.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = shards
            .iter()
            .map(|s| key_names::shard_online(&s.id))
            .collect();
        let lists: Vec<Option<String>> = redis::cmd("MGET")
            .arg(&keys)
            .query_async(&mut self.conn())
            .await?;
        let mut players = Vec::new();
        for (key, list) in keys.iter().zip(lists) {
            let Some(list) = list else { continue };
            let mut parsed: Vec<OnlinePlayer> =
                serde_json::from_str(&list).map_err(|e| DirectoryError::Corrupt {
                    key: key.clone(),
                    reason: e.to_string(),
                })?;
            players.append(&mut parsed);
        }
        players.sort_by(|a, b| {
            a.name
                .to_lowercase()
                .cmp(&b.name.to_lowercase())
                .then_with(|| a.name.cmp(&b.name))
        });
        Ok(players)
    }

    /// Publish `payload` on the comm channel ([`key_names::comm_channel`]);
    /// how many subscribers (shards) received it.
    pub async fn publish_comm(&self, payload: &str) -> Result<u64, DirectoryError> {
        let receivers: u64 = redis::cmd("PUBLISH")
            .arg(key_names::comm_channel())
            .arg(payload)
            .query_async(&mut self.conn())
            .await?;
        Ok(receivers)
    }
}
