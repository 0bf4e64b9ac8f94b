//! Where `/metrics` listens. Prometheus text has no authentication, so a
//! bare port binds loopback only; an operator who wants it reachable says
//! so with an address, and is warned once at start.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// Where a bare `--metrics-listen PORT` binds: this host only.
pub const METRICS_DEFAULT_IP: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// A `--metrics-listen` value that is neither a port nor `ADDR:PORT`.
#[derive(Debug, thiserror::Error)]
#[error("expected PORT (binds 127.0.0.1) or ADDR:PORT")]
pub struct MetricsListenError;

/// `PORT` → `127.0.0.1:PORT`; `ADDR:PORT` (or `[v6]:PORT`) as given.
pub fn metrics_listen_addr(value: &str) -> Result<SocketAddr, MetricsListenError> {
    let value = value.trim();
    if let Ok(port) = value.parse::<u16>() {
        return Ok(SocketAddr::new(METRICS_DEFAULT_IP, port));
    }
    value.parse().map_err(|_| MetricsListenError)
}

/// Log, once at start, that `/metrics` is reachable beyond this host
/// without authentication. Call after logging is set up.
pub fn warn_if_metrics_exposed(addr: SocketAddr) {
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, "/metrics listens beyond loopback and is unauthenticated: firewall it or bind 127.0.0.1");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_port_is_loopback_and_an_address_is_kept() {
        assert_eq!(
            metrics_listen_addr("9100").unwrap().to_string(),
            "127.0.0.1:9100"
        );
        assert_eq!(
            metrics_listen_addr(" 0 ").unwrap().to_string(),
            "127.0.0.1:0"
        );
        assert_eq!(
            metrics_listen_addr("0.0.0.0:9100").unwrap().to_string(),
            "0.0.0.0:9100"
        );
        assert_eq!(
            metrics_listen_addr("[::1]:9100").unwrap().to_string(),
            "[::1]:9100"
        );
        for bad in ["", "nine", "70000", "localhost:9100", "1.2.3.4"] {
            assert!(metrics_listen_addr(bad).is_err(), "{bad}");
        }
    }
}
