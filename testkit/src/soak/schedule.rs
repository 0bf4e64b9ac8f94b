//! The fault schedule, drawn from the seed alone: which faults, in which
//! order, with which calm between them and how long each holds. Targets
//! are drawn as picks (an index into whatever is eligible when the fault
//! is injected), so the same seed always makes the same schedule.

use std::fmt;
use std::time::Duration;

use rand::rngs::Xoshiro256PlusPlus;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};

use super::config::{CALM_MAX, CALM_MIN, FaultKind, LEASE_TTL, Mode, OVERLAP_CALM_MAX, WARM_UP};

/// Random streams derived from one seed: the schedule's and each bot's, so
/// a bot's choices do not depend on how many the schedule drew.
const SCHEDULE_STREAM: u64 = 0;
const BOT_STREAM_BASE: u64 = 1_000;

/// The portable generator (rand promises the same sequence on every
/// platform and version for it, unlike `StdRng`), seeded for one stream.
pub fn stream_rng(seed: u64, stream: u64) -> Xoshiro256PlusPlus {
    // Golden-ratio spread so neighbouring streams start far apart.
    Xoshiro256PlusPlus::seed_from_u64(seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// Bot `index`'s generator.
pub fn bot_rng(seed: u64, index: usize) -> Xoshiro256PlusPlus {
    stream_rng(seed, BOT_STREAM_BASE + index as u64)
}

/// How long a process stays down (or stopped), per kind: (min, max) ms.
fn hold_range(kind: FaultKind) -> (u64, u64) {
    let ttl = LEASE_TTL.as_millis() as u64;
    match kind {
        // Restart right after the drained shard exited, or a moment later.
        FaultKind::Drain => (0, 1_000),
        FaultKind::Kill => (500, 3_000),
        // Past the lease TTL by enough that the peers take the zones over
        // (they re-home a silent shard's zones about 10 s after it stops).
        FaultKind::Stop => (ttl + 4_000, ttl + 9_000),
        FaultKind::Transfer => (0, 0),
        FaultKind::Redis => (500, 3_000),
        FaultKind::Gate => (200, 2_000),
        // The gap between the two transfers: within seconds.
        FaultKind::Retransfer => (0, 3_000),
        // Paused past the TTL, the replacement started meanwhile.
        FaultKind::RestartPaused => (ttl + 2_000, ttl + 8_000),
        // Past the TTL: the shard must fence and its peers take over.
        FaultKind::CutRedis => (ttl + 2_000, ttl + 6_000),
        FaultKind::CutPeers | FaultKind::CutGate => (3_000, 10_000),
        // Past the lease TTL, so that only the gates' marks can end it
        // early for the players.
        FaultKind::CutService => (ttl + 4_000, ttl + 10_000),
        FaultKind::OneWay => (2_000, ttl + 4_000),
        FaultKind::Slow => (5_000, 12_000),
        FaultKind::Reset => (200, 1_500),
        // How long the joined shard's zone may take to reach it.
        FaultKind::Join => (0, 0),
        // The promoted primary alone (fenced writes wait) before the old
        // one is back as its replica.
        FaultKind::Failover => (500, 3_000),
    }
}

/// A slow link's delay, drawn from the fault's `zone_pick`: 1–3 s.
pub fn slow_delay(p: &Planned) -> Duration {
    Duration::from_millis(1_000 + u64::from(p.zone_pick) % 2_001)
}

/// A rough duration of a fault beyond its hold (exit, restart, recovery),
/// only to decide how many faults fit the run when drawing.
fn expected_extra(kind: FaultKind) -> Duration {
    Duration::from_secs(match kind {
        FaultKind::Drain => 10,
        FaultKind::Kill | FaultKind::Stop => 4,
        FaultKind::Transfer => 4,
        FaultKind::Redis => 3,
        FaultKind::Gate => 2,
        FaultKind::Retransfer => 6,
        FaultKind::RestartPaused => 8,
        FaultKind::CutRedis | FaultKind::OneWay | FaultKind::CutService => 6,
        FaultKind::CutPeers | FaultKind::CutGate | FaultKind::Slow => 4,
        FaultKind::Reset => 3,
        FaultKind::Join => 10,
        FaultKind::Failover => 6,
    })
}

/// One fault as planned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// 1, 2, … in order.
    pub id: usize,
    /// Calm after the previous fault (or the warm-up) before this one.
    pub calm_before: Duration,
    pub kind: FaultKind,
    /// Chooses the shard (a transfer: the target) among those eligible at
    /// injection: `pick % eligible.len()`.
    pub pick: u32,
    /// Chooses a transfer's zone: `zone_pick % zones.len()`.
    pub zone_pick: u32,
    /// Down or stopped for this long (kill, stop, redis, gate; a drained
    /// shard's wait before its restart; a link's fault; the gap between a
    /// retransfer's two moves).
    pub hold: Duration,
    /// Overlap mode: hit what the previous fault hit (its zone's shard now,
    /// or its zone), rather than `pick`'s choice.
    pub follow: bool,
}

impl fmt::Display for Planned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "#{:<2} after {:>4.1}s calm: {:<8} pick={}",
            self.id,
            self.calm_before.as_secs_f64(),
            self.kind.name(),
            self.pick
        )?;
        let hold = self.hold.as_secs_f64();
        match self.kind {
            FaultKind::Transfer | FaultKind::Join => write!(f, " zone_pick={}", self.zone_pick),
            FaultKind::Retransfer => {
                write!(f, " zone_pick={} second after {hold:.1}s", self.zone_pick)
            }
            FaultKind::Drain => write!(f, " restart after {hold:.1}s"),
            FaultKind::Stop | FaultKind::RestartPaused => write!(f, " stopped {hold:.1}s"),
            FaultKind::Slow => write!(
                f,
                " link={} delay {:.1}s for {hold:.1}s",
                self.zone_pick % 3,
                slow_delay(self).as_secs_f64()
            ),
            FaultKind::OneWay => write!(f, " link={} for {hold:.1}s", self.zone_pick % 4),
            FaultKind::CutRedis | FaultKind::CutPeers | FaultKind::CutGate | FaultKind::Reset => {
                write!(f, " for {hold:.1}s")
            }
            _ => write!(f, " down {hold:.1}s"),
        }?;
        if self.follow {
            write!(f, " (follows the last)")?;
        }
        Ok(())
    }
}

