//! A process's certificate, as tonic configurations, and the role each
//! gRPC service requires of its callers.
//!
//! Every Telos server is a shard, so every client dials expecting a shard
//! certificate ([`Role::dns_name`] is the name checked); a server learns the
//! caller's role from the client certificate the handshake verified.

use std::path::Path;
use std::time::Duration;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity, ServerTlsConfig};
use tonic::{Request, Status};

use crate::files::{self, CA_CRT, FileError};
use crate::role::Role;

/// A TLS handshake that has not finished by then is dropped: a peer that
/// opens a socket and stalls must not hold the server's handshake slot.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error(transparent)]
    File(#[from] FileError),
    #[error("{path}: {what}")]
    Malformed { path: String, what: String },
    #[error("{path}: a {found} certificate where a {wanted} certificate belongs")]
    WrongRole {
        path: String,
        found: String,
        wanted: Role,
    },
    #[error(
        "{dir}: no certificate for shard {shard:?}{}; issue one with `telosctl cert CA-DIR --role shard --name {shard}` (it writes CA-DIR/{shard}/) and use that folder, or put it at {dir}/{shard}/shard.crt",
        found.as_ref().map_or(String::new(), |(path, holder)| format!(" ({path} is issued to {holder:?})"))
    )]
    NoShardCertificate {
        dir: String,
        shard: String,
        /// A shard certificate that is there, and whom it was issued to.
        found: Option<(String, String)>,
    },
    #[error("bad address {addr:?}: {source}")]
    Address {
        addr: String,
        source: tonic::transport::Error,
    },
}

/// The certificate a process presents and the CAs it trusts, read from a
/// key folder (`--keys DIR`).
#[derive(Clone)]
pub struct TlsKeys {
    role: Role,
    /// The certificate's holder (its common name; a shard's id).
    holder: String,
    trusted: Certificate,
    identity: Identity,
}

impl std::fmt::Debug for TlsKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsKeys")
            .field("role", &self.role)
            .field("holder", &self.holder)
            .finish()
    }
}

impl TlsKeys {
    /// Load `ca.crt` and `<role>.crt`/`<role>.key` from `dir`. The key must
    /// be readable by its owner only, and the certificate must be the role's
    /// (a folder holding a gate certificate as `shard.crt` is refused here,
    /// not at the first peer's handshake).
    pub fn load(dir: &Path, role: Role) -> Result<Self, TlsError> {
        let cert_path = files::cert_file(dir, role);
        let cert = files::read(&cert_path)?;
        let key = files::read_secret(&files::key_file(dir, role))?;
        Self::from_pem(dir, role, &cert_path, cert, key)
    }

    /// The keys of a certificate already read (`cert_path` names it in
    /// errors), trusting `dir`'s `ca.crt`.
    pub(crate) fn from_pem(
        dir: &Path,
        role: Role,
        cert_path: &Path,
        cert: String,
        key: String,
    ) -> Result<Self, TlsError> {
        let ca_path = dir.join(CA_CRT);
        let trusted = files::read(&ca_path)?;
        certificates(&ca_path, &trusted)?;
        let leaf = certificates(cert_path, &cert)?.remove(0);
        let found = Role::of(&leaf);
        if found != Some(role) {
            return Err(TlsError::WrongRole {
                path: cert_path.display().to_string(),
                found: found.map_or("role-less".to_string(), |r| r.to_string()),
                wanted: role,
            });
        }
        let holder = crate::holder::holder(&leaf).ok_or_else(|| TlsError::Malformed {
            path: cert_path.display().to_string(),
            what: "no single common name (the holder's name)".to_string(),
        })?;
        Ok(Self {
            role,
            holder,
            trusted: Certificate::from_pem(trusted),
            identity: Identity::from_pem(cert, key),
        })
    }

    pub fn role(&self) -> Role {
        self.role
    }

    /// Who the certificate was issued to (`telosctl cert --name`; a
    /// shard's id).
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// A server that demands a client certificate from the cluster CA.
    pub fn server(&self) -> ServerTlsConfig {
        ServerTlsConfig::new()
            .identity(self.identity.clone())
            .client_ca_root(self.trusted.clone())
            .client_auth_optional(false)
            .timeout(HANDSHAKE_TIMEOUT)
    }

    /// A client that presents this certificate and accepts only a shard's.
    pub fn client(&self) -> ClientTlsConfig {
        ClientTlsConfig::new()
            .ca_certificate(self.trusted.clone())
            .identity(self.identity.clone())
            .domain_name(Role::Shard.dns_name())
            .timeout(HANDSHAKE_TIMEOUT)
    }
}

/// The endpoint for a shard at `addr` (`host:port`): TLS with `keys`,
/// plaintext without (the keyless single-shard dev mode).
pub fn endpoint(addr: &str, keys: Option<&TlsKeys>) -> Result<Endpoint, TlsError> {
    let bad = |source| TlsError::Address {
        addr: addr.to_string(),
        source,
    };
    let host = addr.split_once("://").map_or(addr, |(_, rest)| rest);
    match keys {
        Some(keys) => Endpoint::from_shared(format!("https://{host}"))
            .and_then(|e| e.tls_config(keys.client()))
            .map_err(bad),
        None => Endpoint::from_shared(format!("http://{host}")).map_err(bad),
    }
}

fn certificates(path: &Path, pem: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let malformed = |what: String| TlsError::Malformed {
        path: path.display().to_string(),
        what,
    };
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| malformed(e.to_string()))?;
    if certs.is_empty() {
        return Err(malformed("no PEM certificate in it".to_string()));
    }
    Ok(certs)
}

/// The interceptor in front of a service: only callers whose verified
/// client certificate names one of `allowed` get through.
#[derive(Clone, Copy)]
pub struct RoleCheck {
    service: &'static str,
    allowed: &'static [Role],
}

impl RoleCheck {
    pub const fn new(service: &'static str, allowed: &'static [Role]) -> Self {
        Self { service, allowed }
    }

    /// The caller's role, if its certificate names one this service serves.
    pub fn check<T>(&self, req: &Request<T>) -> Result<Role, Status> {
        let role = req
            .peer_certs()
            .and_then(|certs| certs.first().and_then(Role::of));
        match role {
            Some(role) if self.allowed.contains(&role) => Ok(role),
            found => Err(Status::permission_denied(format!(
                "{} is served only to {} certificates; the caller presented {}",
                self.service,
                self.allowed
                    .iter()
                    .map(|r| r.as_str())
                    .collect::<Vec<_>>()
                    .join(" or "),
                found.map_or("no role certificate".to_string(), |r| format!(
                    "a {r} certificate"
                )),
            ))),
        }
    }
}

impl tonic::service::Interceptor for RoleCheck {
    fn call(&mut self, req: Request<()>) -> Result<Request<()>, Status> {
        self.check(&req)?;
        Ok(req)
    }
}
