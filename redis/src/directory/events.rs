//! The cluster's own event stream (`telos:events`, a Redis stream trimmed
//! with `XADD MAXLEN ~` to about [`EVENTS_MAXLEN`] entries): what the
//! shards did and why, in the order Redis took it — a process starting
//! (its incarnation and version), draining and leaving; a transfer
//! proposed (by whom: [`Cause`]) or cancelled; a zone moved (why, and how
//! long its transfer was pending) or claimed free. The operator page
//! reads it; a change faster than any poll is still there.
//!
//! A zone's move, a proposal, a free claim and a clean exit are written by
//! the script that makes the change, in the same atomic step; a process's
//! start and drain, and a cancellation, by the process right after (best
//! effort: an event that could not be written is logged, and the change
//! itself stands).

use serde::Serialize;

use super::error::DirectoryError;
use super::handle::Directory;
use super::key_names;

/// About this many events are kept (`MAXLEN ~`: Redis trims whole
/// macro-nodes, so a few more may stay): hours of a busy cluster's moves,
/// at a few hundred bytes each.
pub const EVENTS_MAXLEN: u64 = 1000;

/// Why a zone moved, or a move was proposed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// `telosctl transfer`, `Admin.TransferZone`.
    Operator,
    /// A shard draining (SIGTERM) handed its zones on.
    Drain,
    /// The rebalancer moved it.
    Rebalance,
}

impl Cause {
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Operator => "operator",
            Cause::Drain => "drain",
            Cause::Rebalance => "rebalance",
        }
    }
}

/// One entry of the stream. `kind` is one of `shard_joined` (`shard`,
/// `addr`, `version`, `incarnation`), `shard_draining` and `shard_left`
/// (`shard`, `incarnation`), `transfer_proposed` (`zone`, `from`, `to`,
/// `cause`), `transfer_cancelled` (`zone`, `from`, `to`, `reason`),
/// `zone_moved` (`zone`, `from`, `to`, `gen`, `cause`, and for a transfer
/// `pending_ms`) and `zone_claimed` (`zone`, `shard`, `gen`, `cause`
/// `claim`: a free zone claimed — at a shard's start, or adopted after its
/// owner was lost; or `restart`: a restarted process that proved its
/// predecessor gone took its live lease over).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ClusterEvent {
    /// The entry's id, `<ms>-<seq>` on the Redis server's clock (empty
    /// until written).
    pub id: String,
    pub kind: String,
    pub shard: Option<String>,
    pub zone: Option<String>,
    pub from: Option<String>,
    pub to: Option<String>,
    pub cause: Option<String>,
    pub reason: Option<String>,
    pub addr: Option<String>,
    pub version: Option<String>,
    pub incarnation: Option<u64>,
    pub r#gen: Option<u64>,
    pub pending_ms: Option<u64>,
}

impl ClusterEvent {
    /// A process of `shard` started: its incarnation (the registry's
    /// fencing token, one per process) and its build's version.
    pub fn joined(shard: &str, addr: &str, version: &str, incarnation: u64) -> Self {
        Self {
            kind: "shard_joined".into(),
            shard: Some(shard.into()),
            addr: Some(addr.into()),
            version: Some(version.into()),
            incarnation: Some(incarnation),
            ..Self::default()
        }
    }

    /// `kind` (`shard_draining`, `shard_left`) of this process of `shard`.
    pub fn shard(kind: &str, shard: &str, incarnation: u64) -> Self {
        Self {
            kind: kind.into(),
            shard: Some(shard.into()),
            incarnation: Some(incarnation),
            ..Self::default()
        }
    }

    /// The millisecond part of the id: when Redis took the event.
    pub fn at_ms(&self) -> u64 {
        self.id
            .split('-')
            .next()
            .and_then(|ms| ms.parse().ok())
            .unwrap_or(0)
    }

