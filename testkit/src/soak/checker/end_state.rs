//! The end of the run: every process alive with its RSS bounded; every bot
//! logged in, its `where` in the contract's shape and where it believed it
//! was; `telosctl status` agreeing with where the bots are; each durable
//! journal (after the final `quit`) equal to the listing; and whatever the
//! fault driver found wrong in a fault's own steps.

use std::collections::BTreeMap;

use super::super::clock::{Ms, secs};
use super::super::history::{BotHistory, Evidence, StatusView};
use super::findings::{CheckResult, Violation};

const KIB_PER_MIB: u64 = 1024;

pub fn check(e: &Evidence) -> CheckResult {
    let mut violations = Vec::new();
    let mut notes = Vec::new();
    let stopped = e.end.stopped;
    let v = |kind: &str, bot: Option<&str>, at: Option<Ms>, detail: String| Violation {
        check: "end state",
        kind: kind.to_string(),
        bot: bot.map(str::to_string),
        at,
        window: at.map(|t| (t.saturating_sub(3_000), t + 1_000)),
        detail,
        excerpt: Vec::new(),
    };
    for f in &e.faults {
        for p in &f.problems {
            violations.push(v(
                "fault step failed",
                None,
                Some(f.start),
                format!("{}: {p}", f.label()),
            ));
        }
    }
    for p in &e.end.processes {
        if !p.alive {
            violations.push(v(
                "process not alive",
                None,
                Some(stopped),
                format!("{} (pid {}) is not running at the end", p.name, p.pid),
            ));
        }
    }
    let limit = e.rss_growth_kib;
    for (name, series) in &e.samples.rss_kib {
        let Some(&(t0, base)) = series
            .iter()
            .find(|(t, _)| *t >= e.setup_done)
            .or(series.first())
        else {
            continue;
        };
        let &(t1, last) = series.last().expect("non-empty");
        let peak = series.iter().map(|(_, k)| *k).max().unwrap_or(0);
        notes.push(format!(
            "{name}: RSS {} MiB at {} -> {} MiB at {} (peak {} MiB)",
            base / KIB_PER_MIB,
            secs(t0),
            last / KIB_PER_MIB,
            secs(t1),
            peak / KIB_PER_MIB
        ));
        if last > base + limit {
            violations.push(v(
                "RSS grew",
                None,
                Some(t1),
                format!(
                    "{name}: RSS grew {} MiB (from {} MiB at {} to {} MiB at {}), more than the {} MiB allowed",
                    (last - base) / KIB_PER_MIB,
                    base / KIB_PER_MIB,
                    secs(t0),
                    last / KIB_PER_MIB,
                    secs(t1),
                    limit / KIB_PER_MIB
                ),
            ));
        }
    }
    for bot in &e.bots {
        let b = Some(bot.name.as_str());
        let last = &bot.last;
        if last.location.is_none() && last.listing.is_none() {
            violations.push(v(
                "not logged in at the end",
                b,
                Some(stopped),
                "the bot could not log in (or get `where` answered) before the end".into(),
            ));
        }
        if let (Some(believed), Some((_, room, _))) = (&last.believed_room, &last.location)
            && believed != room
        {
            violations.push(v(
                "position disagrees",
                b,
                Some(stopped),
                format!("the last answers put the bot in {believed}, `where` says {room}"),
            ));
        }
        if let (Some(listing), Some(durable)) = (&last.listing, &last.durable)
            && listing != durable
        {
            violations.push(v(
                "durable journal differs",
                b,
                Some(stopped),
                format!(
                    "after the final quit the durable row holds {} entries (last {:?}), the listing {} (last {:?})",
                    durable.len(),
                    durable.last(),
                    listing.len(),
                    listing.last()
                ),
            ));
        }
    }
    match &e.end.status {
        Some((at, status)) => violations.extend(status_agrees(&e.bots, *at, status)),
        None => violations.push(v(
            "no status",
            None,
            Some(stopped),
            format!(
                "`telosctl status --json` could not be read: {}",
                e.end.status_error.as_deref().unwrap_or("?")
            ),
        )),
    }
    CheckResult {
        name: "end state",
        summary: format!(
            "{} processes, {} bots, status {}; {} violations",
            e.end.processes.len(),
            e.bots.len(),
            if e.end.status.is_some() {
                "read"
            } else {
                "missing"
            },
            violations.len()
        ),
        notes,
        violations,
    }
}

/// `telosctl status` against the bots' final `where`s: shards live, zones
/// owned and not moving, players per zone and owners matching.
pub fn status_agrees(bots: &[BotHistory], at: Ms, status: &StatusView) -> Vec<Violation> {
    let mut out = Vec::new();
    let v = |kind: &str, detail: String| Violation {
        check: "end state",
        kind: kind.to_string(),
        bot: None,
        at: Some(at),
        window: Some((at.saturating_sub(3_000), at)),
        detail,
        excerpt: Vec::new(),
    };
    for s in &status.shards {
        if s.state != "live" {
            out.push(v(
                "status: shard not live",
                format!("{} is {}", s.id, s.state),
            ));
        }
    }
    let mut here: BTreeMap<&str, Vec<(&str, &str)>> = BTreeMap::new();
    for bot in bots {
        if let Some((zone, _, shard)) = &bot.last.location {
            here.entry(zone.as_str())
                .or_default()
                .push((bot.name.as_str(), shard.as_str()));
        }
    }
    for z in &status.zones {
        let bots = here.remove(z.id.as_str()).unwrap_or_default();
        match &z.owner {
            None => out.push(v(
                "status: zone unowned",
                format!("zone {} has no owner", z.id),
            )),
            Some(owner) => {
                if !status
                    .shards
                    .iter()
                    .any(|s| &s.id == owner && s.state == "live")
                {
                    out.push(v(
                        "status: owner not live",
                        format!("zone {} is owned by {owner}, not a live shard", z.id),
                    ));
                }
                for (name, shard) in &bots {
                    if shard != owner {
                        out.push(v(
                            "status: owner disagrees with where",
                            format!(
                                "{name} is in {} on {shard} (`where`), status says {owner} owns it",
                                z.id
                            ),
                        ));
                    }
                }
            }
        }
        if z.transfer {
            out.push(v(
                "status: transfer pending",
                format!("zone {} still has a transfer pending", z.id),
            ));
        }
        if z.players != bots.len() as u64 {
            out.push(v(
                "status: player count disagrees",
                format!(
                    "zone {}: status counts {} players, `where` puts {} there ({})",
                    z.id,
                    z.players,
                    bots.len(),
                    bots.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(" ")
                ),
            ));
        }
    }
    for (zone, bots) in here {
        out.push(v(
            "status: zone missing",
            format!(
                "`where` puts {} bots in {zone}, which status does not list",
                bots.len()
            ),
        ));
    }
    out
}
