use std::os::unix::fs::PermissionsExt;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::files::{self, CA_CRT, CA_KEY};
use crate::issue::{self, IssueError, Leaf};
use crate::{Role, TlsError, TlsKeys};

fn leaf_role(dir: &std::path::Path, role: Role) -> Option<Role> {
    let pem = std::fs::read(files::cert_file(dir, role)).unwrap();
    let der = CertificateDer::from_pem_slice(&pem).unwrap();
    Role::of(&der)
}

#[test]
fn keygen_writes_a_ca_and_one_owner_only_certificate_per_role() {
    let dir = tempfile::tempdir().unwrap();
    issue::generate(dir.path()).unwrap();
    for role in Role::ALL {
        assert_eq!(leaf_role(dir.path(), role), Some(role));
        TlsKeys::load(dir.path(), role).unwrap();
        for file in [
            files::cert_file(dir.path(), role),
            files::key_file(dir.path(), role),
        ] {
            let mode = std::fs::metadata(&file).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "{} is {mode:o}", file.display());
        }
    }
    for file in [CA_CRT, CA_KEY] {
        let mode = std::fs::metadata(dir.path().join(file))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "{file} is {mode:o}");
    }
    // Never overwritten.
    assert!(matches!(
        issue::generate(dir.path()),
        Err(IssueError::File(files::FileError::Exists { .. }))
    ));
}

#[test]
fn cert_issues_a_usable_key_folder_from_the_ca() {
    let dir = tempfile::tempdir().unwrap();
    issue::generate(dir.path()).unwrap();
    let out = dir.path().join("shard-b");
    let leaf = Leaf {
        role: Role::Shard,
        name: "shard-b",
        days: 30,
    };
    let written = issue::issue(dir.path(), &leaf, &out).unwrap();
    assert_eq!(written.len(), 3, "{written:?}");
    assert_eq!(leaf_role(&out, Role::Shard), Some(Role::Shard));
    assert_eq!(
        TlsKeys::load(&out, Role::Shard).unwrap().role(),
        Role::Shard
    );
    assert!(!out.join(CA_KEY).exists(), "the CA key stays where it was");
    let bad = Leaf {
        name: "Shard B",
        ..leaf
    };
    assert!(matches!(
        issue::issue(dir.path(), &bad, &dir.path().join("x")),
        Err(IssueError::BadName(_))
    ));
}

#[test]
fn during_a_roll_the_issuer_is_the_ca_that_owns_the_key() {
    let old = tempfile::tempdir().unwrap();
    let new = tempfile::tempdir().unwrap();
    issue::generate(old.path()).unwrap();
    issue::generate(new.path()).unwrap();
    // The new CA's folder trusts both CAs, old first.
    let both = format!(
        "{}{}",
        std::fs::read_to_string(old.path().join(CA_CRT)).unwrap(),
        std::fs::read_to_string(new.path().join(CA_CRT)).unwrap()
    );
    std::fs::write(new.path().join(CA_CRT), both).unwrap();
    let out = new.path().join("gate-2");
    let leaf = Leaf {
        role: Role::Gate,
        name: "gate-2",
        days: 1,
    };
    issue::issue(new.path(), &leaf, &out).unwrap();
    let issued = std::fs::read(files::cert_file(&out, Role::Gate)).unwrap();
    let der = CertificateDer::from_pem_slice(&issued).unwrap();
    assert_eq!(Role::of(&der), Some(Role::Gate));
    // The leaf's issuer is the CA whose key signed it: the new one.
    assert!(contains(&der, &ca_name(new.path())), "issued by the new CA");
    assert!(!contains(&der, &ca_name(old.path())), "not by the old CA");
}

