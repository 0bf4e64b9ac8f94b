//! The settings of TLS for players: `--tls-listen`, `--tls-cert`,
//! `--tls-key` (flags, `TELOS_GATE_TLS_*` variables or `--config` keys as
//! every other setting). See docs/operations.md, "TLS for players".

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;

use crate::config_file::{ConfigError, FileConfig, pick};
use crate::player_tls::{PlayerTls, TlsFiles};

#[derive(Debug, Default, Args)]
pub struct TlsCli {
    /// Players' telnet-over-TLS listen address (the same protocol and
    /// limits as --listen), with --tls-cert and --tls-key [default: off].
    #[arg(long, value_name = "ADDR", env = "TELOS_GATE_TLS_LISTEN")]
    pub tls_listen: Option<String>,
    /// PEM certificate (and chain) shown to players; reread on SIGHUP.
    #[arg(long, value_name = "PATH", env = "TELOS_GATE_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert; reread on SIGHUP.
    #[arg(long, value_name = "PATH", env = "TELOS_GATE_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
}

/// Where players connect over TLS, and the certificate (shared with any
/// other listener that terminates TLS for players).
#[derive(Debug, Clone)]
pub struct PlayersTls {
    pub listen: SocketAddr,
    pub tls: Arc<PlayerTls>,
}

impl TlsCli {
    /// `None` without `--tls-listen`. The certificate is read here, so a
    /// bad one stops the gate at start with the file's name, not at the
    /// first player's handshake.
    pub fn resolve(&self, file: &FileConfig) -> Result<Option<PlayersTls>, ConfigError> {
        let listen = pick::<String>(
            "tls-listen",
            "TELOS_GATE_TLS_LISTEN",
            self.tls_listen.as_ref(),
            file.tls_listen.clone(),
        )?
        .filter(|s| !s.trim().is_empty());
        let cert = self.tls_cert.clone().or(file.tls_cert.clone());
        let key = self.tls_key.clone().or(file.tls_key.clone());
        let Some(listen) = listen else {
            if cert.is_some() || key.is_some() {
                return Err(ConfigError(
                    "invalid tls_cert/tls_key (--tls-cert / --tls-key): no --tls-listen uses them"
                        .into(),
                ));
            }
            return Ok(None);
        };
        let listen: SocketAddr = listen.trim().parse().map_err(|e| {
            ConfigError(format!(
                "invalid tls_listen (--tls-listen / TELOS_GATE_TLS_LISTEN) {listen:?}: {e}"
            ))
        })?;
        let (Some(cert), Some(key)) = (cert, key) else {
            return Err(ConfigError(
                "invalid tls_listen (--tls-listen): needs both --tls-cert and --tls-key".into(),
            ));
        };
        let tls = PlayerTls::load(TlsFiles { cert, key })
            .map_err(|e| ConfigError(format!("invalid --tls-cert / --tls-key: {e}")))?;
        Ok(Some(PlayersTls {
            listen,
            tls: Arc::new(tls),
        }))
    }
}
