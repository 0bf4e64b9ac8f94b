//! What the rebalancer would move, and why: a pure function of the
//! cluster as one read of the directory saw it, so the leading shard and
//! `telosctl rebalance --plan` decide alike and tests drive it directly.
//!
//! The rules, in order. A move of a zone with players counts against
//! `max_moves`, and a shard takes part in at most `max_moves` of those per
//! round (the round's own simulation keeps their loads exact) and in none
//! while an earlier one is pending or settling (the registry's counts lag
//! a move). A move of an empty zone shifts no load and pauses nobody: it
//! is not counted, needs no settling and is made at once, so a restarted
//! shard's empty home zones all come back in one round.
//! 1. **home** — a zone listed in a live shard's `--zones` moves back to
//!    it (when it is not there), unless that would load it past the
//!    threshold above the least loaded shard (`load` mode) or past its
//!    capacity;
//! 2. **load** — when the most and least loaded live shards (players
//!    against capacity) differ by more than the threshold, the zone of the
//!    most loaded whose players best even them out moves to the least
//!    loaded (so a shard that joins empty receives zones);
//! 3. **spread** — zones without a live home (their shard is gone, or
//!    they have none) spread until live shards' zone counts differ by at
//!    most one.
//!
//! Never moved: a zone with a transfer pending, one the rebalancer moved
//! within the hysteresis window, one whose owner or target takes part in
//! a pending transfer or is draining, one owned by no live shard (the
//! orphan claimer's), or a move to a shard without free capacity.

use std::collections::{BTreeMap, BTreeSet};

use crate::config::rebalance::{Rebalance, RebalanceMode};

/// One live shard as the directory showed it.
#[derive(Debug, Clone, PartialEq)]
pub struct ShardView {
    pub id: String,
    pub draining: bool,
    pub players: u64,
    pub capacity: u64,
}

/// One zone as the directory showed it.
#[derive(Debug, Clone, PartialEq)]
pub struct ZoneView {
    pub id: String,
    /// The live lease's holder.
    pub owner: Option<String>,
    pub players: u64,
    /// The shard whose `--zones` lists it.
    pub home: Option<String>,
    /// A transfer of it is pending.
    pub moving: bool,
    /// The rebalancer moved it within the hysteresis window.
    pub recent: bool,
}

/// The cluster for one decision.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct View {
    /// Live shards speaking the decider's handoff version.
    pub shards: Vec<ShardView>,
    pub zones: Vec<ZoneView>,
    /// Shards taking part in a pending transfer (as source or target).
    pub busy: BTreeSet<String>,
}

/// Why a zone moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Home,
    Load,
    Spread,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Home => "home",
            Reason::Load => "load",
            Reason::Spread => "spread",
        }
    }
}

/// One move the rebalancer starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Move {
    pub zone: String,
    pub from: String,
    pub to: String,
    pub reason: Reason,
    /// The zone's players when it was planned: 0 is a move that shifts no
    /// load (no settling after it).
    pub players: u64,
}

impl Move {
    /// Whether the move shifts load (and its shards must settle after it).
    pub fn carries_players(&self) -> bool {
        self.players > 0
    }
}

/// The placement being planned: who owns what, and each shard's load.
struct Sim<'a> {
    shards: BTreeMap<&'a str, &'a ShardView>,
    owner: BTreeMap<&'a str, &'a str>,
    players: BTreeMap<&'a str, u64>,
    /// Shards in a pending or settling move from an earlier round.
    busy: BTreeSet<String>,
    /// Moves with players each shard takes part in this round.
    planned: BTreeMap<String, usize>,
    /// How many of those one shard may take part in.
    per_shard: usize,
    /// Zones moved this round: each moves at most once a round.
    moved: BTreeSet<&'a str>,
}

