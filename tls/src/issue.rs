//! The cluster CA and the role certificates (`telosctl keygen`, `telosctl
//! cert`).
//!
//! Every certificate names its role as a DNS subject-alternative name (see
//! [`Role::dns_name`]) and its holder (`--name`) as its common name. Shards
//! may be dialed and may dial, so theirs serve both server and client
//! authentication; a gate's and an operator's only client authentication,
//! so neither can stand in for a shard even with the name check aside.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PublicKeyData,
};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::files::{self, CA_CRT, CA_KEY, FileError};
use crate::role::Role;

/// How long the cluster CA is valid: longer than any leaf it signs, so a
/// roll of leaves never waits on a roll of the CA.
const CA_VALID_DAYS: i64 = 3650;
/// How long a role certificate is valid unless `--days` says otherwise:
/// a year, so that a forgotten certificate ages out (see the rotation
/// steps in docs/operations.md).
pub const DEFAULT_LEAF_DAYS: u32 = 365;

#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    #[error(transparent)]
    File(#[from] FileError),
    #[error("{path}: {what}")]
    Malformed { path: String, what: String },
    #[error("{path}: no certificate in it matches {key}")]
    NoMatchingCa { path: String, key: String },
    #[error("certificate name {0:?}: use 1 to 64 of a-z, 0-9, '.', '-'")]
    BadName(String),
    #[error("generating a certificate: {0}")]
    Generate(#[from] rcgen::Error),
}

/// A role certificate: who holds it, for what, for how long.
pub struct Leaf<'a> {
    pub role: Role,
    pub name: &'a str,
    pub days: u32,
}

/// Write a new cluster CA (`ca.crt`, `ca.key`) and one certificate per role,
/// each named after its role (`shard.crt`/`shard.key`, …) into `dir`.
/// Refuses to overwrite anything.
pub fn generate(dir: &Path) -> Result<(), IssueError> {
    std::fs::create_dir_all(dir).map_err(|source| FileError::Io {
        path: dir.display().to_string(),
        source,
    })?;
    let key = KeyPair::generate()?;
    let params = ca_params()?;
    let ca = params.self_signed(&key)?;
    files::write_new(&dir.join(CA_KEY), &key.serialize_pem())?;
    files::write_new(&dir.join(CA_CRT), &ca.pem())?;
    let issuer = Issuer::new(params, key);
    for role in Role::ALL {
        let leaf = Leaf {
            role,
            name: role.as_str(),
            days: DEFAULT_LEAF_DAYS,
        };
        write_leaf(&issuer, &leaf, dir)?;
    }
    Ok(())
}

/// Issue one more certificate from the CA in `ca_dir` into `out`
/// (`<role>.crt`, `<role>.key`, and the trusted `ca.crt`, so that `out` is
/// a key folder the process can use with `--keys`). Returns the files
/// written.
pub fn issue(ca_dir: &Path, leaf: &Leaf<'_>, out: &Path) -> Result<Vec<PathBuf>, IssueError> {
    valid_name(leaf.name)?;
    let issuer = load_issuer(ca_dir)?;
    std::fs::create_dir_all(out).map_err(|source| FileError::Io {
        path: out.display().to_string(),
        source,
    })?;
    let mut written = write_leaf(&issuer, leaf, out)?;
    let trusted = out.join(CA_CRT);
    if !trusted.exists() {
        files::write_new(&trusted, &files::read(&ca_dir.join(CA_CRT))?)?;
        written.push(trusted);
    }
    Ok(written)
}

fn valid_name(name: &str) -> Result<(), IssueError> {
    let ok = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(IssueError::BadName(name.to_string()))
    }
}

