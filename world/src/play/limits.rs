//! Failed-login limits at the shard: where a login comes from (its source
//! bucket), and what a refused one hears. The counting is the store's
//! (`telos_redis::store::LoginLimits`); docs/operations.md, "Login limits
//! at the shard", has the design.

use std::net::{IpAddr, SocketAddr};

use std::time::Duration;
use telos_proto::source::ip_bucket;

/// The bucket of a `Login` without a usable client address: an older
/// gate, or a caller that is not a gate. All of them share one bucket.
pub(super) const UNKNOWN_SOURCE: &str = "unknown";

/// The source bucket of the gate's `client_addr`, by the one rule the
/// gate's own limits use ([`ip_bucket`]: IPv4 by address, IPv6 by /64).
pub(super) fn source_bucket(client_addr: &str) -> String {
    let ip = client_addr
        .parse::<IpAddr>()
        .or_else(|_| client_addr.parse::<SocketAddr>().map(|s| s.ip()));
    match ip.map(ip_bucket) {
        Ok(bucket) if bucket.addr().is_ipv4() => format!("v4:{bucket}"),
        Ok(bucket) => format!("v6:{bucket}"),
        Err(_) => UNKNOWN_SOURCE.to_string(),
    }
}

/// The bucket of every `Login` from `caller` once its budget of failures
/// attributed to client addresses is spent: the caller is one source.
pub(super) fn caller_bucket(caller: &str) -> String {
    format!("caller:{caller}")
}

/// What a login refused by the limits hears: a `Login failed` line, the
/// same for a known and an unknown name, with when to try again (whole
/// seconds, rounded up, at least one).
pub(super) fn too_many_attempts(wait: Duration) -> String {
    let secs = wait.as_millis().div_ceil(1000).max(1);
    format!("Login failed: too many attempts, try again in {secs} s.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_v4_addresses_v6_slash_64s_or_unknown() {
        assert_eq!(source_bucket("192.0.2.7"), "v4:192.0.2.7");
        assert_eq!(source_bucket("192.0.2.7:4000"), "v4:192.0.2.7");
        assert_eq!(source_bucket("::ffff:192.0.2.7"), "v4:192.0.2.7");
        assert_eq!(
            source_bucket("2001:db8:1:2:aaaa:bbbb:cccc:dddd"),
            "v6:2001:db8:1:2::/64"
        );
        assert_eq!(
            source_bucket("2001:db8:1:2::9"),
            source_bucket("[2001:db8:1:2:ffff::1]:7000")
        );
        assert_ne!(
            source_bucket("2001:db8:1:2::9"),
            source_bucket("2001:db8:1:3::9")
        );
        for unusable in ["", "not an address", "300.1.1.1"] {
            assert_eq!(source_bucket(unusable), UNKNOWN_SOURCE, "{unusable:?}");
        }
    }

    #[test]
    fn the_refusal_is_a_login_failed_line_in_whole_seconds() {
        let line = too_many_attempts(Duration::from_millis(29_001));
        assert_eq!(line, "Login failed: too many attempts, try again in 30 s.");
        assert!(too_many_attempts(Duration::ZERO).ends_with(" 1 s."));
    }
}
