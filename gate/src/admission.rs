//! Who may hold a connection: players and strangers are counted apart.
//!
//! A connection that has not logged in holds a **pre-login place**
//! ([`PreLogin`], `--max-pre-login`); a logged-in player holds a **seat**
//! ([`Seats`], `--max-connections`). Strangers can fill the pre-login
//! places, never the seats: a player already in is never refused because
//! others are connecting, and a login is refused for want of a seat only
//! when that many players are in.
//!
//! When every pre-login place is taken, a newcomer from a network (an IPv4
//! /24, an IPv6 /48: [`telos_proto::source::prefix_bucket`]) that holds
//! fewer places than the network holding the most takes the oldest place
//! of that network, whose connection is told so and closed: a few networks
//! holding every place cannot keep everyone else out; they end up with an
//! even share. Only a newcomer whose network already holds as many places
//! as any is refused — unless a player logged in from its network lately
//! ([`KNOWN_FOR`]): a known network's newcomer takes the oldest place of a
//! network nobody logged in from (issue 30: one connection from each of a
//! thousand /24s held every place, and no login, no returning player and
//! no telnet `resume` got in). A flood from unknown networks keeps out only
//! the unknown; players who were here before — a dropped one coming back
//! to resume included — still get in.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::ratelimit::IpBucket;

/// The pre-login places, by network.
#[derive(Debug)]
pub struct PreLogin {
    cap: usize,
    inner: Mutex<Places>,
}

/// How long a network a player logged in from counts as known.
pub const KNOWN_FOR: Duration = Duration::from_secs(24 * 3600);

/// Networks remembered at most (the oldest forgotten first): a bound on
/// memory whatever the number of players.
pub const MAX_KNOWN: usize = 65_536;

/// Networks one character makes known at most (its most recent): a home,
/// a phone, a workplace. An account logging in from a thousand /24s makes
/// three of them known, not a thousand.
pub const KNOWN_PER_CHARACTER: usize = 3;

/// Places a known network's newcomers take from unknown networks at most:
/// beyond, they meet the even-share rule as everyone does.
pub const KNOWN_SHARE: usize = 2;

#[derive(Debug, Default)]
struct Places {
    held: usize,
    next_id: u64,
    /// Oldest first.
    by_prefix: HashMap<IpBucket, VecDeque<Place>>,
    /// Networks a player logged in from, when last, and the character
    /// that made it known.
    known: HashMap<IpBucket, (Instant, String)>,
    /// Each character's known networks, oldest first
    /// ([`KNOWN_PER_CHARACTER`] at most).
    vouched: HashMap<String, VecDeque<IpBucket>>,
}

impl Places {
    /// Forget the expired networks, else the least recent quarter.
    fn forget_oldest(&mut self) {
        self.known.retain(|_, (at, _)| at.elapsed() < KNOWN_FOR);
        if self.known.len() >= MAX_KNOWN {
            let mut ages: Vec<Instant> = self.known.values().map(|(at, _)| *at).collect();
            ages.sort_unstable();
            let cut = ages[MAX_KNOWN / 4];
            self.known.retain(|_, (at, _)| *at > cut);
        }
    }

    fn is_known(&self, prefix: &IpBucket) -> bool {
        self.known
            .get(prefix)
            .is_some_and(|(at, _)| at.elapsed() < KNOWN_FOR)
    }

    /// The network whose place is to go to a newcomer from `prefix`: the
    /// one holding the most, if it would still hold at least as many;
    /// else, for a known newcomer, the unknown network holding the oldest
    /// place.
    fn victim(&self, prefix: &IpBucket) -> Option<IpBucket> {
        let mine = self.by_prefix.get(prefix).map_or(0, VecDeque::len);
        let heaviest = self
            .by_prefix
            .iter()
            .map(|(k, q)| (*k, q.len()))
            .max_by_key(|(_, n)| *n)
            .filter(|(_, n)| *n > mine + 1)
            .map(|(k, _)| k);
        if heaviest.is_some() || !self.is_known(prefix) || mine >= KNOWN_SHARE {
            return heaviest;
        }
        self.by_prefix
            .iter()
            .filter(|(k, _)| !self.is_known(k))
            .filter_map(|(k, q)| q.front().map(|place| (place.id, *k)))
            .min_by_key(|(id, _)| *id)
            .map(|(_, k)| k)
    }
}

#[derive(Debug)]
struct Place {
    id: u64,
    evict: CancellationToken,
}