impl<'a> Sim<'a> {
    fn new(view: &'a View, per_shard: usize) -> Sim<'a> {
        let shards: BTreeMap<&str, &ShardView> =
            view.shards.iter().map(|s| (s.id.as_str(), s)).collect();
        let owner = view
            .zones
            .iter()
            .filter_map(|z| Some((z.id.as_str(), z.owner.as_deref()?)))
            .filter(|(_, o)| shards.contains_key(o))
            .collect();
        let players = view
            .shards
            .iter()
            .map(|s| (s.id.as_str(), s.players))
            .collect();
        Sim {
            shards,
            owner,
            players,
            busy: view.busy.clone(),
            planned: BTreeMap::new(),
            per_shard,
            moved: BTreeSet::new(),
        }
    }

    /// A live shard that is not draining.
    fn serving(&self, id: &str) -> bool {
        self.shards.get(id).is_some_and(|s| !s.draining)
    }

    /// A shard that may take part in a move of `players` now: any serving
    /// shard for an empty zone, else one with no earlier move unsettled
    /// and room for another this round.
    fn free_for(&self, id: &str, players: u64) -> bool {
        self.serving(id)
            && (players == 0
                || (!self.busy.contains(id)
                    && self.planned.get(id).copied().unwrap_or(0) < self.per_shard))
    }

    /// [`Sim::free_for`] a move with players.
    fn free(&self, id: &str) -> bool {
        self.free_for(id, 1)
    }

    fn load(&self, id: &str) -> f64 {
        let cap = self.shards[id].capacity.max(1) as f64;
        self.players[id] as f64 / cap
    }

    /// Live, not draining shards, by id.
    fn live(&self) -> Vec<&'a str> {
        self.shards
            .values()
            .filter(|s| !s.draining)
            .map(|s| s.id.as_str())
            .collect()
    }

    fn zone_count(&self, id: &str) -> usize {
        self.owner.values().filter(|o| **o == id).count()
    }

    /// The least loaded live shard after `from` gives `players` away.
    fn min_load_without(&self, from: &str, players: u64) -> f64 {
        self.live()
            .into_iter()
            .map(|s| {
                // A zone's count may exceed its owner's total while a
                // drain still fans its players off (both shards report
                // them): never below zero.
                let p = self.players[s].saturating_sub(if s == from { players } else { 0 });
                p as f64 / self.shards[s].capacity.max(1) as f64
            })
            .fold(f64::INFINITY, f64::min)
    }

    /// The soft ceiling: the target is under it now (as the proposal
    /// script requires) and stays within it with the zone's players.
    fn has_room(&self, to: &str, players: u64) -> bool {
        let cap = self.shards[to].capacity;
        self.players[to] < cap && self.players[to] + players <= cap
    }

    fn apply(&mut self, zone: &'a ZoneView, to: &'a str, reason: Reason, out: &mut Vec<Move>) {
        let from = self.owner[zone.id.as_str()];
        *self.players.get_mut(from).expect("live owner") -= zone.players.min(self.players[from]);
        *self.players.get_mut(to).expect("live target") += zone.players;
        self.owner.insert(&zone.id, to);
        self.moved.insert(&zone.id);
        if zone.players > 0 {
            *self.planned.entry(from.to_string()).or_default() += 1;
            *self.planned.entry(to.to_string()).or_default() += 1;
        }
        out.push(Move {
            zone: zone.id.clone(),
            from: from.to_string(),
            to: to.to_string(),
            reason,
            players: zone.players,
        });
    }
}

