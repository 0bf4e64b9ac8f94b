//! What the rebalancer keeps in Redis: each zone's home (the shard whose
//! `--zones` lists it), the leader lease (one shard decides at a time) and
//! the zones it moved lately (hysteresis: none moves twice within the
//! window, whichever shard leads).

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;
use std::time::Duration;

use redis::Script;

use super::args::{check_shard, check_zone, ttl_ms};
use super::error::DirectoryError;
use super::events::Cause;
use super::handle::Directory;
use super::key_names;
use super::transfer::{Proposal, ProposalRejected};

static LEAD: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("rebalance_lead.lua")));

impl Directory {
    /// An operator's transfer (`telosctl transfer`, `Admin.TransferZone`):
    /// proposed like any other, and the target becomes the zone's home, so
    /// the rebalancer keeps it there (until the shard whose `--zones` lists
    /// it starts again).
    pub async fn propose_operator_transfer(
        &self,
        zone: &str,
        to: &str,
    ) -> Result<Result<Proposal, ProposalRejected>, DirectoryError> {
        let answer = self.propose_transfer(zone, to, Cause::Operator).await?;
        if answer.is_ok() {
            self.set_homes(to, &[zone.to_string()]).await?;
        }
        Ok(answer)
    }

    /// Record `shard` as the home of each of `zones` (its boot zones). The
    /// last shard to start with a zone in its `--zones` is its home.
    pub async fn set_homes(&self, shard: &str, zones: &[String]) -> Result<(), DirectoryError> {
        check_shard(shard)?;
        if zones.is_empty() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        for zone in zones {
            check_zone(zone)?;
            pipe.set(key_names::zone_home(zone), shard).ignore();
        }
        pipe.exec_async(&mut self.conn()).await?;
        Ok(())
    }

    /// The home shard of each of `zones` that has one.
    pub async fn homes(&self, zones: &[String]) -> Result<HashMap<String, String>, DirectoryError> {
        if zones.is_empty() {
            return Ok(HashMap::new());
        }
        let keys: Vec<String> = zones.iter().map(|z| key_names::zone_home(z)).collect();
        let homes: Vec<Option<String>> = redis::cmd("MGET")
            .arg(keys)
            .query_async(&mut self.conn())
            .await?;
        Ok(zones
            .iter()
            .zip(homes)
            .filter_map(|(z, h)| h.map(|h| (z.clone(), h)))
            .collect())
    }

    /// Take or keep the rebalancer's leader lease for `ttl`: true when
    /// `shard` leads.
    pub async fn lead_rebalance(&self, shard: &str, ttl: Duration) -> Result<bool, DirectoryError> {
        check_shard(shard)?;
        let led: i64 = LEAD
            .key(key_names::rebalance_leader())
            .arg(shard)
            .arg(ttl_ms(ttl)?)
            .invoke_async(&mut self.conn())
            .await?;
        Ok(led == 1)
    }

    /// The shard leading the rebalancer now, if any.
    pub async fn rebalance_leader(&self) -> Result<Option<String>, DirectoryError> {
        Ok(redis::cmd("GET")
            .arg(key_names::rebalance_leader())
            .query_async(&mut self.conn())
            .await?)
    }

    /// `zone` was moved by the rebalancer: not again for `window`.
    pub async fn mark_rebalanced(
        &self,
        zone: &str,
        window: Duration,
    ) -> Result<(), DirectoryError> {
        check_zone(zone)?;
        let _: () = redis::cmd("SET")
            .arg(key_names::zone_rebalanced(zone))
            .arg(1)
            .arg("PX")
            .arg(ttl_ms(window)?)
            .query_async(&mut self.conn())
            .await?;
        Ok(())
    }

    /// Which of `zones` the rebalancer moved within its window.
    pub async fn rebalanced_lately(
        &self,
        zones: &[String],
    ) -> Result<HashSet<String>, DirectoryError> {
        self.marked(zones, key_names::zone_rebalanced).await
    }

    /// A move to or from each of `shards` completed: leave them out of
    /// the rebalancer's decisions for `window`, until their registry
    /// entries count the players that moved.
    pub async fn mark_settling(
        &self,
        shards: &[&str],
        window: Duration,
    ) -> Result<(), DirectoryError> {
        let mut pipe = redis::pipe();
        for shard in shards {
            check_shard(shard)?;
            pipe.cmd("SET")
                .arg(key_names::shard_settling(shard))
                .arg(1)
                .arg("PX")
                .arg(ttl_ms(window)?)
                .ignore();
        }
        pipe.exec_async(&mut self.conn()).await?;
        Ok(())
    }

    /// Which of `shards` are settling after a move.
    pub async fn settling(&self, shards: &[String]) -> Result<HashSet<String>, DirectoryError> {
        self.marked(shards, key_names::shard_settling).await
    }

    /// Which of `names` have their mark (the key `key` names) set now.
    async fn marked(
        &self,
        names: &[String],
        key: fn(&str) -> String,
    ) -> Result<HashSet<String>, DirectoryError> {
        if names.is_empty() {
            return Ok(HashSet::new());
        }
        let keys: Vec<String> = names.iter().map(|n| key(n)).collect();
        let marks: Vec<Option<String>> = redis::cmd("MGET")
            .arg(keys)
            .query_async(&mut self.conn())
            .await?;
        Ok(names
            .iter()
            .zip(marks)
            .filter_map(|(n, m)| m.map(|_| n.clone()))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use telos_testkit::RedisServer;

    use super::*;

    #[tokio::test]
    async fn one_leader_at_a_time_homes_and_the_hysteresis_window() {
        let server = RedisServer::start().expect("redis-server");
        let dir = Directory::connect(&server.url).await.unwrap();
        let ttl = Duration::from_millis(300);
        assert!(dir.lead_rebalance("shard-a", ttl).await.unwrap());
        assert!(!dir.lead_rebalance("shard-b", ttl).await.unwrap());
        assert!(dir.lead_rebalance("shard-a", ttl).await.unwrap(), "renewed");
        assert_eq!(
            dir.rebalance_leader().await.unwrap().as_deref(),
            Some("shard-a")
        );
        tokio::time::sleep(ttl * 2).await;
        assert!(
            dir.lead_rebalance("shard-b", ttl).await.unwrap(),
            "a dead leader is replaced"
        );

        dir.set_homes("shard-a", &["city".into()]).await.unwrap();
        dir.set_homes("shard-b", &["forest".into(), "docks".into()])
            .await
            .unwrap();
        let zones: Vec<String> = ["city", "forest", "keep"].map(String::from).into();
        let homes = dir.homes(&zones).await.unwrap();
        assert_eq!(homes.len(), 2);
        assert_eq!(homes["city"], "shard-a");
        assert_eq!(homes["forest"], "shard-b");

        dir.mark_rebalanced("forest", ttl).await.unwrap();
        let lately = dir.rebalanced_lately(&zones).await.unwrap();
        assert_eq!(lately, HashSet::from(["forest".to_string()]));
        tokio::time::sleep(ttl * 2).await;
        assert!(dir.rebalanced_lately(&zones).await.unwrap().is_empty());

        let shards: Vec<String> = ["shard-a", "shard-b", "shard-c"].map(String::from).into();
        dir.mark_settling(&["shard-a", "shard-c"], ttl)
            .await
            .unwrap();
        let settling = dir.settling(&shards).await.unwrap();
        assert_eq!(
            settling,
            HashSet::from(["shard-a".to_string(), "shard-c".to_string()])
        );
        tokio::time::sleep(ttl * 2).await;
        assert!(dir.settling(&shards).await.unwrap().is_empty());
    }
}