/// One connection's pre-login place; dropping it frees the place.
#[derive(Debug)]
pub struct PreLoginPlace {
    id: u64,
    prefix: IpBucket,
    evicted: CancellationToken,
    owner: Arc<PreLogin>,
}

/// Why a newcomer got no place.
#[derive(Debug, PartialEq, Eq)]
pub struct PreLoginFull;

impl PreLogin {
    pub fn new(cap: usize) -> Arc<Self> {
        Arc::new(Self {
            cap,
            inner: Mutex::default(),
        })
    }

    /// A place for a connection from network `prefix`: a free one, or the
    /// oldest of the network that holds the most places, if that would
    /// still hold at least as many as `prefix` then (its connection's
    /// [`PreLoginPlace::evicted`] fires). Networks holding one place each
    /// are never churned by newcomers.
    pub fn admit(self: &Arc<Self>, prefix: IpBucket) -> Result<PreLoginPlace, PreLoginFull> {
        let mut p = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if p.held >= self.cap {
            let Some(victim) = p.victim(&prefix) else {
                return Err(PreLoginFull);
            };
            let queue = p.by_prefix.get_mut(&victim).expect("the heaviest is held");
            let oldest = queue.pop_front().expect("a held network holds a place");
            if queue.is_empty() {
                p.by_prefix.remove(&victim);
            }
            oldest.evict.cancel();
            p.held -= 1;
        }
        p.held += 1;
        p.next_id += 1;
        let id = p.next_id;
        let evicted = CancellationToken::new();
        p.by_prefix.entry(prefix).or_default().push_back(Place {
            id,
            evict: evicted.clone(),
        });
        Ok(PreLoginPlace {
            id,
            prefix,
            evicted,
            owner: self.clone(),
        })
    }

    /// Character `who` logged in from network `prefix`: its newcomers are
    /// known for [`KNOWN_FOR`] — one of `who`'s [`KNOWN_PER_CHARACTER`]
    /// most recent networks.
    pub fn remember(&self, prefix: IpBucket, who: &str) {
        let mut p = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if p.known.len() >= MAX_KNOWN && !p.known.contains_key(&prefix) {
            p.forget_oldest();
        }
        p.known.insert(prefix, (Instant::now(), who.to_string()));
        let mine = p.vouched.entry(who.to_string()).or_default();
        mine.retain(|n| *n != prefix);
        mine.push_back(prefix);
        let dropped = (mine.len() > KNOWN_PER_CHARACTER)
            .then(|| mine.pop_front())
            .flatten();
        if let Some(old) = dropped
            && p.known.get(&old).is_some_and(|(_, by)| by == who)
        {
            p.known.remove(&old);
        }
        if p.vouched.len() > MAX_KNOWN {
            let known = &p.known;
            let keep: std::collections::HashSet<&String> =
                known.values().map(|(_, by)| by).collect();
            let keep: std::collections::HashSet<String> = keep.into_iter().cloned().collect();
            p.vouched.retain(|who, _| keep.contains(who));
        }
    }

    /// Places held now.
    pub fn held(&self) -> usize {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).held
    }
}

impl PreLoginPlace {
    /// Fires when a newcomer took this place.
    pub fn evicted(&self) -> &CancellationToken {
        &self.evicted
    }
}

impl Drop for PreLoginPlace {
    fn drop(&mut self) {
        let mut p = self.owner.inner.lock().unwrap_or_else(|e| e.into_inner());
        let Some(queue) = p.by_prefix.get_mut(&self.prefix) else {
            return;
        };
        let Some(at) = queue.iter().position(|place| place.id == self.id) else {
            // Evicted: its place was handed on already.
            return;
        };
        queue.remove(at);
        if queue.is_empty() {
            p.by_prefix.remove(&self.prefix);
        }
        p.held -= 1;
    }
}

/// Logged-in players' seats.
#[derive(Debug)]
pub struct Seats {
    cap: usize,
    taken: Arc<AtomicUsize>,
}

/// One player's seat; dropping it frees the seat.
#[derive(Debug)]
pub struct Seat(Arc<AtomicUsize>);

impl Seats {
    pub fn new(cap: usize) -> Self {
        Self {
            cap,
            taken: Arc::default(),
        }
    }

