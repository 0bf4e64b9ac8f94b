//! Failed-login limits, counted in Redis so that every shard (and every
//! gate behind them) sees the same counts: per (account, source bucket) a
//! lock that doubles and expires, per account a throttle that slows
//! guessing from many sources but never shuts the account.
//!
//! Keys (`{name}` lowercase, `{bucket}` from the caller, e.g. `v4:192.0.2.7`):
//!
//! | key | holds | lives |
//! |---|---|---|
//! | `telos:loginfail:{name}:{bucket}` | attempts not yet proven good, from that source | `memory` after the last |
//! | `telos:loginlock:{name}:{bucket}` | the pair's lock | its lock time |
//! | `telos:loginfail:{name}` | attempts not yet proven good, all sources | `memory` after the last |
//! | `telos:loginslot:{name}` | the one throttled attempt of this interval | the throttle interval |
//! | `telos:loginok:{name}:{bucket}` | this source logged in to this account | [`KNOWN_SOURCE`] |
//! | `telos:loginsrc:{caller}` | a caller certificate's budget of failed logins attributed to the addresses it names | until it would be full |
//!
//! An attempt is counted when it is admitted, before its password is
//! checked, and taken back when it succeeds: guesses sent at once cannot
//! all be admitted before the first one's verdict. Nothing here is ever
//! without a TTL, so a lock cannot outlive its time, and a flood of
//! made-up names leaves keys that all expire.

use std::sync::LazyLock;
use std::time::Duration;

use redis::Script;

use super::error::StoreError;
use super::handle::{PREFIX, Store, normalize};

static ADMIT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("login_admit.lua")));
static SUCCEEDED: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("login_succeeded.lua")));
static UNCHECKED: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("login_unchecked.lua")));
static CALLER: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("login_caller.lua")));

/// Failures from one source before that (account, source) pair is locked:
/// enough for a player's typos, few enough that a guesser learns nothing.
pub const DEFAULT_LOCK_AFTER: u32 = 5;
/// The first lock; each failure after a lock doubles it.
pub const DEFAULT_LOCK: Duration = Duration::from_secs(30);
/// The longest lock: a player sharing an address with a guesser waits at
/// most this long for the next try.
pub const DEFAULT_LOCK_CAP: Duration = Duration::from_secs(15 * 60);
/// Failures account-wide (all sources) before the account is throttled:
/// four sources' worth of locks, so that one typo-prone player never
/// reaches it, while a guesser spread over many addresses does.
pub const DEFAULT_THROTTLE_AFTER: u32 = 20;
/// Once throttled, one attempt per this long from sources that have not
/// logged in to the account lately (~1200 guesses an hour at most, from
/// however many addresses).
pub const DEFAULT_THROTTLE_INTERVAL: Duration = Duration::from_secs(3);
/// Failures are forgotten this long after the last one (at least the lock
/// cap, so a lock's doubling survives its own expiry).
pub const FAILURE_MEMORY: Duration = Duration::from_secs(3600);
/// A source that logged in to an account stays exempt from its throttle
/// this long: the player's own address is not slowed by someone else's
/// guessing.
pub const KNOWN_SOURCE: Duration = Duration::from_secs(30 * 24 * 3600);

/// Failed logins a caller certificate (a gate's) may attribute to the
/// addresses it names in `Login.client_addr` before its logins count as
/// its own one source: an honest gate's players mistype a few passwords a
/// minute; a caller inventing a fresh address for every guess (to escape
/// the per-source locks) spends this at once.
pub const DEFAULT_CALLER_BUDGET: u32 = 100;
/// One failure of that budget back per this long (3600 an hour).
pub const DEFAULT_CALLER_REFILL: Duration = Duration::from_secs(1);

/// The limits a shard applies (flags override the defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginLimits {
    pub lock_after: u32,
    pub lock: Duration,
    pub lock_cap: Duration,
    pub throttle_after: u32,
    pub throttle_interval: Duration,
    /// Failed logins per caller certificate whose client address is
    /// trusted ([`DEFAULT_CALLER_BUDGET`])...
    pub caller_budget: u32,
    /// ...and one back per this long.
    pub caller_refill: Duration,
}

impl Default for LoginLimits {
    fn default() -> Self {
        LoginLimits {
            lock_after: DEFAULT_LOCK_AFTER,
            lock: DEFAULT_LOCK,
            lock_cap: DEFAULT_LOCK_CAP,
            throttle_after: DEFAULT_THROTTLE_AFTER,
            throttle_interval: DEFAULT_THROTTLE_INTERVAL,
            caller_budget: DEFAULT_CALLER_BUDGET,
            caller_refill: DEFAULT_CALLER_REFILL,
        }
    }
}