fn ca_params() -> Result<CertificateParams, IssueError> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    // A distinct name per CA, so that during a roll the two CAs (and the
    // leaves each signed) can be told apart.
    let id: [u8; 4] = rand::random();
    params.distinguished_name.push(
        DnType::CommonName,
        format!("Telos cluster CA {}", hex::encode(id)),
    );
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let now = time_now();
    params.not_before = now;
    params.not_after = now + rcgen_days(CA_VALID_DAYS);
    Ok(params)
}

fn leaf_params(leaf: &Leaf<'_>) -> Result<CertificateParams, IssueError> {
    let mut params = CertificateParams::new(vec![leaf.role.dns_name().to_string()])?;
    params
        .distinguished_name
        .push(DnType::CommonName, leaf.name.to_string());
    params
        .distinguished_name
        .push(DnType::OrganizationalUnitName, leaf.role.as_str());
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = match leaf.role {
        Role::Shard => vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ],
        Role::Gate | Role::Operator => vec![ExtendedKeyUsagePurpose::ClientAuth],
    };
    let now = time_now();
    params.not_before = now;
    params.not_after = now + rcgen_days(i64::from(leaf.days));
    Ok(params)
}

/// A new key and its certificate for `leaf`, signed by `issuer`, as PEM
/// (certificate, key).
fn make_leaf(
    issuer: &Issuer<'_, KeyPair>,
    leaf: &Leaf<'_>,
) -> Result<(String, String), IssueError> {
    let key = KeyPair::generate()?;
    let cert = leaf_params(leaf)?.signed_by(&key, issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

fn write_leaf(
    issuer: &Issuer<'_, KeyPair>,
    leaf: &Leaf<'_>,
    dir: &Path,
) -> Result<Vec<PathBuf>, IssueError> {
    let (cert, key) = make_leaf(issuer, leaf)?;
    let key_path = files::key_file(dir, leaf.role);
    let cert_path = files::cert_file(dir, leaf.role);
    files::write_new(&key_path, &key)?;
    files::write_new(&cert_path, &cert)?;
    Ok(vec![cert_path, key_path])
}

/// Issue `leaf` from the CA in `ca_dir` without writing anything: the
/// certificate and key as PEM (certificate, key). For a process whose key
/// folder holds the CA key and no certificate of its own (see
/// [`crate::shard`]).
pub fn issue_in_memory(ca_dir: &Path, leaf: &Leaf<'_>) -> Result<(String, String), IssueError> {
    valid_name(leaf.name)?;
    make_leaf(&load_issuer(ca_dir)?, leaf)
}

/// The CA that `ca.key` belongs to. During a roll `ca.crt` holds the old
/// and the new CA; the issuer is whichever certificate carries this key.
fn load_issuer(ca_dir: &Path) -> Result<Issuer<'static, KeyPair>, IssueError> {
    let key_path = ca_dir.join(CA_KEY);
    let crt_path = ca_dir.join(CA_CRT);
    let key =
        KeyPair::from_pem(&files::read_secret(&key_path)?).map_err(|e| IssueError::Malformed {
            path: key_path.display().to_string(),
            what: e.to_string(),
        })?;
    let spki = key.subject_public_key_info();
    let pem = files::read(&crt_path)?;
    let malformed = |what: String| IssueError::Malformed {
        path: crt_path.display().to_string(),
        what,
    };
    for der in CertificateDer::pem_slice_iter(pem.as_bytes()) {
        let der = der.map_err(|e| malformed(e.to_string()))?;
        // The SubjectPublicKeyInfo appears verbatim in the certificate.
        if der.windows(spki.len()).any(|w| w == spki.as_slice()) {
            return Issuer::from_ca_cert_der(&der, key).map_err(|e| malformed(e.to_string()));
        }
    }
    Err(IssueError::NoMatchingCa {
        path: crt_path.display().to_string(),
        key: key_path.display().to_string(),
    })
}

fn time_now() -> time::OffsetDateTime {
    time::OffsetDateTime::now_utc()
}

fn rcgen_days(days: i64) -> time::Duration {
    time::Duration::days(days)
}