    fn fields(&self) -> Vec<(&'static str, String)> {
        let text = [
            ("kind", Some(&self.kind)),
            ("shard", self.shard.as_ref()),
            ("zone", self.zone.as_ref()),
            ("from", self.from.as_ref()),
            ("to", self.to.as_ref()),
            ("cause", self.cause.as_ref()),
            ("reason", self.reason.as_ref()),
            ("addr", self.addr.as_ref()),
            ("version", self.version.as_ref()),
        ];
        let numbers = [
            ("incarnation", self.incarnation),
            ("gen", self.r#gen),
            ("pending_ms", self.pending_ms),
        ];
        let text = text.into_iter().filter_map(|(k, v)| Some((k, v?.clone())));
        let numbers = numbers
            .into_iter()
            .filter_map(|(k, v)| Some((k, v?.to_string())));
        text.chain(numbers).collect()
    }

    fn from_entry(id: String, pairs: &[String]) -> Self {
        let mut e = Self {
            id,
            ..Self::default()
        };
        for kv in pairs.chunks_exact(2) {
            let (k, v) = (kv[0].as_str(), kv[1].clone());
            let number = || v.parse().ok();
            match k {
                "kind" => e.kind = v,
                "shard" => e.shard = Some(v),
                "zone" => e.zone = Some(v),
                "from" => e.from = Some(v),
                "to" => e.to = Some(v),
                "cause" => e.cause = Some(v),
                "reason" => e.reason = Some(v),
                "addr" => e.addr = Some(v),
                "version" => e.version = Some(v),
                "incarnation" => e.incarnation = number(),
                "gen" => e.r#gen = number(),
                "pending_ms" => e.pending_ms = number(),
                _ => {}
            }
        }
        e
    }
}

type Entries = Vec<(String, Vec<String>)>;

impl Directory {
    /// Append `event` to the stream (its `id` is ignored: Redis mints it).
    pub async fn record_event(&self, event: &ClusterEvent) -> Result<(), DirectoryError> {
        let mut cmd = redis::cmd("XADD");
        cmd.arg(key_names::events())
            .arg("MAXLEN")
            .arg("~")
            .arg(EVENTS_MAXLEN)
            .arg("*");
        for (k, v) in event.fields() {
            cmd.arg(k).arg(v);
        }
        cmd.exec_async(&mut self.conn()).await?;
        Ok(())
    }

    /// The last `count` events, oldest first.
    pub async fn recent_events(&self, count: usize) -> Result<Vec<ClusterEvent>, DirectoryError> {
        let mut entries: Entries = redis::cmd("XREVRANGE")
            .arg(key_names::events())
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(count)
            .query_async(&mut self.conn())
            .await?;
        entries.reverse();
        Ok(parse(entries))
    }

    /// Up to `count` events after the one with id `after`, oldest first.
    pub async fn events_after(
        &self,
        after: &str,
        count: usize,
    ) -> Result<Vec<ClusterEvent>, DirectoryError> {
        let entries: Entries = redis::cmd("XRANGE")
            .arg(key_names::events())
            .arg(format!("({after}"))
            .arg("+")
            .arg("COUNT")
            .arg(count)
            .query_async(&mut self.conn())
            .await?;
        Ok(parse(entries))
    }
}

fn parse(entries: Entries) -> Vec<ClusterEvent> {
    entries
        .into_iter()
        .map(|(id, pairs)| ClusterEvent::from_entry(id, &pairs))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_reads_back_as_written() {
        let e = ClusterEvent {
            zone: Some("forest".into()),
            from: Some("a".into()),
            to: Some("b".into()),
            cause: Some(Cause::Drain.as_str().into()),
            r#gen: Some(7),
            ..ClusterEvent::shard("zone_moved", "a", 3)
        };
        let pairs: Vec<String> = e
            .fields()
            .into_iter()
            .flat_map(|(k, v)| [k.to_string(), v])
            .collect();
        let back = ClusterEvent::from_entry("1700000000123-0".into(), &pairs);
        assert_eq!(back.at_ms(), 1_700_000_000_123);
        assert_eq!(
            back,
            ClusterEvent {
                id: "1700000000123-0".into(),
                ..e
            }
        );
    }
}
