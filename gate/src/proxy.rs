//! The PROXY protocol (HAProxy's, v1 text and v2 binary) on connections
//! from a configured load balancer (`--proxy-protocol-from`): the header
//! names the player's address, which every per-address limit and the
//! shard's `Login.client_addr` then see, instead of the balancer's own.
//!
//! Only from the configured peers, and from them always: a connection from
//! one of them that does not start with a valid header is refused (a
//! balancer either sends the header on every connection or on none, so a
//! missing one is a misconfiguration to surface, not a player to serve as
//! the balancer's address). A `LOCAL` header (v2; the balancer's own
//! health check) or `UNKNOWN` (v1) is served as the balancer itself. A
//! header from anyone else is never parsed: it is login input, and the
//! login dialogue refuses a `PROXY` line (see [`is_v1_header_line`]).
//!
//! Parsing is the `proxy-header` crate's; this module bounds the read in
//! time ([`HEADER_TIMEOUT`], applied by the caller) and size
//! ([`MAX_HEADER_BYTES`]).

use std::net::SocketAddr;
use std::time::Duration;

use proxy_header::{ParseConfig, Protocol, ProxyHeader};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// A balancer sends the header with the connection; one that has not
/// within this long is not going to.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest header read: a v1 header is at most 107 bytes; a v2 header
/// is 16 bytes and its addresses plus whatever TLVs the balancer adds
/// (a cloud balancer's endpoint id, TLS details: a few hundred bytes).
pub const MAX_HEADER_BYTES: usize = 2048;

#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("the connection closed before a complete PROXY header")]
    Closed,
    #[error("no PROXY header within {MAX_HEADER_BYTES} bytes")]
    TooLong,
    #[error("not a PROXY protocol header: {0}")]
    Invalid(String),
    #[error("a PROXY header for a datagram (UDP) connection")]
    NotStream,
}

/// What the header said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proxied {
    /// The player's address; `None` for `LOCAL` / `UNKNOWN` (serve the
    /// balancer as itself).
    pub client: Option<SocketAddr>,
    /// Bytes read past the header: the player's first input.
    pub rest: Vec<u8>,
}

/// Read the PROXY header at the start of `stream`, no further than
/// [`MAX_HEADER_BYTES`]. Not bounded in time: the caller applies
/// [`HEADER_TIMEOUT`].
pub async fn read_header(stream: &mut TcpStream) -> Result<Proxied, ProxyError> {
    let mut buf = vec![0u8; MAX_HEADER_BYTES];
    let mut len = 0;
    loop {
        let n = stream
            .read(&mut buf[len..])
            .await
            .map_err(|_| ProxyError::Closed)?;
        if n == 0 {
            return Err(ProxyError::Closed);
        }
        len += n;
        if let Some(parsed) = parse(&buf[..len])? {
            return Ok(parsed);
        }
        if len == MAX_HEADER_BYTES {
            return Err(ProxyError::TooLong);
        }
    }
}

/// `Ok(None)`: incomplete so far.
pub fn parse(buf: &[u8]) -> Result<Option<Proxied>, ProxyError> {
    let config = ParseConfig {
        include_tlvs: false,
        ..ParseConfig::default()
    };
    match ProxyHeader::parse(buf, config) {
        Ok((header, used)) => {
            let client = match header.proxied_address() {
                None => None,
                Some(a) if a.protocol == Protocol::Stream => Some(a.source),
                Some(_) => return Err(ProxyError::NotStream),
            };
            Ok(Some(Proxied {
                client,
                rest: buf[used..].to_vec(),
            }))
        }
        Err(proxy_header::Error::BufferTooShort) => Ok(None),
        Err(e) => Err(ProxyError::Invalid(e.to_string())),
    }
}

/// Whether a login-dialogue line is a PROXY v1 header: sent by someone the
/// gate does not take headers from, it is refused, never read as an
/// address.
pub fn is_v1_header_line(line: &str) -> bool {
    line.starts_with("PROXY TCP4 ")
        || line.starts_with("PROXY TCP6 ")
        || line == "PROXY UNKNOWN"
        || line.starts_with("PROXY UNKNOWN ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// v2 signature, then version/command, family/protocol, length.
    const V2_SIG: &[u8] = b"\r\n\r\n\0\r\nQUIT\n";

    fn v2_tcp4(src: [u8; 4], sport: u16) -> Vec<u8> {
        let mut h = V2_SIG.to_vec();
        h.extend([0x21, 0x11, 0, 12]);
        h.extend(src);
        h.extend([10, 0, 0, 1]);
        h.extend(sport.to_be_bytes());
        h.extend(4000u16.to_be_bytes());
        h
    }

    #[test]
    fn v1_and_v2_headers_name_the_player_and_keep_what_follows() {
        let p = parse(b"PROXY TCP4 203.0.113.9 10.0.0.1 51000 4000\r\nlook\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(p.client, Some("203.0.113.9:51000".parse().unwrap()));
        assert_eq!(p.rest, b"look\r\n");
        let p = parse(b"PROXY TCP6 2001:db8::7 2001:db8::1 51000 4000\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(p.client, Some("[2001:db8::7]:51000".parse().unwrap()));
        let mut v2 = v2_tcp4([198, 51, 100, 4], 40000);
        v2.extend(b"hi");
        let p = parse(&v2).unwrap().unwrap();
        assert_eq!(p.client, Some("198.51.100.4:40000".parse().unwrap()));
        assert_eq!(p.rest, b"hi");
        // LOCAL (a health check): the balancer itself.
        let mut local = V2_SIG.to_vec();
        local.extend([0x20, 0x00, 0, 0]);
        assert_eq!(parse(&local).unwrap().unwrap().client, None);
        assert_eq!(parse(b"PROXY UNKNOWN\r\n").unwrap().unwrap().client, None);
    }

    #[test]
    fn partial_headers_wait_and_bad_ones_are_refused() {
        let v2 = v2_tcp4([198, 51, 100, 4], 40000);
        for cut in 0..v2.len() {
            assert_eq!(parse(&v2[..cut]).unwrap(), None, "{cut}");
        }
        assert_eq!(parse(b"PROXY TCP4 203.0.113.9").unwrap(), None);
        for bad in [
            &b"connect alice secret\r\n"[..],
            b"PROXY TCP4 not-an-address 10.0.0.1 1 2\r\n",
            b"GET / HTTP/1.1\r\n",
        ] {
            assert!(matches!(parse(bad), Err(ProxyError::Invalid(_))), "{bad:?}");
        }
        // A v1 line that never ends is refused at its bound, not read on.
        let endless = [b"PROXY TCP4 ".as_slice(), &[b'1'; 200]].concat();
        assert!(matches!(parse(&endless), Err(ProxyError::Invalid(_))));
        // UDP is no player's connection.
        let mut udp = V2_SIG.to_vec();
        udp.extend([0x21, 0x12, 0, 12, 1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 0, 2]);
        assert!(matches!(parse(&udp), Err(ProxyError::NotStream)));
    }

    #[test]
    fn a_v1_header_line_is_recognised_in_the_login_dialogue() {
        assert!(is_v1_header_line("PROXY TCP4 1.2.3.4 5.6.7.8 1 2"));
        assert!(is_v1_header_line("PROXY UNKNOWN"));
        assert!(!is_v1_header_line("connect proxy secret"));
    }
}
