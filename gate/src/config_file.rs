//! The gate's `--config` TOML file: every setting of `crate::config`, by
//! its snake_case name.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// A setting that could not be used; the message names it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub(crate) String);

/// The `--config` file. Unknown keys are an error so a typo is not ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub listen: Option<String>,
    pub redis_url: Option<String>,
    pub redis_sentinels: Option<String>,
    pub redis_master_name: Option<String>,
    pub redis_password_file: Option<PathBuf>,
    pub redis_ca: Option<PathBuf>,
    pub metrics_listen: Option<String>,
    pub keys: Option<PathBuf>,
    pub idle_timeout_secs: Option<u64>,
    pub idle_warning_secs: Option<u64>,
    pub input_buffer_lines: Option<usize>,
    pub input_buffer_bytes: Option<usize>,
    pub output_buffer_bytes: Option<usize>,
    pub login_max_failures: Option<u32>,
    pub login_ip_burst: Option<u32>,
    pub login_ip_per_sec: Option<f64>,
    pub create_ip_burst: Option<u32>,
    pub create_ip_per_hour: Option<f64>,
    pub max_connections_per_ip: Option<usize>,
    pub pre_login_timeout_secs: Option<u64>,
    pub resume_give_up_secs: Option<u64>,
    pub max_connections: Option<usize>,
    pub max_pre_login: Option<usize>,
    pub max_connections_per_ipv4_24: Option<usize>,
    pub max_connections_per_ipv6_48: Option<usize>,
    pub pre_login_bytes_per_sec: Option<u32>,
    /// Comma-separated, as the flag.
    pub proxy_protocol_from: Option<String>,
    pub upstream_connections: Option<usize>,
    pub command_burst: Option<u32>,
    pub commands_per_sec: Option<u32>,
    pub create_network_per_hour: Option<u32>,
    pub create_per_hour: Option<u32>,
    pub input_bytes_per_sec: Option<u32>,
    pub malloc_trim: Option<bool>,
    pub tls_listen: Option<String>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// The web listener ([`crate::config_web`]).
    pub web_listen: Option<String>,
    pub web_resume_grace_secs: Option<u64>,
    pub web_replay_bytes: Option<usize>,
    pub web_tls: Option<bool>,
    pub telnet_resume_grace_secs: Option<u64>,
    pub operator_listen: Option<String>,
    /// Comma-separated, as the flag.
    pub web_forwarded_from: Option<String>,
    pub web_origins: Option<String>,
    /// `[mssp]`: what MUD listings are told (`NAME = "..."`, `CONTACT`,
    /// `WEBSITE`, ...), names in upper case as MSSP spells them.
    pub mssp: Option<toml::Table>,
}

/// The `[mssp]` section as MSSP variables: strings as written, numbers as
/// digits, booleans as `1`/`0`, an array as one variable a value.
pub fn mssp_vars(table: Option<toml::Table>) -> Result<Vec<(String, String)>, ConfigError> {
    let mut vars = Vec::new();
    for (name, value) in table.unwrap_or_default() {
        let values = match value {
            toml::Value::Array(a) => a,
            v => vec![v],
        };
        for v in values {
            let text = match v {
                toml::Value::String(s) => s,
                toml::Value::Integer(n) => n.to_string(),
                toml::Value::Float(f) => f.to_string(),
                toml::Value::Boolean(b) => u8::from(b).to_string(),
                other => {
                    return Err(ConfigError(format!(
                        "invalid mssp.{name}: a string, number or boolean, not {}",
                        other.type_str()
                    )));
                }
            };
            vars.push((name.to_ascii_uppercase(), text));
        }
    }
    Ok(vars)
}

impl FileConfig {
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("config file {}: {e}", path.display())))?;
        Self::parse(&text).map_err(|e| ConfigError(format!("config file {}: {e}", path.display())))
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        // toml's messages span several lines; keep the one-line promise.
        // Only the position and the reason: toml's own message quotes the
        // offending line, which may hold a Redis password.
        toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map_or(0, |span| text[..span.start].matches('\n').count() + 1);
            format!("line {line}: {}", e.message().trim())
        })
    }
}

/// Pick the first layer that has a value and parse it, naming the setting
/// (flag and variable) when it does not parse.
pub(crate) fn pick<T: std::str::FromStr>(
    flag: &str,
    var: &str,
    cli: Option<&String>,
    file: Option<T>,
) -> Result<Option<T>, ConfigError>
where
    T::Err: std::fmt::Display,
{
    match cli {
        Some(raw) => raw
            .trim()
            .parse()
            .map(Some)
            .map_err(|e| ConfigError(format!("invalid --{flag} / {var} {raw:?}: {e}"))),
        None => Ok(file),
    }
}

pub(crate) fn positive<T: PartialOrd + Default>(name: &str, v: T) -> Result<T, ConfigError> {
    if v > T::default() {
        Ok(v)
    } else {
        Err(ConfigError(format!(
            "invalid {name}: must be greater than zero"
        )))
    }
}

/// [`pick`], then the default, then [`positive`]; the flag is the setting's
/// name with dashes.
pub(crate) fn positive_pick<T: std::str::FromStr + PartialOrd + Default>(
    name: &str,
    var: &str,
    cli: Option<&String>,
    file: Option<T>,
    default: T,
) -> Result<T, ConfigError>
where
    T::Err: std::fmt::Display,
{
    let flag = name.replace('_', "-");
    positive(name, pick(&flag, var, cli, file)?.unwrap_or(default))
}