/// The moves to start now: at most `knobs.max_moves` with players, and
/// every empty zone's that is due.
pub fn plan(view: &View, knobs: &Rebalance) -> Vec<Move> {
    let mut out = Vec::new();
    if knobs.mode == RebalanceMode::Off || knobs.max_moves == 0 {
        return out;
    }
    let mut sim = Sim::new(view, knobs.max_moves);
    let movable = |z: &ZoneView, sim: &Sim| {
        !z.moving
            && !z.recent
            && !sim.moved.contains(z.id.as_str())
            && sim
                .owner
                .get(z.id.as_str())
                .is_some_and(|o| sim.free_for(o, z.players))
    };
    let full =
        |out: &Vec<Move>| out.iter().filter(|m| m.carries_players()).count() >= knobs.max_moves;
    // 1. home
    for z in &view.zones {
        if z.players > 0 && full(&out) {
            continue;
        }
        let Some(home) = z.home.as_deref() else {
            continue;
        };
        if !movable(z, &sim) || !sim.free_for(home, z.players) || sim.owner[z.id.as_str()] == home {
            continue;
        }
        let from = sim.owner[z.id.as_str()];
        if !sim.has_room(home, z.players) {
            continue;
        }
        if knobs.mode == RebalanceMode::Load {
            let after =
                (sim.players[home] + z.players) as f64 / sim.shards[home].capacity.max(1) as f64;
            if after - sim.min_load_without(from, z.players) > knobs.threshold {
                continue;
            }
        }
        let home = sim.shards[home].id.as_str();
        sim.apply(z, home, Reason::Home, &mut out);
    }
    if knobs.mode != RebalanceMode::Load {
        return out;
    }
    // 2. load
    while !full(&out) {
        let live = sim.live();
        let (Some(&most), Some(&least)) = (
            live.iter()
                .max_by(|a, b| sim.load(a).total_cmp(&sim.load(b)).then(b.cmp(a))),
            live.iter()
                .min_by(|a, b| sim.load(a).total_cmp(&sim.load(b)).then(a.cmp(b))),
        ) else {
            break;
        };
        let gap = sim.load(most) - sim.load(least);
        if most == least || gap <= knobs.threshold || !sim.free(most) || !sim.free(least) {
            break;
        }
        let (cap_most, cap_least) = (
            sim.shards[most].capacity.max(1) as f64,
            sim.shards[least].capacity.max(1) as f64,
        );
        let gap_after = |p: u64| {
            (sim.players[most].saturating_sub(p) as f64 / cap_most
                - (sim.players[least] + p) as f64 / cap_least)
                .abs()
        };
        let best = view
            .zones
            .iter()
            .filter(|z| sim.owner.get(z.id.as_str()) == Some(&most) && movable(z, &sim))
            .filter(|z| z.players > 0 && gap_after(z.players) < gap)
            .filter(|z| sim.has_room(least, z.players))
            .min_by(|a, b| {
                gap_after(a.players)
                    .total_cmp(&gap_after(b.players))
                    .then(a.id.cmp(&b.id))
            });
        let Some(z) = best else { break };
        sim.apply(z, least, Reason::Load, &mut out);
    }
    // 3. spread the homeless
    let homeless = |z: &ZoneView, sim: &Sim| {
        z.home
            .as_deref()
            .is_none_or(|h| sim.shards.get(h).is_none_or(|s| s.draining))
    };
    while !full(&out) {
        let live = sim.live();
        let (Some(&most), Some(&fewest)) = (
            live.iter()
                .max_by_key(|s| (sim.zone_count(s), std::cmp::Reverse(**s))),
            live.iter().min_by(|a, b| {
                sim.zone_count(a)
                    .cmp(&sim.zone_count(b))
                    .then(sim.load(a).total_cmp(&sim.load(b)))
                    .then(a.cmp(b))
            }),
        ) else {
            break;
        };
        if sim.zone_count(most) <= sim.zone_count(fewest) + 1 {
            break;
        }
        let pick = view
            .zones
            .iter()
            .filter(|z| sim.owner.get(z.id.as_str()) == Some(&most))
            .filter(|z| movable(z, &sim) && homeless(z, &sim) && sim.free_for(fewest, z.players))
            .filter(|z| sim.has_room(fewest, z.players))
            .min_by(|a, b| a.players.cmp(&b.players).then(a.id.cmp(&b.id)));
        let Some(z) = pick else { break };
        sim.apply(z, fewest, Reason::Spread, &mut out);
    }
    out
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
