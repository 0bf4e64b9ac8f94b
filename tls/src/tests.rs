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
