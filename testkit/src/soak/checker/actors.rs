//! Never two writers (issue 17): at most one actor serves a zone in the
//! whole cluster at any sampled instant, and the lease generations zones
//! are served under only go up — across owners and across process
//! incarnations (a restarted shard must not serve under its predecessor's
//! token). Read from the shards' own `/metrics` (what runs), not from
//! Redis (what should).

use std::collections::BTreeMap;

use super::super::clock::{Ms, secs};
use super::super::config::SERVED_TWICE_GRACE;
use super::super::history::{ActorRound, Evidence, Serving};
use super::findings::{CheckResult, Violation};
use super::windows::Faults;

pub fn check(e: &Evidence, faults: &Faults) -> CheckResult {
    let rounds = &e.samples.actors;
    let mut violations = served_twice(rounds, faults);
    violations.extend(generations(rounds, faults));
    let answered = rounds.iter().filter(|r| !r.serving.is_empty()).count();
    CheckResult {
        name: "actors",
        summary: format!(
            "{} scrapes of the shards' /metrics ({answered} with zones served); {} violations",
            rounds.len(),
            violations.len()
        ),
        notes: Vec::new(),
        violations,
    }
}

fn violation(kind: &str, at: Ms, from: Ms, detail: String) -> Violation {
    Violation {
        check: "actors",
        kind: kind.to_string(),
        bot: None,
        at: Some(at),
        window: Some((from.saturating_sub(1_000), at + 1_000)),
        detail,
        excerpt: Vec::new(),
    }
}

/// `shard-b#2: 1 actor at gen 7`.
fn describe(s: &[&Serving]) -> String {
    s.iter()
        .map(|s| {
            format!(
                "{}: {} actor(s) at gen {}",
                s.process, s.actors, s.generation
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A zone with more than one actor in the cluster (on one process or
/// several) in every scrape for longer than [`SERVED_TWICE_GRACE`]: one
/// violation per such stretch.
fn served_twice(rounds: &[ActorRound], faults: &Faults) -> Vec<Violation> {
    let grace = SERVED_TWICE_GRACE.as_millis() as Ms;
    let zones: std::collections::BTreeSet<&str> = rounds
        .iter()
        .flat_map(|r| r.serving.iter().map(|s| s.zone.as_str()))
        .collect();
    let mut out = Vec::new();
    for zone in zones {
        // (since, last seen, reported) of the stretch in progress.
        let mut stretch: Option<(Ms, Ms, bool)> = None;
        for r in rounds {
            let here: Vec<&Serving> = r.serving.iter().filter(|s| s.zone == zone).collect();
            let actors: u64 = here.iter().map(|s| s.actors).sum();
            if actors < 2 {
                stretch = None;
                continue;
            }
            let (since, _, reported) = stretch.unwrap_or((r.at, r.at, false));
            stretch = Some((since, r.at, reported));
            if !reported && r.at - since > grace {
                let one = here.len() == 1;
                out.push(violation(
                    if one {
                        "two actors for one zone on one shard"
                    } else {
                        "one zone served by two processes"
                    },
                    r.at,
                    since,
                    format!(
                        "zone {zone} served {actors} times from {} to {} ({}): {}",
                        secs(since),
                        secs(r.at),
                        faults.describe(since),
                        describe(&here)
                    ),
                ));
                stretch = Some((since, r.at, true));
            }
        }
    }
    out
}

/// Per zone, the (process, generation) pairs in the order first seen: a
/// generation served by two processes, or a pair seen served after a
/// higher generation was, and for longer than [`SERVED_TWICE_GRACE`] from
/// then. (A
/// process woken from a pause answers its first scrape before its lease
/// watchdog has run: its metrics still show the zone it no longer may
/// write — its actor refuses input and saves past the lease's local
/// deadline — for the moments until the watchdog fences it.)
fn generations(rounds: &[ActorRound], faults: &Faults) -> Vec<Violation> {
    let grace = SERVED_TWICE_GRACE.as_millis() as Ms;
    // zone → (process, generation, first seen, last seen).
    let mut first: BTreeMap<&str, Vec<(&str, u64, Ms, Ms)>> = BTreeMap::new();
    for r in rounds {
        for s in r.serving.iter().filter(|s| s.generation > 0) {
            let pairs = first.entry(s.zone.as_str()).or_default();
            match pairs
                .iter_mut()
                .find(|(p, g, _, _)| *p == s.process && *g == s.generation)
            {
                Some(pair) => pair.3 = r.at,
                None => pairs.push((s.process.as_str(), s.generation, r.at, r.at)),
            }
        }
    }
    let mut out = Vec::new();
    for (zone, pairs) in first {
        for (i, (process, g, at, last)) in pairs.iter().enumerate() {
            let earlier = &pairs[..i];
            if let Some((other, _, then, _)) =
                earlier.iter().find(|(p, og, _, _)| og == g && p != process)
            {
                out.push(violation(
                    "one generation served by two processes",
                    *at,
                    *then,
                    format!(
                        "zone {zone} served at gen {g} by {other} (from {}) and by {process} (from {}, {}): a new incarnation reused its predecessor's token",
                        secs(*then),
                        secs(*at),
                        faults.describe(*at)
                    ),
                ));
            } else if let Some((other, og, then, _)) = earlier
                .iter()
                .filter(|(_, og, t, _)| og > g && t < at && *last - *at > grace)
                .max_by_key(|(_, og, _, _)| *og)
                // A Redis SIGKILL loses up to a second of writes (append-only
                // file, `appendfsync everysec`): a generation minted in it
                // can be minted again, the documented cost of one Redis
                // (docs/operations.md; replicas with WAIT close it).
                .filter(|_| !faults.redis_crash_at(*at))
            {
                out.push(violation(
                    "zone served under an older generation",
                    *at,
                    *then,
                    format!(
                        "zone {zone} served at gen {g} by {process} from {} to {} ({}), after {other} served it at gen {og} from {}",
                        secs(*at),
                        secs(*last),
                        faults.describe(*at),
                        secs(*then)
                    ),
                ));
            }
        }
    }
    out
}
