//! The settings of the web listener: the web client and its WebSocket
//! endpoint (`--web-listen`), how long a session outlives its page's
//! dropped connection (`--web-resume-grace-secs`), what is kept to replay
//! to a page that comes back (`--web-replay-bytes`), which HTTP proxies'
//! `X-Forwarded-For` is believed (`--web-forwarded-from`), and how long a
//! telnet session outlives its client's (`--telnet-resume-grace-secs`).
//! See docs/operations.md, "Playing in a browser" and "A telnet client's
//! own drop".

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use clap::Args;
use ipnet::IpNet;

use crate::config_edge::networks;
use crate::config_file::{ConfigError, FileConfig, pick, positive_pick};

/// A phone that loses its signal in a tunnel or switches from Wi-Fi to
/// mobile data is back within seconds; a minute covers nearly every such
/// drop, and holds a vanished player's place in the world no longer than
/// a shard's resume gives up after (`--resume-give-up-secs`).
pub const DEFAULT_RESUME_GRACE: Duration = Duration::from_secs(60);

/// Output kept for a page that dropped: a few screens of text, what a
/// minute of an ordinary room produces. A page that missed more is told
/// so and gets a fresh `look` instead.
pub const DEFAULT_REPLAY_BYTES: usize = 64 * 1024;

/// The web settings, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebConfig {
    /// The web client and the WebSocket endpoint; `None`: off.
    pub listen: Option<SocketAddr>,
    /// How long a logged-in web session is kept after its page's
    /// connection dropped, waiting for the page to resume it.
    pub resume_grace: Duration,
    /// Output bytes kept per web session for replay on resume (and per
    /// telnet session, [`crate::grace`]).
    pub replay_bytes: usize,
    /// How long a logged-in telnet session is kept after its client's
    /// connection dropped, for `resume <token>`; zero: not kept.
    pub telnet_grace: Duration,
    /// HTTP reverse proxies whose `X-Forwarded-For` names the player.
    pub forwarded_from: Vec<IpNet>,
    /// The read-only operator page ([`crate::operator`]); `None`: off.
    pub operator_listen: Option<SocketAddr>,
    /// Pages of other origins (`https://play.example.org`) allowed to open
    /// `/ws`; the web client's own origin always is.
    pub origins: Vec<String>,
}

impl WebConfig {
    /// Whether `X-Forwarded-For` from `peer` is believed.
    pub fn is_forwarder(&self, peer: IpAddr) -> bool {
        let peer = match peer {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(peer, IpAddr::V4),
            v4 => v4,
        };
        self.forwarded_from.iter().any(|n| n.contains(&peer))
    }
}

impl Default for WebConfig {
    fn default() -> Self {
        Self {
            listen: None,
            resume_grace: DEFAULT_RESUME_GRACE,
            replay_bytes: DEFAULT_REPLAY_BYTES,
            // Off unless asked for: a kept session stays in `who`, in its
            // room and in its address's connection count after its client
            // hung up, which outside clients of the player protocol do not
            // expect of a telnet server (web pages resume by default).
            telnet_grace: Duration::ZERO,
            forwarded_from: Vec::new(),
            operator_listen: None,
            origins: Vec::new(),
        }
    }
}

/// The web flags, part of `telos-gate --help`.
#[derive(Debug, Default, Args)]
pub struct WebCli {
    /// The web client and its WebSocket endpoint (`/ws`, subprotocols
    /// gmcp.mudstandards.org, terminal.mudstandards.org,
    /// telnet.mudstandards.org): ADDR:PORT [default: off].
    #[arg(long, value_name = "ADDR", env = "TELOS_GATE_WEB_LISTEN")]
    pub web_listen: Option<String>,
    /// Seconds a web player's session is kept after their page's
    /// connection dropped, for the page to resume it [default: 60].
    #[arg(long, value_name = "SECS", env = "TELOS_GATE_WEB_RESUME_GRACE")]
    pub web_resume_grace_secs: Option<String>,
    /// Output bytes kept per web session to replay to a page that comes
    /// back [default: 65536].
    #[arg(long, value_name = "BYTES", env = "TELOS_GATE_WEB_REPLAY_BYTES")]
    pub web_replay_bytes: Option<String>,
    /// HTTP reverse proxies (addresses or CIDR networks, comma-separated)
    /// in front of --web-listen whose X-Forwarded-For header names the
    /// player; from anyone else the header is ignored [default: none].
    #[arg(long, value_name = "ADDRS", env = "TELOS_GATE_WEB_FORWARDED_FROM")]
    pub web_forwarded_from: Option<String>,
    /// Seconds a telnet player's session is kept after their connection
    /// dropped, for `resume <token>` from a new one; 0: not kept
    /// [default: 0, off: a hang-up ends the session at once, as the player
    /// protocol in CONTRACT.md has it; 60 is a good value to turn it on].
    #[arg(long, value_name = "SECS", env = "TELOS_GATE_TELNET_RESUME_GRACE")]
    pub telnet_resume_grace_secs: Option<String>,
    /// The read-only operator page (shards, zones and owners, players,
    /// recent drains and transfers; live): PORT (loopback) or ADDR:PORT
    /// [default: off].
    #[arg(long, value_name = "ADDR", env = "TELOS_GATE_OPERATOR_LISTEN")]
    pub operator_listen: Option<String>,
    /// Origins of other pages allowed to open the WebSocket (`/ws`),
    /// comma-separated (`https://play.example.org`); a browser's request
    /// from any other page is refused (403) [default: the web client's own
    /// origin only].
    #[arg(long, value_name = "ORIGINS", env = "TELOS_GATE_WEB_ORIGINS")]
    pub web_origins: Option<String>,
}

