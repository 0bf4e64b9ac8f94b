//! The role a certificate was issued for.
//!
//! The role lives in the certificate as a DNS subject-alternative name,
//! `<role>.telos` (see [`Role::dns_name`]), which only `telosctl` writes and
//! only the cluster CA signs. A DNS name (rather than a private extension)
//! lets a client check a server's role with the ordinary TLS name check: a
//! gate dials every shard expecting `shard.telos`, so a listener holding a
//! gate or operator certificate, or none from this CA, fails the handshake
//! before the gate sends a byte of a login.

use std::fmt;
use std::str::FromStr;

use rustls::pki_types::{CertificateDer, ServerName};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// A `telos-world` shard: serves every port, dials its peers.
    Shard,
    /// A `telos-gate`: dials shards' `Play`.
    Gate,
    /// An operator's `telosctl`: dials shards' `Admin`.
    Operator,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Shard, Role::Gate, Role::Operator];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Shard => "shard",
            Role::Gate => "gate",
            Role::Operator => "operator",
        }
    }

    /// The subject-alternative name that carries the role.
    pub fn dns_name(self) -> &'static str {
        match self {
            Role::Shard => "shard.telos",
            Role::Gate => "gate.telos",
            Role::Operator => "operator.telos",
        }
    }

    /// The role `cert` was issued for, read from its names. The chain was
    /// verified by the TLS handshake; this only reads which role it names.
    /// A certificate naming several roles (never issued by `telosctl`) has
    /// none: a role must be unambiguous.
    pub fn of(cert: &CertificateDer<'_>) -> Option<Role> {
        let cert = webpki::EndEntityCert::try_from(cert).ok()?;
        let mut named = Role::ALL.into_iter().filter(|role| {
            let name = ServerName::try_from(role.dns_name()).expect("a role's name is a DNS name");
            cert.verify_is_valid_for_subject_name(&name).is_ok()
        });
        match (named.next(), named.next()) {
            (Some(role), None) => Some(role),
            _ => None,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown role {0:?}: use shard, gate or operator")]
pub struct UnknownRole(String);

impl FromStr for Role {
    type Err = UnknownRole;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| UnknownRole(s.to_string()))
    }
}
