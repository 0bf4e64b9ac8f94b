//! The settings of the gate's edge against crowds of strangers: the
//! pre-login places, the per-network aggregates, the pre-login input rate
//! and the PROXY protocol. Flags (`--help`), environment variables and
//! `--config` keys as every other setting; see docs/operations.md, "The
//! gate's edge limits".

use std::net::IpAddr;
use std::time::Duration;

use clap::Args;
use ipnet::IpNet;

use crate::config_file::{ConfigError, FileConfig, pick, positive_pick};

/// Strangers (connections not logged in) held at once: a login storm after
/// a gate restart is served a thousand at a time (each logs in within
/// seconds), while a flood of idle sockets holds these places and no
/// player's seat.
pub const DEFAULT_MAX_PRE_LOGIN: usize = 1000;

/// Connections (players and strangers) from one IPv4 /24 or one IPv6 /48
/// at once: a campus or a carrier NAT pool fits (16 addresses' worth of
/// the per-address cap and more), while one holder of many addresses in
/// one network (a rented range, an IPv6 site's 65 536 /64s) holds this
/// many places, not thousands.
pub const DEFAULT_MAX_CONNECTIONS_PER_PREFIX: usize = 128;

/// Input a connection that has not logged in may send, bytes per second
/// (after a burst of [`PRE_LOGIN_BYTE_BURST`]). A login is two short lines
/// and a client's telnet negotiation a few hundred bytes; a stranger
/// streaming `IAC NOP` or an endless subnegotiation is read this slowly
/// (TCP backpressure), so it costs the gate next to nothing.
pub const DEFAULT_PRE_LOGIN_BYTES_PER_SEC: u32 = 1024;

/// Bytes a connection may send at once before login, before the rate
/// applies: one socket read's worth, enough for any client's opening
/// negotiation and a pasted login line.
pub const PRE_LOGIN_BYTE_BURST: u32 = 4096;

/// Input a logged-in player's connection may send, bytes per second
/// (`--input-bytes-per-sec`), after a burst of [`INPUT_BURST_SECS`] of
/// it: every byte counts — lines, telnet
/// commands (`IAC NOP`), subnegotiations (GMCP `Core.Supports.Set`,
/// CHARSET), a web page's own messages — over every transport (issue 30:
/// after login no byte rate applied; 48 sockets of `IAC NOP` sent 10.8 GB
/// in 15 s). Far above what a player types or a client negotiates; a flood
/// is read this slowly (TCP backpressure) and costs the gate next to
/// nothing.
pub const DEFAULT_INPUT_BYTES_PER_SEC: u32 = 16 * 1024;
/// Bytes a player may send at once before the rate applies, in seconds of
/// the rate: 64 KiB at the default, a large paste.
pub const INPUT_BURST_SECS: u32 = 4;

/// Commands a player may send at once before the rate applies
/// ([`crate::command_rate`]): a long
/// speedwalk or a pasted alias list.
pub const DEFAULT_COMMAND_BURST: u32 = 60;

/// Commands a second after the burst: faster than anyone types, about what
/// a client's triggers send in a fight.
pub const DEFAULT_COMMANDS_PER_SEC: u32 = 10;

/// A household, a campus or a carrier NAT may put several honest players
/// behind one address; 16 leaves room for them while one attacker's address
/// holds 16 of the gate's 10 000 places, not all of them.
pub const DEFAULT_MAX_CONNECTIONS_PER_IP: usize = 16;

/// Typing `connect name password` takes seconds; a minute is generous.
pub const DEFAULT_PRE_LOGIN_TIMEOUT: Duration = Duration::from_secs(60);

/// New characters one address may create at once: a few for a household...
pub const DEFAULT_CREATE_IP_BURST: u32 = 5;
/// ...and then a few an hour, which no honest player notices and which
/// makes minting characters by script (each costs the world a password
/// hash and a stored record) slow.
pub const DEFAULT_CREATE_IP_PER_HOUR: f64 = 5.0;

/// New characters one network (IPv4 /24, IPv6 /48) may create at once,
/// and then per hour: a campus or a household's neighbours, not a script
/// spread over a /24's addresses.
pub const DEFAULT_CREATE_NETWORK_PER_HOUR: u32 = 20;
/// New characters through one gate, every address together, per hour (a
/// fifth of it at once): far above a launch day's newcomers, far below a
/// script spread over many networks (issue 30: 2000 characters in 34–49 s
/// from 20 /24s).
pub const DEFAULT_CREATE_PER_HOUR: u32 = 1000;

