//! Which zones each shard process serves, read from its `/metrics`
//! (`telos_zone_serving{zone}`, `telos_zone_generation{zone}`): the
//! checker's view of the actors, as opposed to the leases Redis holds.

use std::time::Duration;

use super::clock::Clock;
use super::cluster::MetricsAddrs;
use super::history::{ActorRound, Serving};

/// A scrape answers in milliseconds; a paused process never does, and must
/// not hold up the round.
const SCRAPE_TIMEOUT: Duration = Duration::from_millis(400);

const SERVING: &str = "telos_zone_serving";
const GENERATION: &str = "telos_zone_generation";

/// Scrape every shard process running now, all at once.
pub async fn scrape_round(addrs: &MetricsAddrs, clock: Clock) -> ActorRound {
    let now: Vec<(String, String)> = addrs
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .map(|(n, a)| (n.clone(), a.clone()))
        .collect();
    let tasks: Vec<_> = now
        .into_iter()
        .map(|(name, addr)| {
            tokio::spawn(async move {
                let text = tokio::time::timeout(SCRAPE_TIMEOUT, crate::metrics::scrape(&addr))
                    .await
                    .ok()
                    .and_then(Result::ok);
                (name, text)
            })
        })
        .collect();
    let mut round = ActorRound {
        at: clock.now(),
        ..ActorRound::default()
    };
    for t in tasks {
        let Ok((name, text)) = t.await else { continue };
        match text {
            Some(text) => round.serving.extend(parse(&name, &text)),
            None => round.silent.push(name),
        }
    }
    round
}

/// The zones `process` serves, from its exposition text.
pub fn parse(process: &str, text: &str) -> Vec<Serving> {
    let series = |name: &str| -> Vec<(String, u64)> {
        text.lines()
            .filter_map(|l| l.strip_prefix(name)?.strip_prefix("{"))
            .filter_map(|rest| {
                let (labels, value) = rest.rsplit_once("} ")?;
                let zone = labels
                    .split(',')
                    .find_map(|kv| kv.trim().strip_prefix("zone=\""))?
                    .trim_end_matches('"');
                let v: f64 = value.trim().parse().ok()?;
                Some((zone.to_string(), v.max(0.0) as u64))
            })
            .collect()
    };
    let generations = series(GENERATION);
    series(SERVING)
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(zone, actors)| Serving {
            process: process.to_string(),
            generation: generations
                .iter()
                .find(|(z, _)| *z == zone)
                .map_or(0, |(_, g)| *g),
            zone,
            actors,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serving_zones_and_their_generations_are_read_from_the_exposition() {
        let text = "# TYPE telos_zone_serving gauge\n\
            telos_zone_serving{zone=\"city\"} 1\n\
            telos_zone_serving{zone=\"docks\"} 0\n\
            telos_zone_serving{zone=\"hills\"} 2\n\
            telos_zone_generation{zone=\"city\"} 7\n\
            telos_zone_generation{zone=\"docks\"} 3\n\
            telos_players{shard=\"shard-a\"} 4\n";
        let s = parse("shard-a#1", text);
        assert_eq!(s.len(), 2, "{s:?}");
        assert_eq!(
            (s[0].zone.as_str(), s[0].actors, s[0].generation),
            ("city", 1, 7)
        );
        assert_eq!(
            (s[1].zone.as_str(), s[1].actors, s[1].generation),
            ("hills", 2, 0)
        );
        assert_eq!(s[0].process, "shard-a#1");
    }
}