/// The whole plan of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    pub faults: Vec<Planned>,
}

impl Schedule {
    /// Draw the faults that fit in `run` from `seed`, using only `kinds`.
    /// Kinds come from a shuffled deck (reshuffled when used up), so even a
    /// short run sees different kinds rather than one kind three times.
    /// The healthy and partition modes keep 4–10 s of calm after the
    /// cluster is healthy again; the overlap mode only up to
    /// [`OVERLAP_CALM_MAX`] after the last fault was undone, and half its
    /// faults follow the last one.
    pub fn draw(seed: u64, kinds: &[FaultKind], run: Duration, mode: Mode) -> Schedule {
        let mut rng = stream_rng(seed, SCHEDULE_STREAM);
        let mut kinds: Vec<FaultKind> = kinds.to_vec();
        kinds.sort();
        kinds.dedup();
        let mut faults = Vec::new();
        if kinds.is_empty() {
            return Schedule { faults };
        }
        let mut deck: Vec<FaultKind> = Vec::new();
        let mut elapsed = WARM_UP;
        loop {
            if deck.is_empty() {
                deck = kinds.clone();
                deck.shuffle(&mut rng);
            }
            let kind = deck.pop().expect("refilled above");
            let (calm_lo, calm_hi) = match mode {
                Mode::Overlap => (0, OVERLAP_CALM_MAX.as_millis() as u64),
                _ => (CALM_MIN.as_millis() as u64, CALM_MAX.as_millis() as u64),
            };
            let calm = Duration::from_millis(rng.random_range(calm_lo..=calm_hi));
            let (lo, hi) = hold_range(kind);
            let hold = Duration::from_millis(rng.random_range(lo..=hi));
            let pick = rng.random::<u32>();
            let zone_pick = rng.random::<u32>();
            // Drawn only in the overlap mode: the other modes' schedules
            // stay what their seeds always drew.
            let follow = mode == Mode::Overlap && rng.random_bool(0.5);
            let first = faults.is_empty();
            let calm_before = if first { Duration::ZERO } else { calm };
            elapsed += calm_before + hold + expected_extra(kind);
            if elapsed > run && !first {
                break;
            }
            if elapsed > run {
                // Not even one fault fits: a run this short is play only.
                break;
            }
            faults.push(Planned {
                id: faults.len() + 1,
                calm_before,
                kind,
                pick,
                zone_pick,
                hold,
                follow: follow && !first,
            });
        }
        Schedule { faults }
    }

