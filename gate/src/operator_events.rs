//! What the operator page says about the cluster's events: each entry of
//! the shards' own event stream (`telos:events`) as one line with its
//! cause ([`describe`]), and the one change no shard can report — a shard
//! whose registry entry expired without its `shard_left` (a crash, a
//! stall, a lost link to Redis), seen by comparing two reads of the
//! registry ([`lost_shards`]).

use serde::Serialize;
use telos_redis::directory::events::ClusterEvent;
use telos_redis::status::ShardRow;

/// One line of the page's event table.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Event {
    /// When it happened (Unix ms: the Redis server's clock for the
    /// stream's events, the gate's for a lost shard).
    pub at_ms: u64,
    /// The stream's fields (`kind`, `shard`, `zone`, `from`, `to`,
    /// `cause`, `incarnation`, `version`, `gen`, ...); `kind` is
    /// `shard_lost` for a registry entry that expired.
    #[serde(flatten)]
    pub event: ClusterEvent,
    /// For a transfer's move: how long it was pending (its players' pause).
    pub pending_s: Option<f64>,
    pub text: String,
}

/// `e` as a line of the page.
pub fn describe(e: ClusterEvent) -> Event {
    let s = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    let (shard, zone, from, to) = (s(&e.shard), s(&e.zone), s(&e.from), s(&e.to));
    let inc = e.incarnation.unwrap_or(0);
    let r#gen = e.r#gen.unwrap_or(0);
    let cause = s(&e.cause);
    let pending_s = e.pending_ms.map(|ms| ms as f64 / 1000.0);
    let text = match e.kind.as_str() {
        "shard_joined" => format!(
            "shard {shard} started: incarnation {inc}, version {}, at {}",
            s(&e.version),
            s(&e.addr)
        ),
        "shard_draining" => format!("shard {shard} (incarnation {inc}) is draining"),
        "shard_left" => format!("shard {shard} (incarnation {inc}) left"),
        "transfer_proposed" => {
            format!("transfer of {zone}: {from} -> {to} proposed ({cause})")
        }
        "transfer_cancelled" => format!(
            "transfer of {zone}: {from} -> {to} cancelled: {}",
            s(&e.reason)
        ),
        "zone_moved" => {
            let why = match (cause.as_str(), pending_s) {
                ("drain", _) => "drain".to_string(),
                (c, Some(p)) => format!("{c} transfer; pending {p:.1} s"),
                (c, None) => format!("{c} transfer"),
            };
            format!("zone {zone}: {from} -> {to}, gen {gen} ({why})")
        }
        // An owner change like the others; who held it before is not
        // known (its lease lapsed, or there was none).
        "zone_claimed" if e.cause.as_deref() == Some("restart") => format!(
            "zone {zone}: {shard} -> {shard}, gen {gen} (taken over by the shard's restarted process: its predecessor proven gone)"
        ),
        "zone_claimed" => format!(
            "zone {zone}: - -> {shard}, gen {gen} (claimed free: the shard started, or the zone's owner was lost)"
        ),
        other => format!("{other}: {e:?}"),
    };
    Event {
        at_ms: e.at_ms(),
        event: e,
        pending_s,
        text,
    }
}

/// Shards in `before` missing from `after` whose exit the stream has not
/// told (no `shard_left` for that process in `told`): their registry
/// entry expired. The stream is read after the registry, and a clean
/// exit writes its event in the same step that removes the entry, so a
/// clean exit is never reported here.
pub fn lost_shards(
    before: &[ShardRow],
    after: &[ShardRow],
    told: &[Event],
    at_ms: u64,
) -> Vec<Event> {
    before
        .iter()
        .filter(|o| !after.iter().any(|s| s.id == o.id))
        .filter(|o| {
            !told.iter().any(|e| {
                e.event.kind == "shard_left"
                    && e.event.shard.as_deref() == Some(o.id.as_str())
                    && e.event.incarnation.unwrap_or(0) >= o.incarnation
            })
        })
        .map(|o| Event {
            at_ms,
            event: ClusterEvent::shard("shard_lost", &o.id, o.incarnation),
            pending_s: None,
            text: format!(
                "shard {} (incarnation {}) vanished from the registry without leaving: crashed, stalled or cut off from Redis",
                o.id, o.incarnation
            ),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(id: &str, incarnation: u64) -> ShardRow {
        ShardRow {
            id: id.into(),
            addr: "127.0.0.1:1".into(),
            state: "live".into(),
            players: 0,
            capacity: 10,
            incarnation,
            version: None,
            handoff_version: 1,
        }
    }

    fn moved(cause: &str, pending_ms: Option<u64>) -> ClusterEvent {
        ClusterEvent {
            id: "1000-0".into(),
            kind: "zone_moved".into(),
            zone: Some("forest".into()),
            from: Some("a".into()),
            to: Some("b".into()),
            cause: Some(cause.into()),
            r#gen: Some(2),
            pending_ms,
            ..ClusterEvent::default()
        }
    }

    #[test]
    fn each_move_says_why() {
        let e = describe(moved("operator", Some(400)));
        assert_eq!(
            e.text,
            "zone forest: a -> b, gen 2 (operator transfer; pending 0.4 s)"
        );
        assert_eq!((e.at_ms, e.pending_s), (1000, Some(0.4)));
        assert_eq!(
            describe(moved("drain", None)).text,
            "zone forest: a -> b, gen 2 (drain)"
        );
        assert_eq!(
            describe(moved("rebalance", Some(0))).text,
            "zone forest: a -> b, gen 2 (rebalance transfer; pending 0.0 s)"
        );
        let joined = describe(ClusterEvent::joined("a", "h:1", "0.1.0", 7));
        assert_eq!(
            joined.text,
            "shard a started: incarnation 7, version 0.1.0, at h:1"
        );
    }

    #[test]
    fn only_an_exit_the_stream_did_not_tell_is_a_lost_shard() {
        let before = [shard("a", 3), shard("b", 5)];
        let after = [shard("b", 5)];
        let lost = lost_shards(&before, &after, &[], 9);
        assert_eq!(lost.len(), 1);
        assert_eq!(lost[0].event.kind, "shard_lost");
        assert_eq!(lost[0].event.incarnation, Some(3));
        let left = describe(ClusterEvent::shard("shard_left", "a", 3));
        assert!(lost_shards(&before, &after, &[left], 9).is_empty());
        // An earlier process's exit does not explain this one's.
        let earlier = describe(ClusterEvent::shard("shard_left", "a", 2));
        assert_eq!(lost_shards(&before, &after, &[earlier], 9).len(), 1);
    }
}
