//! Where a player connects from, as every per-address limit counts it:
//! the gate's connection, login and create limits, and the shard's failed-
//! login limits over `Login.client_addr`. One rule, so the gate and the
//! shard can never disagree on what "one address" is.

use std::net::{IpAddr, Ipv6Addr};

/// IPv6 prefix length one subscriber gets: a /64 is the smallest block an
/// ISP hands out (RFC 6177), and anyone holding one can use all 2^64 of its
/// addresses, so limits per single IPv6 address would be no limit at all.
pub const IPV6_BUCKET_PREFIX: u32 = 64;

/// The key every per-address limit is counted under: an IPv4 address, or
/// an IPv6 /64. Built only by [`ip_bucket`], so no limiter can count by a
/// raw address by mistake.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpBucket(IpAddr);

impl IpBucket {
    /// The network the bucket stands for: an IPv4 address, or an IPv6 /64
    /// (its address with the host bits zeroed).
    pub fn addr(self) -> IpAddr {
        self.0
    }
}

impl std::fmt::Display for IpBucket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            IpAddr::V4(a) => write!(f, "{a}"),
            IpAddr::V6(a) => write!(f, "{a}/{IPV6_BUCKET_PREFIX}"),
        }
    }
}

/// Where a peer's limits are counted: IPv4 per address (an IPv4-mapped
/// IPv6 address, as a dual-stack socket reports IPv4 peers, counts as that
/// IPv4 address); IPv6 per /64.
pub fn ip_bucket(ip: IpAddr) -> IpBucket {
    match ip {
        IpAddr::V4(a) => IpBucket(IpAddr::V4(a)),
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(v4) => IpBucket(IpAddr::V4(v4)),
            None => {
                let mask = u128::MAX << (128 - IPV6_BUCKET_PREFIX);
                IpBucket(IpAddr::V6(Ipv6Addr::from(a.to_bits() & mask)))
            }
        },
    }
}