/// The answer to "may this login be checked now?".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Check the password; `locks`: if it is wrong, the pair is now locked
    /// for this long (the player is told so with the failure).
    Admitted { locks: Option<Duration> },
    /// Refused unchecked: locked or throttled for this long still.
    Wait(Duration),
}

fn ms(d: Duration) -> u64 {
    // At least 1 ms: Redis refuses PX 0.
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// The five keys of (`name`, `bucket`), in the scripts' order.
struct Keys {
    pair: String,
    lock: String,
    account: String,
    slot: String,
    known: String,
}

impl Keys {
    fn new(name: &str, bucket: &str) -> Result<Keys, StoreError> {
        let name = normalize(name)?;
        Ok(Keys {
            pair: format!("{PREFIX}loginfail:{name}:{bucket}"),
            lock: format!("{PREFIX}loginlock:{name}:{bucket}"),
            account: format!("{PREFIX}loginfail:{name}"),
            slot: format!("{PREFIX}loginslot:{name}"),
            known: format!("{PREFIX}loginok:{name}:{bucket}"),
        })
    }
}

impl Store {
    /// Whether `caller` (a certificate's role and holder, e.g.
    /// `gate:gate-1`) still has budget for failed logins attributed to the
    /// client addresses it names; `take` spends one (a failed login).
    pub async fn caller_budget(
        &self,
        caller: &str,
        limits: &LoginLimits,
        take: bool,
    ) -> Result<bool, StoreError> {
        let key = format!("{PREFIX}loginsrc:{caller}");
        let ok: i64 = CALLER
            .key(&key)
            .arg(limits.caller_budget)
            .arg(ms(limits.caller_refill))
            .arg(if take { "take" } else { "peek" })
            .invoke_async(&mut self.conn())
            .await?;
        Ok(ok == 1)
    }

    /// Whether a login for `name` from `bucket` may be checked now; an
    /// admitted attempt counts as a failure until [`Store::login_succeeded`].
    pub async fn admit_login(
        &self,
        name: &str,
        bucket: &str,
        limits: &LoginLimits,
    ) -> Result<Admission, StoreError> {
        let k = Keys::new(name, bucket)?;
        let memory = FAILURE_MEMORY.max(limits.lock_cap);
        let (admitted, wait): (i64, u64) = ADMIT
            .key(&k.pair)
            .key(&k.lock)
            .key(&k.account)
            .key(&k.slot)
            .key(&k.known)
            .arg(limits.lock_after)
            .arg(ms(limits.lock))
            .arg(ms(limits.lock_cap))
            .arg(limits.throttle_after)
            .arg(ms(limits.throttle_interval))
            .arg(ms(memory))
            .invoke_async(&mut self.conn())
            .await?;
        let wait = Duration::from_millis(wait);
        Ok(if admitted == 1 {
            Admission::Admitted {
                locks: (!wait.is_zero()).then_some(wait),
            }
        } else {
            Admission::Wait(wait)
        })
    }

    /// Whether `bucket` logged in to `name` lately (a known source: the
    /// account's throttle does not apply to it).
    pub async fn known_source(&self, name: &str, bucket: &str) -> Result<bool, StoreError> {
        let k = Keys::new(name, bucket)?;
        let known: bool = redis::cmd("EXISTS")
            .arg(&k.known)
            .query_async(&mut self.conn())
            .await?;
        Ok(known)
    }

    /// The admitted login for `name` from `bucket` proved the password:
    /// the pair starts afresh and the source is known to the account.
    pub async fn login_succeeded(&self, name: &str, bucket: &str) -> Result<(), StoreError> {
        let k = Keys::new(name, bucket)?;
        let _: i64 = SUCCEEDED
            .key(&k.pair)
            .key(&k.lock)
            .key(&k.account)
            .key(&k.known)
            .arg(ms(KNOWN_SOURCE))
            .invoke_async(&mut self.conn())
            .await?;
        Ok(())
    }

    /// The admitted login was never judged (hashing `Busy`, the row
    /// unreadable): it does not count, and a lock it armed is lifted.
    pub async fn login_unchecked(
        &self,
        name: &str,
        bucket: &str,
        admitted: Admission,
    ) -> Result<(), StoreError> {
        let k = Keys::new(name, bucket)?;
        let armed = matches!(admitted, Admission::Admitted { locks: Some(_) });
        let _: i64 = UNCHECKED
            .key(&k.pair)
            .key(&k.lock)
            .key(&k.account)
            .arg(if armed { "1" } else { "0" })
            .invoke_async(&mut self.conn())
            .await?;
        Ok(())
    }
}