/// The distinct common name `issue` gives each CA.
fn ca_name(dir: &std::path::Path) -> Vec<u8> {
    let pem = std::fs::read_to_string(dir.join(CA_CRT)).unwrap();
    // The folder's own CA is the last one in it (the roll above appends).
    let der = CertificateDer::pem_slice_iter(pem.as_bytes())
        .last()
        .unwrap()
        .unwrap();
    let prefix = b"Telos cluster CA ";
    let at = der.windows(prefix.len()).position(|w| w == prefix).unwrap();
    der[at..at + prefix.len() + 8].to_vec()
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn a_folder_holding_the_wrong_roles_certificate_is_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    issue::generate(dir.path()).unwrap();
    // Put the gate's certificate and key where the shard's belong.
    for (from, to) in [
        (
            files::cert_file(dir.path(), Role::Gate),
            files::cert_file(dir.path(), Role::Shard),
        ),
        (
            files::key_file(dir.path(), Role::Gate),
            files::key_file(dir.path(), Role::Shard),
        ),
    ] {
        std::fs::rename(from, to).unwrap();
    }
    let err = TlsKeys::load(dir.path(), Role::Shard).unwrap_err();
    assert!(
        matches!(
            err,
            TlsError::WrongRole {
                wanted: Role::Shard,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("a gate certificate"), "{err}");
}

#[test]
fn a_private_key_others_can_read_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    issue::generate(dir.path()).unwrap();
    let key = files::key_file(dir.path(), Role::Gate);
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = TlsKeys::load(dir.path(), Role::Gate).unwrap_err();
    assert!(err.to_string().contains("chmod 600"), "{err}");
}

#[test]
fn the_ca_is_a_ca_that_signs_only_leaves_and_leaves_are_not_cas() {
    use x509_parser::prelude::{FromDer, X509Certificate};
    let dir = tempfile::tempdir().unwrap();
    issue::generate(dir.path()).unwrap();
    let basic = |path: std::path::PathBuf| {
        let pem = std::fs::read(path).unwrap();
        let der = CertificateDer::from_pem_slice(&pem).unwrap();
        let (_, cert) = X509Certificate::from_der(der.as_ref()).unwrap();
        cert.basic_constraints()
            .unwrap()
            .map(|ext| (ext.critical, ext.value.ca, ext.value.path_len_constraint))
    };
    assert_eq!(
        basic(dir.path().join(CA_CRT)),
        Some((true, true, Some(0))),
        "critical basicConstraints CA:true, pathlen:0"
    );
    for role in Role::ALL {
        let leaf = basic(files::cert_file(dir.path(), role));
        assert!(leaf.is_none_or(|(_, ca, _)| !ca), "{role}: a leaf is no CA");
    }
}

#[test]
fn a_shard_loads_the_certificate_issued_to_its_id() {
    use crate::shard::{Source, load_shard};
    let dir = tempfile::tempdir().unwrap();
    issue::generate(dir.path()).unwrap();
    // keygen's folder (it holds ca.key): a certificate issued in memory,
    // to this shard's id, and nothing written.
    let (keys, source) = load_shard(dir.path(), "shard-a").unwrap();
    assert_eq!((keys.holder(), source), ("shard-a", Source::IssuedFromCa));
    assert!(!dir.path().join("shard-a").exists());
    // `telosctl cert DIR --role shard --name shard-b` writes DIR/shard-b/.
    let leaf = Leaf {
        role: Role::Shard,
        name: "shard-b",
        days: 1,
    };
    issue::issue(dir.path(), &leaf, &dir.path().join("shard-b")).unwrap();
    let (keys, source) = load_shard(dir.path(), "shard-b").unwrap();
    let sub = files::cert_file(&dir.path().join("shard-b"), Role::Shard);
    assert_eq!((keys.holder(), source), ("shard-b", Source::File(sub)));
    // That folder on its own is shard-b's key folder, and only shard-b's.
    let own = dir.path().join("shard-b");
    let (keys, _) = load_shard(&own, "shard-b").unwrap();
    assert_eq!(keys.holder(), "shard-b");
    let err = load_shard(&own, "shard-c").unwrap_err();
    assert!(matches!(err, TlsError::NoShardCertificate { .. }), "{err}");
    assert!(err.to_string().contains("issued to \"shard-b\""), "{err}");
    // Without ca.key, keygen's role certificate (issued to "shard") speaks
    // for no other shard: refused at start, saying how to issue one.
    std::fs::remove_file(dir.path().join(CA_KEY)).unwrap();
    let err = load_shard(dir.path(), "shard-a").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("issued to \"shard\""), "{text}");
    assert!(text.contains("telosctl cert"), "{text}");
    assert_eq!(
        TlsKeys::load(dir.path(), Role::Shard).unwrap().holder(),
        "shard"
    );
}