/// How many characters may be created beyond one address's own budget
/// (`--create-ip-burst`, `--create-ip-per-hour`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreateCaps {
    /// Per network (IPv4 /24, IPv6 /48): at once, then per hour.
    pub per_network_per_hour: u32,
    /// Every address together: a fifth at once, then per hour.
    pub per_hour: u32,
}

impl Default for CreateCaps {
    fn default() -> Self {
        CreateCaps {
            per_network_per_hour: DEFAULT_CREATE_NETWORK_PER_HOUR,
            per_hour: DEFAULT_CREATE_PER_HOUR,
        }
    }
}

/// The edge limits, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EdgeLimits {
    /// Connections not logged in, at once (`--max-pre-login`).
    pub max_pre_login: usize,
    /// Connections at once from one IPv4 /24.
    pub max_connections_per_ipv4_24: usize,
    /// Connections at once from one IPv6 /48.
    pub max_connections_per_ipv6_48: usize,
    /// Pre-login input, bytes per second.
    pub pre_login_bytes_per_sec: u32,
    /// Peers whose connections start with a PROXY protocol (v1 or v2)
    /// header naming the player's address; empty: the PROXY protocol is
    /// off.
    pub proxy_protocol_from: Vec<IpNet>,
    /// Commands a logged-in player may send at once (`--command-burst`).
    pub command_burst: u32,
    /// Commands a second after the burst (`--commands-per-sec`).
    pub commands_per_sec: u32,
    /// Give freed memory back to the system after a crowd leaves
    /// (`--malloc-trim`, [`crate::trim`]).
    pub malloc_trim: bool,
    /// Character creation beyond one address.
    pub create: CreateCaps,
    /// A logged-in player's input, bytes per second (`--input-bytes-per-sec`).
    pub input_bytes_per_sec: u32,
}

impl Default for EdgeLimits {
    fn default() -> Self {
        Self {
            max_pre_login: DEFAULT_MAX_PRE_LOGIN,
            max_connections_per_ipv4_24: DEFAULT_MAX_CONNECTIONS_PER_PREFIX,
            max_connections_per_ipv6_48: DEFAULT_MAX_CONNECTIONS_PER_PREFIX,
            pre_login_bytes_per_sec: DEFAULT_PRE_LOGIN_BYTES_PER_SEC,
            proxy_protocol_from: Vec::new(),
            command_burst: DEFAULT_COMMAND_BURST,
            commands_per_sec: DEFAULT_COMMANDS_PER_SEC,
            malloc_trim: true,
            create: CreateCaps::default(),
            input_bytes_per_sec: DEFAULT_INPUT_BYTES_PER_SEC,
        }
    }
}

impl EdgeLimits {
    /// Whether connections from `peer` must start with a PROXY header.
    pub fn is_proxy(&self, peer: IpAddr) -> bool {
        let peer = match peer {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(peer, IpAddr::V4),
            v4 => v4,
        };
        self.proxy_protocol_from
            .iter()
            .any(|net| net.contains(&peer))
    }
}

