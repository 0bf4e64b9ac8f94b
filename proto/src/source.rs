//! Where a player connects from, as every per-address limit counts it:
//! the gate's connection, login and create limits, and the shard's failed-
//! login limits over `Login.client_addr`; and the wider network around it
//! ([`prefix_bucket`]), for the gate's per-prefix aggregates. One rule, so
//! the gate and the shard can never disagree on what "one address" is.

use std::net::{IpAddr, Ipv6Addr};

/// IPv6 prefix length one subscriber gets: a /64 is the smallest block an
/// ISP hands out (RFC 6177), and anyone holding one can use all 2^64 of its
/// addresses, so limits per single IPv6 address would be no limit at all.
pub const IPV6_BUCKET_PREFIX: u32 = 64;

/// IPv4 prefix of one network around an address: a /24 is the smallest
/// block routed on the internet, so one holder of many addresses (a
/// hosting range, a botnet's rented block) usually holds them in /24s.
pub const IPV4_PREFIX_BUCKET: u32 = 24;

/// IPv6 prefix of one network around a subscriber: a /48 is what an ISP
/// hands a site (RFC 6177), 65 536 /64s that one holder can use at once.
pub const IPV6_PREFIX_BUCKET: u32 = 48;

/// The key a per-address (or per-prefix) limit is counted under: an
/// address or a network, with its prefix length. Built only by
/// [`ip_bucket`] and [`prefix_bucket`], so no limiter can count by a raw
/// address by mistake; an address bucket never equals a prefix bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpBucket {
    addr: IpAddr,
    prefix: u8,
}

impl IpBucket {
    /// The network the bucket stands for: its address with the host bits
    /// zeroed (an IPv4 address bucket is the address itself).
    pub fn addr(self) -> IpAddr {
        self.addr
    }

    /// Its prefix length.
    pub fn prefix(self) -> u8 {
        self.prefix
    }
}

impl std::fmt::Display for IpBucket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.addr {
            // One IPv4 address prints as itself (the shard's Redis keys
            // `v4:192.0.2.7` are written that way).
            IpAddr::V4(a) if self.prefix == 32 => write!(f, "{a}"),
            a => write!(f, "{a}/{}", self.prefix),
        }
    }
}

/// Where a peer's limits are counted: IPv4 per address (an IPv4-mapped
/// IPv6 address, as a dual-stack socket reports IPv4 peers, counts as that
/// IPv4 address); IPv6 per /64.
pub fn ip_bucket(ip: IpAddr) -> IpBucket {
    bucket(ip, 32, IPV6_BUCKET_PREFIX)
}

/// The network around a peer, where the gate's per-prefix aggregates are
/// counted: IPv4 per /24, IPv6 per /48; an IPv4-mapped IPv6 address as
/// its IPv4 address, as in [`ip_bucket`].
pub fn prefix_bucket(ip: IpAddr) -> IpBucket {
    bucket(ip, IPV4_PREFIX_BUCKET, IPV6_PREFIX_BUCKET)
}

/// The one rule: unmap IPv4-mapped IPv6, then keep `v4` or `v6` leading
/// bits.
fn bucket(ip: IpAddr, v4: u32, v6: u32) -> IpBucket {
    let (addr, prefix) = match ip {
        IpAddr::V4(a) => (IpAddr::V4(mask_v4(a.to_bits(), v4).into()), v4),
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(v4a) => (IpAddr::V4(mask_v4(v4a.to_bits(), v4).into()), v4),
            None => {
                let mask = u128::MAX.checked_shl(128 - v6).unwrap_or(0);
                (IpAddr::V6(Ipv6Addr::from(a.to_bits() & mask)), v6)
            }
        },
    };
    IpBucket {
        addr,
        prefix: u8::try_from(prefix).expect("a prefix length fits a byte"),
    }
}

fn mask_v4(bits: u32, len: u32) -> u32 {
    bits & u32::MAX.checked_shl(32 - len).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn addresses_are_ipv4_per_address_and_ipv6_per_slash_64() {
        assert_eq!(ip_bucket(ip("192.0.2.7")).to_string(), "192.0.2.7");
        assert_ne!(ip_bucket(ip("192.0.2.7")), ip_bucket(ip("192.0.2.8")));
        assert_eq!(
            ip_bucket(ip("::ffff:192.0.2.7")),
            ip_bucket(ip("192.0.2.7"))
        );
        assert_eq!(
            ip_bucket(ip("2001:db8:1:2:aaaa::1")).to_string(),
            "2001:db8:1:2::/64"
        );
    }

    #[test]
    fn prefixes_are_ipv4_slash_24_and_ipv6_slash_48() {
        let p = |s| prefix_bucket(ip(s));
        assert_eq!(p("192.0.2.7"), p("192.0.2.200"));
        assert_ne!(p("192.0.2.7"), p("192.0.3.7"));
        assert_eq!(p("192.0.2.7").to_string(), "192.0.2.0/24");
        assert_eq!(p("::ffff:192.0.2.7"), p("192.0.2.9"));
        // Every /64 of one /48 is one prefix; the next /48 is another.
        assert_eq!(p("2001:db8:1:2::1"), p("2001:db8:1:ffff:1::1"));
        assert_ne!(p("2001:db8:1::1"), p("2001:db8:2::1"));
        assert_eq!(p("2001:db8:1:2::1").to_string(), "2001:db8:1::/48");
        // An address bucket never stands for its own prefix.
        assert_ne!(ip_bucket(ip("10.0.0.0")), p("10.0.0.0"));
    }
}
