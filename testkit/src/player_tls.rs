//! A self-signed certificate for a gate's `--tls-listen`, as
//! `scripts/cluster` makes one, and a player's TLS connection that trusts
//! it (and only it) for its name.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// The name the certificates are issued to (and clients ask for).
pub const NAME: &str = "localhost";

/// One certificate and key, written as PEM files in a folder.
pub struct SelfSigned {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// The certificate, as a client sees it in the handshake.
    pub der: Vec<u8>,
}

impl SelfSigned {
    /// Issue a fresh certificate for [`NAME`] and write it (replacing the
    /// files, as a renewal does) as `stem.crt` and `stem.key` in `dir`.
    pub fn write(dir: &Path, stem: &str) -> anyhow::Result<Self> {
        let issued = rcgen::generate_simple_self_signed(vec![NAME.to_string()])?;
        let cert = dir.join(format!("{stem}.crt"));
        let key = dir.join(format!("{stem}.key"));
        std::fs::write(&cert, issued.cert.pem()).with_context(|| cert.display().to_string())?;
        std::fs::write(&key, issued.signing_key.serialize_pem())
            .with_context(|| key.display().to_string())?;
        // The gate refuses a key others can read, as every key of the cluster.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600))?;
        Ok(Self {
            cert,
            key,
            der: issued.cert.der().to_vec(),
        })
    }

    /// The gate flags that serve it on `listen` (port 0 for any).
    pub fn gate_flags(&self, listen: &str) -> Vec<String> {
        vec![
            "--tls-listen".into(),
            listen.into(),
            "--tls-cert".into(),
            self.cert.display().to_string(),
            "--tls-key".into(),
            self.key.display().to_string(),
        ]
    }

    /// A TLS connection to `addr` that trusts this certificate only.
    pub async fn connect(&self, addr: &str) -> anyhow::Result<TlsStream<TcpStream>> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(CertificateDer::from(self.der.clone()))?;
        connect_with(addr, roots).await
    }
}

/// A TLS connection to `addr` for [`NAME`] with `roots` trusted.
pub async fn connect_with(
    addr: &str,
    roots: rustls::RootCertStore,
) -> anyhow::Result<TlsStream<TcpStream>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from(NAME)?;
    Ok(TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await?)
}

/// The certificate a TLS server at `addr` shows, trusting nothing: the
/// handshake is cut short by the verifier, which records what it saw.
pub async fn peer_certificate(addr: &str) -> anyhow::Result<Vec<u8>> {
    #[derive(Debug)]
    struct Record(
        std::sync::Mutex<Option<Vec<u8>>>,
        Arc<rustls::crypto::CryptoProvider>,
    );
    impl rustls::client::danger::ServerCertVerifier for Record {
        fn verify_server_cert(
            &self,
            end_entity: &CertificateDer<'_>,
            _: &[CertificateDer<'_>],
            _: &ServerName<'_>,
            _: &[u8],
            _: rustls::pki_types::UnixTime,
        ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
            *self.0.lock().unwrap() = Some(end_entity.to_vec());
            Err(rustls::Error::General("recorded".into()))
        }
        fn verify_tls12_signature(
            &self,
            _: &[u8],
            _: &CertificateDer<'_>,
            _: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            Err(rustls::Error::General("recorded".into()))
        }
        fn verify_tls13_signature(
            &self,
            _: &[u8],
            _: &CertificateDer<'_>,
            _: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            Err(rustls::Error::General("recorded".into()))
        }
        fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
            self.1.signature_verification_algorithms.supported_schemes()
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let record = Arc::new(Record(std::sync::Mutex::new(None), provider.clone()));
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(record.clone())
        .with_no_client_auth();
    let tcp = TcpStream::connect(addr).await?;
    let _ = TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from(NAME)?, tcp)
        .await;
    let seen = record.0.lock().unwrap().take();
    seen.context("the server showed no certificate")
}