/// The edge flags, part of `telos-gate --help`.
#[derive(Debug, Default, Args)]
pub struct EdgeCli {
    /// Connections not yet logged in, at once; separate from
    /// --max-connections, which counts logged-in players [default: 1000].
    #[arg(long, value_name = "N", env = "TELOS_GATE_MAX_PRE_LOGIN")]
    pub max_pre_login: Option<String>,
    /// Connections at once from one IPv4 /24 [default: 128].
    #[arg(long, value_name = "N", env = "TELOS_GATE_MAX_CONNECTIONS_PER_IPV4_24")]
    pub max_connections_per_ipv4_24: Option<String>,
    /// Connections at once from one IPv6 /48 [default: 128].
    #[arg(long, value_name = "N", env = "TELOS_GATE_MAX_CONNECTIONS_PER_IPV6_48")]
    pub max_connections_per_ipv6_48: Option<String>,
    /// Input read from a connection before login, bytes per second, after
    /// a 4096-byte burst [default: 1024].
    #[arg(long, value_name = "BYTES", env = "TELOS_GATE_PRE_LOGIN_BYTES_PER_SEC")]
    pub pre_login_bytes_per_sec: Option<String>,
    /// Load balancers (addresses or CIDR networks, comma-separated) whose
    /// connections carry a PROXY protocol v1/v2 header with the player's
    /// address; required from them, refused from anyone else [default:
    /// none, the PROXY protocol is off].
    #[arg(long, value_name = "ADDRS", env = "TELOS_GATE_PROXY_PROTOCOL_FROM")]
    pub proxy_protocol_from: Option<String>,
    /// Commands a logged-in player may send at once, before
    /// --commands-per-sec applies; commands beyond wait their turn, none is
    /// dropped [default: 60].
    #[arg(long, value_name = "N", env = "TELOS_GATE_COMMAND_BURST")]
    pub command_burst: Option<String>,
    /// Commands a second one player may send after the burst [default: 10].
    #[arg(long, value_name = "N", env = "TELOS_GATE_COMMANDS_PER_SEC")]
    pub commands_per_sec: Option<String>,
    /// Give memory back to the system (glibc's malloc_trim) once a crowd of
    /// connections has left: true or false [default: true].
    #[arg(long, value_name = "BOOL", env = "TELOS_GATE_MALLOC_TRIM")]
    pub malloc_trim: Option<String>,
    /// Character creations per network (IPv4 /24, IPv6 /48), however many
    /// addresses it spreads them over: at once, then per hour [default: 20].
    #[arg(long, value_name = "N", env = "TELOS_GATE_CREATE_NETWORK_PER_HOUR")]
    pub create_network_per_hour: Option<String>,
    /// Character creations through this gate, every address together: a
    /// fifth at once, then per hour [default: 1000].
    #[arg(long, value_name = "N", env = "TELOS_GATE_CREATE_PER_HOUR")]
    pub create_per_hour: Option<String>,
    /// Input a logged-in player may send, bytes per second, every byte
    /// counted (telnet commands, GMCP, a web page's own messages), after a
    /// burst of four seconds of it [default: 16384].
    #[arg(long, value_name = "BYTES", env = "TELOS_GATE_INPUT_BYTES_PER_SEC")]
    pub input_bytes_per_sec: Option<String>,
}

impl EdgeCli {
    /// Flags over the file over the defaults.
    pub fn resolve(&self, file: &FileConfig) -> Result<EdgeLimits, ConfigError> {
        let d = EdgeLimits::default();
        let proxies = pick::<String>(
            "proxy-protocol-from",
            "TELOS_GATE_PROXY_PROTOCOL_FROM",
            self.proxy_protocol_from.as_ref(),
            file.proxy_protocol_from.clone(),
        )?
        .map(|list| proxy_networks(&list))
        .transpose()?
        .unwrap_or_default();
        Ok(EdgeLimits {
            max_pre_login: positive_pick(
                "max_pre_login",
                "TELOS_GATE_MAX_PRE_LOGIN",
                self.max_pre_login.as_ref(),
                file.max_pre_login,
                d.max_pre_login,
            )?,
            max_connections_per_ipv4_24: positive_pick(
                "max_connections_per_ipv4_24",
                "TELOS_GATE_MAX_CONNECTIONS_PER_IPV4_24",
                self.max_connections_per_ipv4_24.as_ref(),
                file.max_connections_per_ipv4_24,
                d.max_connections_per_ipv4_24,
            )?,
            max_connections_per_ipv6_48: positive_pick(
                "max_connections_per_ipv6_48",
                "TELOS_GATE_MAX_CONNECTIONS_PER_IPV6_48",
                self.max_connections_per_ipv6_48.as_ref(),
                file.max_connections_per_ipv6_48,
                d.max_connections_per_ipv6_48,
            )?,
            pre_login_bytes_per_sec: positive_pick(
                "pre_login_bytes_per_sec",
                "TELOS_GATE_PRE_LOGIN_BYTES_PER_SEC",
                self.pre_login_bytes_per_sec.as_ref(),
                file.pre_login_bytes_per_sec,
                d.pre_login_bytes_per_sec,
            )?,
            proxy_protocol_from: proxies,
            command_burst: positive_pick(
                "command_burst",
                "TELOS_GATE_COMMAND_BURST",
                self.command_burst.as_ref(),
                file.command_burst,
                d.command_burst,
            )?,
            commands_per_sec: positive_pick(
                "commands_per_sec",
                "TELOS_GATE_COMMANDS_PER_SEC",
                self.commands_per_sec.as_ref(),
                file.commands_per_sec,
                d.commands_per_sec,
            )?,
            malloc_trim: pick(
                "malloc-trim",
                "TELOS_GATE_MALLOC_TRIM",
                self.malloc_trim.as_ref(),
                file.malloc_trim,
            )?
            .unwrap_or(d.malloc_trim),
            create: self.create_caps(file, d.create)?,
            input_bytes_per_sec: positive_pick(
                "input_bytes_per_sec",
                "TELOS_GATE_INPUT_BYTES_PER_SEC",
                self.input_bytes_per_sec.as_ref(),
                file.input_bytes_per_sec,
                d.input_bytes_per_sec,
            )?,
        })
    }

