//! TLS for players (`--tls-listen` with `--tls-cert` / `--tls-key`): the
//! certificate the gate shows players, reloaded from its files on SIGHUP.
//!
//! Not the cluster's mutual TLS (`--keys`, [`telos_tls`]): a player's
//! client checks the gate's name against public roots (a certificate from
//! Let's Encrypt or any CA), and shows none of its own. The same
//! [`PlayerTls`] serves every listener that terminates TLS for players:
//! telnet over TLS here, and any other (a `wss://` listener takes
//! [`PlayerTls::server_config`] per connection), so one SIGHUP renews them
//! all.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

/// Bound on a TLS handshake. Counted from the accept, inside the
/// connection's pre-login place: a client that opens a socket and never
/// finishes the handshake holds it this long, not until the login timeout.
/// A handshake takes a few round trips; 10 s covers a poor mobile link.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the certificate and its key are read from, and reread on SIGHUP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// PEM: the certificate, then its chain up to (not including) the root.
    pub cert: PathBuf,
    /// PEM: the private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum PlayerTlsError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {what}")]
    Malformed { path: String, what: String },
    /// The key is held to the rule every other key of the cluster is.
    #[error(transparent)]
    KeyTooOpen(telos_tls::files::FileError),
    #[error("{cert} and {key} do not make a TLS identity: {why}")]
    Identity {
        cert: String,
        key: String,
        why: String,
    },
}

/// The players' TLS identity, swapped whole on a reload.
pub struct PlayerTls {
    files: TlsFiles,
    current: RwLock<Arc<ServerConfig>>,
}

impl std::fmt::Debug for PlayerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlayerTls")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl PlayerTls {
    /// Read the certificate and key; an error names the file and what is
    /// wrong with it.
    pub fn load(files: TlsFiles) -> Result<Self, PlayerTlsError> {
        let config = server_config(&files)?;
        Ok(Self {
            files,
            current: RwLock::new(config),
        })
    }

    pub fn files(&self) -> &TlsFiles {
        &self.files
    }

    /// Reread the files (SIGHUP). Connections made from now on show the
    /// new certificate; open ones keep the session they have. On an error
    /// the certificate in use stays, so a half-copied renewal never takes
    /// the listener down.
    pub fn reload(&self) -> Result<(), PlayerTlsError> {
        let config = server_config(&self.files)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = config;
        Ok(())
    }

    /// The configuration in use now, for one handshake.
    pub fn server_config(&self) -> Arc<ServerConfig> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.server_config())
    }
}

/// Reload `tls` on every SIGHUP until `shutdown`: the way to take a
/// renewed certificate (certbot's deploy hook, say) without dropping a
/// player. A reload that fails is logged and changes nothing. The handler
/// is in place when this returns (a SIGHUP before it would end the
/// process), so call it before saying the gate is ready.
pub fn reload_on_sighup(
    tls: Arc<PlayerTls>,
    shutdown: tokio_util::sync::CancellationToken,
) -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hup = signal(SignalKind::hangup())?;
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = hup.recv() => {}
            }
            match tls.reload() {
                Ok(()) => {
                    tracing::info!(cert = %tls.files.cert.display(), "players' TLS certificate reloaded")
                }
                Err(e) => {
                    tracing::error!(error = %e, "players' TLS certificate not reloaded; the one in use stays")
                }
            }
        }
    });
    Ok(())
}

fn read(path: &Path) -> Result<Vec<u8>, PlayerTlsError> {
    std::fs::read(path).map_err(|source| PlayerTlsError::Read {
        path: path.display().to_string(),
        source,
    })
}

/// The private key, refused when group or others can read it (as the
/// cluster's own keys are: `chmod 600`).
fn read_key(path: &Path) -> Result<Vec<u8>, PlayerTlsError> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)
        .map_err(|source| PlayerTlsError::Read {
            path: path.display().to_string(),
            source,
        })?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        return Err(PlayerTlsError::KeyTooOpen(
            telos_tls::files::FileError::TooOpen {
                path: path.display().to_string(),
            },
        ));
    }
    read(path)
}

fn malformed(path: &Path, what: impl ToString) -> PlayerTlsError {
    PlayerTlsError::Malformed {
        path: path.display().to_string(),
        what: what.to_string(),
    }
}

/// A server configuration from the files: the ring provider (the
/// workspace's), TLS 1.2 and 1.3, no client certificates. ALPN is left
/// empty: telnet has no registered protocol id, and a `wss://` listener
/// sets its own on a copy.
fn server_config(files: &TlsFiles) -> Result<Arc<ServerConfig>, PlayerTlsError> {
    let pem = read(&files.cert)?;
    let chain = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| malformed(&files.cert, e))?;
    if chain.is_empty() {
        return Err(malformed(&files.cert, "no PEM certificate in it"));
    }
    let pem = read_key(&files.key)?;
    let key = PrivateKeyDer::from_pem_slice(&pem)
        .map_err(|e| malformed(&files.key, format!("no usable PEM private key ({e})")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let identity = |why: String| PlayerTlsError::Identity {
        cert: files.cert.display().to_string(),
        key: files.key.display().to_string(),
        why,
    };
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| identity(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| identity(e.to_string()))?;
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_pair(dir: &Path, name: &str) -> (TlsFiles, Vec<u8>) {
        let cert = rcgen::generate_simple_self_signed(vec![name.to_string()]).unwrap();
        let files = TlsFiles {
            cert: dir.join(format!("{name}.crt")),
            key: dir.join(format!("{name}.key")),
        };
        std::fs::write(&files.cert, cert.cert.pem()).unwrap();
        std::fs::write(&files.key, cert.signing_key.serialize_pem()).unwrap();
        set_mode(&files.key, 0o600);
        (files, cert.cert.der().to_vec())
    }

    fn set_mode(path: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_key_others_can_read_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let (files, _) = write_pair(dir.path(), "open");
        set_mode(&files.key, 0o644);
        let e = PlayerTls::load(files.clone()).unwrap_err().to_string();
        assert!(e.contains("open.key") && e.contains("chmod 600"), "{e}");
    }

    #[test]
    fn a_bad_file_names_itself_and_a_failed_reload_keeps_the_old_identity() {
        let dir = tempfile::tempdir().unwrap();
        let (files, _) = write_pair(dir.path(), "a");
        let tls = PlayerTls::load(files.clone()).unwrap();
        let before = tls.server_config();

        std::fs::write(&files.cert, "not a certificate").unwrap();
        let e = tls.reload().unwrap_err().to_string();
        assert!(
            e.contains("a.crt") && e.contains("no PEM certificate"),
            "{e}"
        );
        assert!(Arc::ptr_eq(&before, &tls.server_config()), "kept on error");

        let (other, _) = write_pair(dir.path(), "b");
        let mismatched = TlsFiles {
            cert: other.cert,
            key: files.key.clone(),
        };
        let e = PlayerTls::load(mismatched).unwrap_err().to_string();
        assert!(e.contains("do not make a TLS identity"), "{e}");

        let missing = TlsFiles {
            cert: dir.path().join("none.crt"),
            key: files.key,
        };
        let e = PlayerTls::load(missing).unwrap_err().to_string();
        assert!(e.contains("none.crt"), "{e}");
    }
}
