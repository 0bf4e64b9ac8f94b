//! Fences never go back: a zone's generation counter, its lease's
//! generation and every character's `owner_epoch`, as sampled from Redis
//! during the run; a lease never carries a generation above the counter it
//! was minted from; and a lease that changes owner carries a generation
//! above every one the zone had before.

use std::collections::BTreeMap;

use super::super::clock::{Ms, secs};
use super::super::history::{Evidence, Series};
use super::findings::{CheckResult, Violation};
use super::windows::Faults;

pub fn check(e: &Evidence, faults: &Faults) -> CheckResult {
    let s = &e.samples;
    let mut violations = Vec::new();
    let mut changes = 0usize;
    let families: [(&str, &BTreeMap<String, Series>, &str); 3] = [
        ("zone generation", &s.zone_gen, "telos:zone:{}:gen"),
        ("lease generation", &s.lease_gen, "telos:zone:{}:lease gen"),
        ("owner epoch", &s.owner_epoch, "telos:char:{} owner_epoch"),
    ];
    for (what, family, key) in families {
        for (name, series) in family {
            changes += series.len();
            violations.extend(went_back(
                what,
                &key.replace("{}", &name.to_lowercase()),
                series,
                faults,
            ));
        }
    }
    for (zone, lease) in &s.lease_gen {
        let Some(counter) = s.zone_gen.get(zone) else {
            continue;
        };
        violations.extend(above_counter(zone, lease, counter, faults));
    }
    for (zone, leases) in &s.lease {
        violations.extend(new_owner_not_above(zone, leases, faults));
    }
    CheckResult {
        name: "fences",
        summary: format!(
            "{} sample rounds, {changes} values over {} zones and {} characters; {} violations",
            s.rounds,
            s.zone_gen.len(),
            s.owner_epoch.len(),
            violations.len()
        ),
        notes: Vec::new(),
        violations,
    }
}

/// Each time a value falls below the highest one seen before.
fn went_back(what: &str, key: &str, series: &Series, faults: &Faults) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut high: Option<(Ms, u64)> = None;
    for (t, v) in series {
        let Some(v) = *v else {
            continue;
        };
        match high {
            Some((seen_at, h)) if v < h => out.push(Violation {
                check: "fences",
                kind: format!("{what} went back"),
                bot: None,
                at: Some(*t),
                window: Some((seen_at, *t)),
                detail: format!(
                    "{key} was {h} at {} and {v} at {} ({})",
                    secs(seen_at),
                    secs(*t),
                    faults.describe(*t)
                ),
                excerpt: Vec::new(),
            }),
            Some((_, h)) if v == h => {}
            _ => high = Some((*t, v)),
        }
    }
    out
}

/// A lease taken by a new owner at a generation not above every one seen
/// before: two owners could then write under one token.
fn new_owner_not_above(
    zone: &str,
    leases: &[(Ms, Option<(String, u64)>)],
    faults: &Faults,
) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut last: Option<(&str, u64, Ms)> = None;
    let mut high = 0u64;
    for (t, lease) in leases {
        let Some((owner, g)) = lease else { continue };
        if let Some((prev, pg, then)) = last
            && prev != owner
            && *g <= high
        {
            out.push(Violation {
                check: "fences",
                kind: "new lease owner without a higher generation".into(),
                bot: None,
                at: Some(*t),
                window: Some((then, *t)),
                detail: format!(
                    "zone {zone}: {prev} held gen {pg} (seen {}), then {owner} gen {g} at {} ({})",
                    secs(then),
                    secs(*t),
                    faults.describe(*t)
                ),
                excerpt: Vec::new(),
            });
        }
        high = high.max(*g);
        last = Some((owner.as_str(), *g, *t));
    }
    out
}

/// The value of a change-only series at `t`.
fn value_at(series: &Series, t: Ms) -> Option<u64> {
    series
        .iter()
        .rev()
        .find(|(at, _)| *at <= t)
        .and_then(|(_, v)| *v)
}

/// A lease generation above its zone's counter at the same sample.
fn above_counter(zone: &str, lease: &Series, counter: &Series, faults: &Faults) -> Vec<Violation> {
    lease
        .iter()
        .filter_map(|(t, v)| {
            let (lg, c) = ((*v)?, value_at(counter, *t)?);
            (lg > c).then(|| Violation {
                check: "fences",
                kind: "lease generation above the counter".into(),
                bot: None,
                at: Some(*t),
                window: Some((t.saturating_sub(1_000), *t)),
                detail: format!(
                    "zone {zone}: lease gen {lg} but telos:zone:{zone}:gen {c} at {} ({})",
                    secs(*t),
                    faults.describe(*t)
                ),
                excerpt: Vec::new(),
            })
        })
        .collect()
}
