//! The settings of TLS for players: `--tls-listen`, `--tls-cert`,
//! `--tls-key` and `--web-tls` (flags, `TELOS_GATE_*` variables or
//! `--config` keys as every other setting). One certificate serves both
//! listeners that terminate TLS for players: telnet over TLS on
//! `--tls-listen`, and `https://` / `wss://` on `--web-listen` with
//! `--web-tls`. See docs/operations.md, "TLS for players".

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
    /// Serve the web listener (--web-listen) over TLS, https:// and
    /// wss://, with --tls-cert and --tls-key.
    #[arg(long, env = "TELOS_GATE_WEB_TLS")]
    pub web_tls: bool,
}

/// Where players connect over TLS, and the certificate (shared with any
/// other listener that terminates TLS for players).
#[derive(Debug, Clone)]
pub struct PlayersTls {
    /// `--tls-listen`: telnet over TLS; `None` when only the web listener
    /// uses the certificate.
    pub listen: Option<SocketAddr>,
    /// `--web-tls`: the web listener serves TLS.
    pub web: bool,
    pub tls: Arc<PlayerTls>,
}

impl TlsCli {
    /// `None` without `--tls-listen` or `--web-tls`. The certificate is
    /// read here, so a bad one stops the gate at start with the file's
    /// name, not at the first player's handshake.
    pub fn resolve(&self, file: &FileConfig) -> Result<Option<PlayersTls>, ConfigError> {
        let listen = pick::<String>(
            "tls-listen",
            "TELOS_GATE_TLS_LISTEN",
            self.tls_listen.as_ref(),
            file.tls_listen.clone(),
        )?
        .filter(|s| !s.trim().is_empty());
        let web = self.web_tls || file.web_tls.unwrap_or(false);
        let cert = self.tls_cert.clone().or(file.tls_cert.clone());
        let key = self.tls_key.clone().or(file.tls_key.clone());
        if listen.is_none() && !web {
            if cert.is_some() || key.is_some() {
                return Err(ConfigError(
                    "invalid tls_cert/tls_key (--tls-cert / --tls-key): neither --tls-listen nor --web-tls uses them"
                        .into(),
                ));
            }
            return Ok(None);
        }
        let listen = listen
            .map(|listen| {
                listen.trim().parse::<SocketAddr>().map_err(|e| {
                    ConfigError(format!(
                        "invalid tls_listen (--tls-listen / TELOS_GATE_TLS_LISTEN) {listen:?}: {e}"
                    ))
                })
            })
            .transpose()?;
        let (Some(cert), Some(key)) = (cert, key) else {
            let flag = if listen.is_some() {
                "tls_listen (--tls-listen)"
            } else {
                "web_tls (--web-tls)"
            };
            return Err(ConfigError(format!(
                "invalid {flag}: needs both --tls-cert and --tls-key"
            )));
        };
        let tls = PlayerTls::load(TlsFiles { cert, key })
            .map_err(|e| ConfigError(format!("invalid --tls-cert / --tls-key: {e}")))?;
        Ok(Some(PlayersTls {
            listen,
            web,
            tls: Arc::new(tls),
        }))
    }
}
