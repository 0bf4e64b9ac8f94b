//! Counting a new connection in every limit before it gets any state:
//! its address's and its network's connection caps, a pre-login place
//! (none while every player's seat is taken). Whatever the transport: the
//! telnet listener ([`crate::server`]) and the web listener
//! ([`crate::web`]) admit alike.

use std::net::SocketAddr;

use crate::admission::{PreLoginFull, PreLoginPlace};
use crate::ratelimit::{AddressPlaces, ip_bucket, prefix_bucket};
use crate::shared::Shared;

const GATE_FULL: &[u8] = b"The gate is full; please try again later.\r\n";
const PRE_LOGIN_FULL: &[u8] =
    b"The gate is busy with connections that have not logged in; please try again in a moment.\r\n";
/// What a connection over `--max-connections-per-ip` is told.
fn per_ip_refusal(cap: usize) -> String {
    format!(
        "Too many connections from your address (at most {cap} at once); close one and try again.\r\n"
    )
}

/// What a connection over its network's cap is told.
fn per_prefix_refusal(cap: usize) -> String {
    format!(
        "Too many connections from your network (at most {cap} at once); please try again later.\r\n"
    )
}

/// What an admitted connection holds until it ends: its places in the
/// per-address and per-network counts, and (until it logs in) a
/// pre-login place.
pub struct Admitted {
    pub pre_login: PreLoginPlace,
    pub places: AddressPlaces,
}

/// A connection the limits refused: the metric's reason and the line the
/// client is told; `linger` for the "full" kinds, told through a bounded
/// lingering close rather than one non-blocking write.
pub struct Refused {
    pub reason: &'static str,
    pub line: String,
    pub linger: bool,
}

/// Count a connection from `client` (the player's address: the peer's, or
/// a PROXY header's) in every limit, or say why not. Whatever the
/// transport: the telnet listener's sockets and the web listener's
/// WebSockets ([`crate::web`]) are counted alike.
pub fn admit_client(shared: &Shared, client: SocketAddr) -> Result<Admitted, Refused> {
    let cfg = &shared.cfg;
    // Counted before the connection has any state: a flood of sockets
    // from one address costs one line and a close each.
    let Some(ip) = shared.per_ip.try_open(ip_bucket(client.ip())) else {
        tracing::debug!(%client, "connection over the per-address cap refused");
        let line = per_ip_refusal(cfg.max_connections_per_ip);
        return Err(Refused {
            reason: "ip_cap",
            line,
            linger: false,
        });
    };
    let prefix = prefix_bucket(client.ip());
    let Some(net) = shared.per_prefix.try_open(prefix) else {
        tracing::debug!(%client, %prefix, "connection over the per-network cap refused");
        let line = per_prefix_refusal(shared.per_prefix.cap(prefix));
        return Err(Refused {
            reason: "prefix_cap",
            line,
            linger: false,
        });
    };
    // Strangers never take a player's seat, but a gate whose seats are
    // all taken has no login to offer.
    let (reason, line) = if shared.seats.full() {
        ("full", GATE_FULL)
    } else {
        match shared.pre_login.admit(prefix) {
            Ok(place) => {
                return Ok(Admitted {
                    pre_login: place,
                    places: AddressPlaces::new(ip, net),
                });
            }
            Err(PreLoginFull) => ("pre_login_full", PRE_LOGIN_FULL),
        }
    };
    let line = String::from_utf8_lossy(line).into_owned();
    Err(Refused {
        reason,
        line,
        linger: true,
    })
}
