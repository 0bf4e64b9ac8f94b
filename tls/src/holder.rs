//! Who holds a certificate: its common name, which `telosctl` sets to the
//! holder's name (`--name`; for a shard, its shard id). The role says what
//! a caller may ask for; the holder says on whose behalf: a shard
//! certificate speaks for its own shard id only, so a request that claims
//! another shard as its source is refused whatever its role.

use rustls::pki_types::CertificateDer;
use tonic::{Request, Status};
use x509_parser::prelude::{FromDer, X509Certificate};

/// The common name of `cert`, if it has exactly one that is text.
pub fn holder(cert: &CertificateDer<'_>) -> Option<String> {
    let (_, parsed) = X509Certificate::from_der(cert.as_ref()).ok()?;
    let mut names = parsed.subject().iter_common_name();
    let first = names.next()?.as_str().ok()?.to_string();
    names.next().is_none().then_some(first)
}

/// The holder of the caller's verified client certificate, if any.
pub fn caller<T>(req: &Request<T>) -> Option<String> {
    req.peer_certs()
        .and_then(|certs| certs.first().and_then(holder))
}

/// `Ok` when the caller's certificate was issued to `claimed`; otherwise
/// `PermissionDenied` naming both, for a request (`what`) that speaks for
/// `claimed`. Only for servers that demand client certificates: a
/// connection without one is refused here too.
pub fn require<T>(req: &Request<T>, claimed: &str, what: &str) -> Result<(), Status> {
    match caller(req) {
        Some(name) if name == claimed => Ok(()),
        found => Err(Status::permission_denied(format!(
            "{what} speaks for shard {claimed:?}, but the caller's certificate was issued to {}",
            found.map_or("no one".to_string(), |n| format!("{n:?}"))
        ))),
    }
}
