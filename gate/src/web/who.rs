//! The web client's who panel, kept live: one task per gate reads who is
//! online on every shard (as anyone may see them: the same list `who`
//! prints for a player) and, when it changed, hands every logged-in page
//! a `Telos.Who {"players":[{"name","tier"}]}` message ([`WhoFeed`]).
//!
//! `Telos.Who` is state, not output: like `Telos.Session` it is not
//! numbered or kept for a resume — a page that (re)attaches is sent the
//! current list instead.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::registry::{ShardRegistry, VisiblePlayer};

/// How often the lists are read. Each shard republishes its own list
/// within 50 ms of a change (and every second), so a login shows on every
/// page within about a second; one read is two Redis round trips per gate,
/// not per page.
pub const WHO_PERIOD: Duration = Duration::from_secs(1);

/// At most this many names go to a page (with the total online): the
/// list every page receives on each change must not grow with the world
/// (10 000 names to each of a thousand pages a second).
pub const WHO_SHOWN: usize = 100;

/// The package the page reads.
pub const WHO_PACKAGE: &str = "Telos.Who";

/// The latest `Telos.Who` message; empty until the first read.
pub type WhoFeed = watch::Receiver<Arc<str>>;

/// Start the reader; it ends with `shutdown`.
pub fn start(registry: Arc<dyn ShardRegistry>, shutdown: CancellationToken) -> WhoFeed {
    let (tx, rx) = watch::channel(Arc::<str>::from(""));
    tokio::spawn(async move {
        loop {
            match registry.visible_players().await {
                Ok(players) => {
                    let msg = render(players);
                    tx.send_if_modified(|cur| {
                        let changed = **cur != *msg;
                        if changed {
                            *cur = msg.into();
                        }
                        changed
                    });
                }
                Err(e) => tracing::debug!(error = %e, "who list for the web client unavailable"),
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(WHO_PERIOD) => {}
            }
        }
    });
    rx
}

/// The message for `players`, one entry per name (a player between two
/// shards can be on both lists for a moment).
pub fn render(mut players: Vec<VisiblePlayer>) -> String {
    players.dedup_by(|a, b| a.name == b.name);
    let total = players.len();
    players.truncate(WHO_SHOWN);
    let body = serde_json::json!({ "players": players, "total": total });
    format!("{WHO_PACKAGE} {body}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(name: &str) -> VisiblePlayer {
        VisiblePlayer {
            name: name.into(),
            tier: "player".into(),
        }
    }

    #[test]
    fn a_player_on_two_lists_is_listed_once() {
        assert_eq!(
            render(vec![p("Amy"), p("Bob"), p("Bob")]),
            r#"Telos.Who {"players":[{"name":"Amy","tier":"player"},{"name":"Bob","tier":"player"}],"total":2}"#
        );
        assert_eq!(render(Vec::new()), r#"Telos.Who {"players":[],"total":0}"#);
    }

    #[test]
    fn a_crowd_is_cut_to_the_first_names_and_counted() {
        let crowd: Vec<VisiblePlayer> = (0..WHO_SHOWN + 50)
            .map(|i| p(&format!("P{i:04}")))
            .collect();
        let msg = render(crowd);
        let body: serde_json::Value =
            serde_json::from_str(msg.trim_start_matches("Telos.Who ")).unwrap();
        assert_eq!(body["players"].as_array().unwrap().len(), WHO_SHOWN);
        assert_eq!(body["total"], WHO_SHOWN + 50);
    }
}
