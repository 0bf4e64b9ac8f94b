//! The shard's failed-login limit flags (docs/operations.md, "Login limits
//! at the shard"). Flags and environment only: the defaults are the
//! production values, and the flags exist so tests (and an operator under
//! attack) can change them.

use std::time::Duration;

use clap::Args;
use telos_redis::store::LoginLimits;

use super::error::{ConfigError, bad};

#[derive(Debug, Args, Default)]
pub struct LoginLimitFlags {
    /// Failed logins from one source bucket before that account and bucket
    /// are locked [default: 5].
    #[arg(long, env = "TELOS_LOGIN_LOCK_AFTER")]
    pub login_lock_after: Option<u32>,
    /// The first lock in milliseconds; each failure after one doubles it [default: 30000].
    #[arg(long, env = "TELOS_LOGIN_LOCK_MS")]
    pub login_lock_ms: Option<u64>,
    /// The longest lock in milliseconds [default: 900000].
    #[arg(long, env = "TELOS_LOGIN_LOCK_CAP_MS")]
    pub login_lock_cap_ms: Option<u64>,
    /// Failed logins account-wide before the account is throttled [default: 20].
    #[arg(long, env = "TELOS_LOGIN_THROTTLE_AFTER")]
    pub login_throttle_after: Option<u32>,
    /// Once throttled, one attempt per this many milliseconds from sources
    /// new to the account [default: 3000].
    #[arg(long, env = "TELOS_LOGIN_THROTTLE_MS")]
    pub login_throttle_ms: Option<u64>,
    /// Failed logins a caller certificate (each gate's) may attribute to
    /// the client addresses it names; beyond them its logins count as one
    /// source, its own [default: 100].
    #[arg(long, env = "TELOS_LOGIN_CALLER_BUDGET")]
    pub login_caller_budget: Option<u32>,
    /// One failure of that budget back per this many milliseconds [default: 1000].
    #[arg(long, env = "TELOS_LOGIN_CALLER_REFILL_MS")]
    pub login_caller_refill_ms: Option<u64>,
}

impl LoginLimitFlags {
    /// The limits, every value positive and the cap at least the first lock.
    pub fn resolve(&self) -> Result<LoginLimits, ConfigError> {
        let d = LoginLimits::default();
        let count = |name: &str, v: Option<u32>, default: u32| match v.unwrap_or(default) {
            0 => Err(bad(name, "must be positive")),
            v => Ok(v),
        };
        let millis = |name: &str, v: Option<u64>, default: Duration| match v {
            Some(0) => Err(bad(name, "must be positive")),
            Some(ms) => Ok(Duration::from_millis(ms)),
            None => Ok(default),
        };
        let limits = LoginLimits {
            lock_after: count(
                "--login-lock-after (TELOS_LOGIN_LOCK_AFTER)",
                self.login_lock_after,
                d.lock_after,
            )?,
            lock: millis(
                "--login-lock-ms (TELOS_LOGIN_LOCK_MS)",
                self.login_lock_ms,
                d.lock,
            )?,
            lock_cap: millis(
                "--login-lock-cap-ms (TELOS_LOGIN_LOCK_CAP_MS)",
                self.login_lock_cap_ms,
                d.lock_cap,
            )?,
            throttle_after: count(
                "--login-throttle-after (TELOS_LOGIN_THROTTLE_AFTER)",
                self.login_throttle_after,
                d.throttle_after,
            )?,
            throttle_interval: millis(
                "--login-throttle-ms (TELOS_LOGIN_THROTTLE_MS)",
                self.login_throttle_ms,
                d.throttle_interval,
            )?,
            caller_budget: count(
                "--login-caller-budget (TELOS_LOGIN_CALLER_BUDGET)",
                self.login_caller_budget,
                d.caller_budget,
            )?,
            caller_refill: millis(
                "--login-caller-refill-ms (TELOS_LOGIN_CALLER_REFILL_MS)",
                self.login_caller_refill_ms,
                d.caller_refill,
            )?,
        };
        if limits.lock_cap < limits.lock {
            return Err(bad(
                "--login-lock-cap-ms (TELOS_LOGIN_LOCK_CAP_MS)",
                "must be at least --login-lock-ms",
            ));
        }
        Ok(limits)
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::config::{Cli, WorldConfig};

    fn resolve(args: &[&str]) -> Result<WorldConfig, String> {
        let cli = Cli::try_parse_from(
            ["telos-world", "--shard-id", "a"]
                .into_iter()
                .chain(args.iter().copied()),
        )
        .map_err(|e| e.to_string())?;
        WorldConfig::resolve(cli).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_flags_and_bad_values() {
        let c = resolve(&[]).unwrap();
        assert_eq!(c.login_limits, Default::default());
        let c = resolve(&["--login-lock-after", "2", "--login-lock-ms", "500"]).unwrap();
        assert_eq!(
            (c.login_limits.lock_after, c.login_limits.lock.as_millis()),
            (2, 500)
        );
        let err = resolve(&["--login-throttle-ms", "0"]).unwrap_err();
        assert!(err.contains("--login-throttle-ms"), "{err}");
        let err = resolve(&["--login-lock-ms", "5000", "--login-lock-cap-ms", "10"]).unwrap_err();
        assert!(err.contains("--login-lock-cap-ms"), "{err}");
    }
}
