//! Certificates for a TLS-only test `redis-server`, made in-process with
//! rcgen: a throwaway CA and a server certificate for 127.0.0.1/localhost
//! signed by it, written as PEM files into the server's folder.

use std::path::{Path, PathBuf};

use anyhow::Context;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};

/// The PEM files of one server (all in its folder).
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The CA clients verify the server with (`--redis-ca`).
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Names the server answers to: the tests dial 127.0.0.1.
const SERVER_NAMES: [&str; 2] = ["127.0.0.1", "localhost"];

/// Writes a fresh CA (`ca.crt`) and a server certificate signed by it
/// (`redis.crt`, `redis.key`) into `dir`.
pub fn write_certificates(dir: &Path) -> anyhow::Result<TlsFiles> {
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "telos test redis CA");
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(SERVER_NAMES.map(String::from).to_vec())?;
    params
        .distinguished_name
        .push(DnType::CommonName, "telos test redis");
    let cert = params.signed_by(&key, &issuer)?;

    let files = TlsFiles {
        ca: dir.join("ca.crt"),
        cert: dir.join("redis.crt"),
        key: dir.join("redis.key"),
    };
    for (path, pem) in [
        (&files.ca, ca_cert.pem()),
        (&files.cert, cert.pem()),
        (&files.key, key.serialize_pem()),
    ] {
        std::fs::write(path, pem).with_context(|| format!("write {}", path.display()))?;
    }
    Ok(files)
}