    /// A seat, unless `cap` players hold one.
    pub fn take(&self) -> Option<Seat> {
        self.taken
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.cap).then_some(n + 1)
            })
            .ok()
            .map(|_| Seat(self.taken.clone()))
    }

    /// Whether every seat is taken now.
    pub fn full(&self) -> bool {
        self.taken.load(Ordering::Acquire) >= self.cap
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use telos_proto::source::prefix_bucket;

    fn net(s: &str) -> IpBucket {
        prefix_bucket(s.parse().unwrap())
    }

    #[test]
    fn a_newcomer_takes_the_oldest_place_of_the_network_holding_the_most() {
        let pre = PreLogin::new(4);
        let flood: Vec<_> = (0..4)
            .map(|i| pre.admit(net(&format!("203.0.113.{i}"))).unwrap())
            .collect();
        // The flooding /24 is full up; one more of it is refused.
        assert_eq!(pre.admit(net("203.0.113.9")).unwrap_err(), PreLoginFull);
        let honest = pre.admit(net("198.51.100.7")).expect("a newcomer gets in");
        assert!(flood[0].evicted().is_cancelled(), "the oldest goes");
        assert!(!flood[1].evicted().is_cancelled());
        assert_eq!(pre.held(), 4);
        // A second and third newcomer: the flood keeps shrinking to a share.
        let second = pre.admit(net("192.0.2.1")).unwrap();
        assert!(flood[1].evicted().is_cancelled());
        // Now 2 flood, 1 + 1 others: a third network still evicts (2 > 0+1).
        let third = pre.admit(net("100.64.0.1")).unwrap();
        assert!(flood[2].evicted().is_cancelled());
        // Every network holds one: a fourth newcomer is refused, and the
        // honest client was never touched.
        assert_eq!(pre.admit(net("100.65.0.1")).unwrap_err(), PreLoginFull);
        assert!(!honest.evicted().is_cancelled());
        drop(flood);
        assert_eq!(pre.held(), 3, "evicted places were counted once");
        drop((honest, second, third));
        assert_eq!(pre.held(), 0);
    }

    #[test]
    fn a_thousand_networks_keep_out_only_the_unknown() {
        let pre = PreLogin::new(4);
        pre.remember(net("192.0.2.9"), "regular");
        let flood: Vec<_> = (1..=4)
            .map(|i| pre.admit(net(&format!("10.0.{i}.1"))).unwrap())
            .collect();
        // One place each: an unknown newcomer is refused...
        assert_eq!(pre.admit(net("10.0.99.1")).unwrap_err(), PreLoginFull);
        // ...a known network's takes the oldest unknown place.
        let player = pre
            .admit(net("192.0.2.77"))
            .expect("a known network gets in");
        assert!(flood[0].evicted().is_cancelled());
        assert!(!flood[1].evicted().is_cancelled());
        // A known network takes unknown places up to its share only.
        let second = pre.admit(net("192.0.2.78")).expect("its second place");
        assert!(flood[1].evicted().is_cancelled());
        assert_eq!(pre.admit(net("192.0.2.79")).unwrap_err(), PreLoginFull);
        assert!(!flood[2].evicted().is_cancelled());
        drop((player, second));
    }

    #[test]
    fn a_character_makes_three_networks_known_not_a_thousand() {
        let pre = PreLogin::new(1);
        for i in 0..100 {
            pre.remember(net(&format!("10.{i}.0.1")), "roamer");
        }
        let _held = pre.admit(net("203.0.113.1")).unwrap();
        // Only the last three of the roamer's networks count.
        assert_eq!(pre.admit(net("10.0.0.1")).unwrap_err(), PreLoginFull);
        assert!(pre.admit(net("10.99.0.1")).is_ok());
    }

    #[test]
    fn ipv6_networks_are_slash_48s() {
        let pre = PreLogin::new(2);
        let _a = pre.admit(net("2001:db8:1:1::1")).unwrap();
        let _b = pre.admit(net("2001:db8:1:2::1")).unwrap();
        // Another /64 of the same /48 is the same network: refused.
        assert!(pre.admit(net("2001:db8:1:3::1")).is_err());
        // Another /48 takes the first's place.
        assert!(pre.admit(net("2001:db8:2::1")).is_ok());
        assert!(_a.evicted().is_cancelled());
    }

    #[test]
    fn seats_are_capped_and_freed_on_drop() {
        let seats = Seats::new(2);
        let (a, _b) = (seats.take().unwrap(), seats.take().unwrap());
        assert!(seats.take().is_none() && seats.full());
        drop(a);
        assert!(seats.take().is_some());
    }
}