    fn create_caps(&self, file: &FileConfig, d: CreateCaps) -> Result<CreateCaps, ConfigError> {
        Ok(CreateCaps {
            per_network_per_hour: positive_pick(
                "create_network_per_hour",
                "TELOS_GATE_CREATE_NETWORK_PER_HOUR",
                self.create_network_per_hour.as_ref(),
                file.create_network_per_hour,
                d.per_network_per_hour,
            )?,
            per_hour: positive_pick(
                "create_per_hour",
                "TELOS_GATE_CREATE_PER_HOUR",
                self.create_per_hour.as_ref(),
                file.create_per_hour,
                d.per_hour,
            )?,
        })
    }
}

/// `10.0.0.5,10.1.0.0/16,fd00::/8`: addresses are single-host networks.
fn proxy_networks(list: &str) -> Result<Vec<IpNet>, ConfigError> {
    networks(
        list,
        "proxy_protocol_from (--proxy-protocol-from / TELOS_GATE_PROXY_PROTOCOL_FROM)",
    )
}

/// A comma-separated list of addresses and CIDR networks; `what` names the
/// setting in the error.
pub(crate) fn networks(list: &str, what: &str) -> Result<Vec<IpNet>, ConfigError> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<IpNet>()
                .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
                .map_err(|_| {
                    ConfigError(format!(
                        "invalid {what} {s:?}: expected an address or a CIDR network"
                    ))
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxies_are_addresses_or_networks_and_mapped_peers_match() {
        let cli = EdgeCli {
            proxy_protocol_from: Some("10.0.0.5, 192.168.0.0/16,fd00::/8".into()),
            ..EdgeCli::default()
        };
        let e = cli.resolve(&FileConfig::default()).unwrap();
        assert!(e.is_proxy("10.0.0.5".parse().unwrap()));
        assert!(!e.is_proxy("10.0.0.6".parse().unwrap()));
        assert!(e.is_proxy("192.168.7.1".parse().unwrap()));
        assert!(e.is_proxy("::ffff:192.168.7.1".parse().unwrap()));
        assert!(e.is_proxy("fd00::1".parse().unwrap()));
        let bad = EdgeCli {
            proxy_protocol_from: Some("10.0.0.0/33".into()),
            ..EdgeCli::default()
        };
        let err = bad.resolve(&FileConfig::default()).unwrap_err();
        assert!(err.to_string().contains("--proxy-protocol-from"), "{err}");
        assert!(!EdgeLimits::default().is_proxy("127.0.0.1".parse().unwrap()));
    }

    #[test]
    fn the_file_fills_what_no_flag_gives() {
        let file =
            FileConfig::parse("max_pre_login = 7\nproxy_protocol_from = \"10.0.0.1\"\n").unwrap();
        let e = EdgeCli::default().resolve(&file).unwrap();
        assert_eq!(e.max_pre_login, 7);
        assert_eq!(e.proxy_protocol_from.len(), 1);
        assert_eq!(
            e.max_connections_per_ipv4_24,
            DEFAULT_MAX_CONNECTIONS_PER_PREFIX
        );
        let zero = EdgeCli {
            max_pre_login: Some("0".into()),
            ..EdgeCli::default()
        };
        assert!(zero.resolve(&file).is_err());
        assert!(e.malloc_trim, "the trim is on unless turned off");
        let off = EdgeCli {
            malloc_trim: Some("false".into()),
            ..EdgeCli::default()
        };
        assert!(!off.resolve(&file).unwrap().malloc_trim);
        // "0" or "off" is refused by name, not read as on.
        let unclear = EdgeCli {
            malloc_trim: Some("0".into()),
            ..EdgeCli::default()
        };
        let err = unclear.resolve(&file).unwrap_err();
        assert!(err.to_string().contains("--malloc-trim"), "{err}");
    }
}