fn addr(flag: &str, var: &str, value: Option<String>) -> Result<Option<SocketAddr>, ConfigError> {
    let Some(value) = value else { return Ok(None) };
    telos_telemetry::metrics_listen_addr(&value)
        .map(Some)
        .map_err(|e| {
            ConfigError(format!(
                "invalid {flag} (--{} / {var}) {value:?}: {e}",
                flag.replace('_', "-")
            ))
        })
}

impl WebCli {
    /// Flags over the file over the defaults.
    pub fn resolve(&self, file: &FileConfig) -> Result<WebConfig, ConfigError> {
        let d = WebConfig::default();
        let listen = pick::<String>(
            "web-listen",
            "TELOS_GATE_WEB_LISTEN",
            self.web_listen.as_ref(),
            file.web_listen.clone(),
        )?;
        let grace: u64 = positive_pick(
            "web_resume_grace_secs",
            "TELOS_GATE_WEB_RESUME_GRACE",
            self.web_resume_grace_secs.as_ref(),
            file.web_resume_grace_secs,
            d.resume_grace.as_secs(),
        )?;
        let forwarded_from = pick::<String>(
            "web-forwarded-from",
            "TELOS_GATE_WEB_FORWARDED_FROM",
            self.web_forwarded_from.as_ref(),
            file.web_forwarded_from.clone(),
        )?
        .map(|list| {
            networks(
                &list,
                "web_forwarded_from (--web-forwarded-from / TELOS_GATE_WEB_FORWARDED_FROM)",
            )
        })
        .transpose()?
        .unwrap_or_default();
        let telnet_grace = pick::<u64>(
            "telnet-resume-grace-secs",
            "TELOS_GATE_TELNET_RESUME_GRACE",
            self.telnet_resume_grace_secs.as_ref(),
            file.telnet_resume_grace_secs,
        )?
        .map_or(d.telnet_grace, Duration::from_secs);
        let operator = pick::<String>(
            "operator-listen",
            "TELOS_GATE_OPERATOR_LISTEN",
            self.operator_listen.as_ref(),
            file.operator_listen.clone(),
        )?;
        let origins = pick::<String>(
            "web-origins",
            "TELOS_GATE_WEB_ORIGINS",
            self.web_origins.as_ref(),
            file.web_origins.clone(),
        )?
        .map(|list| {
            list.split(',')
                .map(|o| o.trim().trim_end_matches('/').to_ascii_lowercase())
                .filter(|o| !o.is_empty())
                .collect()
        })
        .unwrap_or_default();
        Ok(WebConfig {
            origins,
            operator_listen: addr("operator_listen", "TELOS_GATE_OPERATOR_LISTEN", operator)?,
            listen: addr("web_listen", "TELOS_GATE_WEB_LISTEN", listen)?,
            telnet_grace,
            forwarded_from,
            resume_grace: Duration::from_secs(grace),
            replay_bytes: positive_pick(
                "web_replay_bytes",
                "TELOS_GATE_WEB_REPLAY_BYTES",
                self.web_replay_bytes.as_ref(),
                file.web_replay_bytes,
                d.replay_bytes,
            )?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn web_settings_resolve_from_flags_and_file() {
        let cli = WebCli {
            web_listen: Some("4080".into()),
            ..WebCli::default()
        };
        let file = FileConfig::parse("web_resume_grace_secs = 5\n").unwrap();
        let w = cli.resolve(&file).unwrap();
        // A port alone binds loopback.
        assert_eq!(w.listen, Some("127.0.0.1:4080".parse().unwrap()));
        assert_eq!(w.resume_grace, Duration::from_secs(5));
        assert_eq!(w.replay_bytes, DEFAULT_REPLAY_BYTES);
        // Telnet's grace is asked for, never a default.
        assert_eq!(w.telnet_grace, Duration::ZERO);
        let op = WebCli {
            operator_listen: Some("9180".into()),
            ..WebCli::default()
        };
        let op = op.resolve(&FileConfig::default()).unwrap();
        assert_eq!(op.operator_listen, Some("127.0.0.1:9180".parse().unwrap()));
        let on = WebCli {
            telnet_resume_grace_secs: Some("60".into()),
            ..WebCli::default()
        };
        let on = on.resolve(&FileConfig::default()).unwrap();
        assert_eq!(on.telnet_grace, Duration::from_secs(60));
        let off = WebCli::default().resolve(&FileConfig::default()).unwrap();
        assert_eq!(off, WebConfig::default());
        let bad = WebCli {
            web_listen: Some("nowhere".into()),
            ..WebCli::default()
        };
        let err = bad.resolve(&FileConfig::default()).unwrap_err();
        assert!(err.to_string().contains("--web-listen"), "{err}");
        let zero = WebCli {
            web_resume_grace_secs: Some("0".into()),
            ..WebCli::default()
        };
        assert!(zero.resolve(&FileConfig::default()).is_err());
        let proxies = WebCli {
            web_forwarded_from: Some("10.0.0.0/8, 192.168.1.2".into()),
            ..WebCli::default()
        };
        let w = proxies.resolve(&FileConfig::default()).unwrap();
        assert!(w.is_forwarder("10.1.2.3".parse().unwrap()));
        assert!(w.is_forwarder("::ffff:192.168.1.2".parse().unwrap()));
        assert!(!w.is_forwarder("192.168.1.3".parse().unwrap()));
        let bad = WebCli {
            web_forwarded_from: Some("proxy.example".into()),
            ..WebCli::default()
        };
        let err = bad.resolve(&FileConfig::default()).unwrap_err();
        assert!(err.to_string().contains("--web-forwarded-from"), "{err}");
    }
}