    /// One line a fault, for the report and `history.json`.
    pub fn lines(&self) -> Vec<String> {
        self.faults.iter().map(ToString::to_string).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn the_same_seed_draws_the_same_schedule() {
        let a = Schedule::draw(7, &FaultKind::ALL, 3 * MINUTE, Mode::Healthy);
        let b = Schedule::draw(7, &FaultKind::ALL, 3 * MINUTE, Mode::Healthy);
        assert_eq!(a, b);
        assert_ne!(
            a,
            Schedule::draw(8, &FaultKind::ALL, 3 * MINUTE, Mode::Healthy)
        );
        assert!(a.faults.len() >= 6, "{:?}", a.lines());
    }

    #[test]
    fn every_kind_comes_once_per_deck_and_holds_stay_in_range() {
        let s = Schedule::draw(42, &FaultKind::ALL, 30 * MINUTE, Mode::Healthy);
        for deck in s.faults.chunks(FaultKind::ALL.len()) {
            if deck.len() < FaultKind::ALL.len() {
                continue;
            }
            let mut kinds: Vec<FaultKind> = deck.iter().map(|p| p.kind).collect();
            kinds.sort();
            assert_eq!(kinds, FaultKind::ALL.to_vec());
        }
        for p in &s.faults {
            let (lo, hi) = hold_range(p.kind);
            let ms = p.hold.as_millis() as u64;
            assert!((lo..=hi).contains(&ms), "{p}");
            if p.id > 1 {
                assert!(p.calm_before >= CALM_MIN && p.calm_before <= CALM_MAX);
            }
        }
        let stop = s.faults.iter().find(|p| p.kind == FaultKind::Stop).unwrap();
        assert!(stop.hold > LEASE_TTL, "a stop outlasts the lease TTL");
    }

    #[test]
    fn only_the_chosen_kinds_and_nothing_when_none_fit() {
        let s = Schedule::draw(
            1,
            &[FaultKind::Gate, FaultKind::Redis],
            5 * MINUTE,
            Mode::Healthy,
        );
        assert!(
            s.faults
                .iter()
                .all(|p| matches!(p.kind, FaultKind::Gate | FaultKind::Redis))
        );
        assert!(
            Schedule::draw(1, &FaultKind::ALL, Duration::from_secs(3), Mode::Healthy)
                .faults
                .is_empty()
        );
        assert!(
            Schedule::draw(1, &[], 5 * MINUTE, Mode::Healthy)
                .faults
                .is_empty()
        );
    }

    /// The modes' schedules: healthy as it always was for a seed (scripts
    /// and notes name seeds), overlap with short calms and followers.
    #[test]
    fn the_overlap_mode_keeps_calms_short_and_follows_and_healthy_is_unchanged() {
        let kinds = Mode::Healthy.default_kinds();
        let s = Schedule::draw(10, &kinds, MINUTE, Mode::Healthy);
        let names: Vec<&str> = s.faults.iter().map(|p| p.kind.name()).collect();
        assert_eq!(names, ["transfer", "kill", "gate", "stop", "redis"]);
        assert!(s.faults.iter().all(|p| !p.follow));
        let o = Schedule::draw(
            10,
            &Mode::Overlap.default_kinds(),
            10 * MINUTE,
            Mode::Overlap,
        );
        assert!(
            o.faults
                .iter()
                .skip(1)
                .all(|p| p.calm_before <= OVERLAP_CALM_MAX)
        );
        assert!(o.faults.iter().any(|p| p.follow));
        assert!(o.faults.iter().any(|p| p.kind == FaultKind::RestartPaused));
        let p = Schedule::draw(
            10,
            &Mode::Partition.default_kinds(),
            10 * MINUTE,
            Mode::Partition,
        );
        for k in Mode::Partition.default_kinds() {
            assert!(
                p.faults.iter().any(|f| f.kind == k),
                "{k:?}: {:?}",
                p.lines()
            );
        }
        let slow = p.faults.iter().find(|f| f.kind == FaultKind::Slow).unwrap();
        let d = slow_delay(slow);
        assert!(d >= Duration::from_secs(1) && d <= Duration::from_secs(3));
    }

    #[test]
    fn bot_streams_differ_from_each_other_and_from_the_schedule() {
        let a: u64 = bot_rng(5, 0).random();
        let b: u64 = bot_rng(5, 1).random();
        let s: u64 = stream_rng(5, SCHEDULE_STREAM).random();
        assert!(a != b && a != s && b != s);
        assert_eq!(a, bot_rng(5, 0).random::<u64>());
    }
}
