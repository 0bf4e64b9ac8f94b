//! Where Redis is and how a Telos process proves itself to it: the URL, the
//! ACL password (in the URL or from `--redis-password-file`) and, for
//! `rediss://`, the CA that signed Redis's certificate (`--redis-ca`).
//! World, gate and `telosctl` build one [`RedisTarget`] from their flags and
//! every connection they make comes from [`RedisTarget::client`] (a direct
//! URL) or, for `redis+sentinel://`, from the primary the Sentinels name now
//! ([`crate::sentinel`]; the lookup and `RedisTarget::primary_client` are
//! in `crate::primary`).
//!
//! Credentials are never printed: [`RedisTarget`]'s `Display` and `Debug`
//! show [`redact`]ed URLs only, and every error here names files by path,
//! never by content.

use std::path::{Path, PathBuf};

use redis::{IntoConnectionInfo, TlsCertificates};

use crate::sentinel::SentinelSpec;

/// What replaces a password in a printed URL.
pub const REDACTED: &str = "***";

/// Why a [`RedisTarget`] could not be built or turned into a client.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("cannot read the Redis password file {}: {source}", path.display())]
    PasswordFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the Redis password file {} is empty", path.display())]
    EmptyPasswordFile { path: PathBuf },
    #[error("cannot read the Redis CA file {}: {source}", path.display())]
    CaFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("a Redis CA (--redis-ca) is given but {url} is not a rediss:// URL")]
    CaWithoutTls { url: String },
    /// A `redis+sentinel://` URL that does not parse. `url` is redacted.
    #[error("invalid Redis Sentinel URL {url}: {reason}")]
    InvalidSentinel { url: String, reason: String },
    /// [`RedisTarget::client`] on a Sentinel target: its address is only
    /// known after asking the Sentinels.
    #[error("{url} names its primary through Sentinel: ask it first")]
    NeedsLookup { url: String },
    /// The URL or the CA is unusable. `url` is redacted; redis-rs's own
    /// message does not repeat the URL.
    #[error("invalid Redis URL {url}: {source}")]
    Invalid {
        url: String,
        source: redis::RedisError,
    },
}

/// A Redis server and the credentials for it. Cheap to clone.
#[derive(Clone)]
pub struct RedisTarget {
    url: String,
    /// Overrides the URL's password (the URL's user stays the ACL user).
    password: Option<String>,
    /// PEM CA bundle that verifies Redis's certificate; `None`: the
    /// system's roots.
    ca: Option<Vec<u8>>,
}

impl RedisTarget {
    /// The URL alone (credentials, if any, in it; the system's roots for
    /// `rediss://`).
    pub fn new(url: impl Into<String>) -> RedisTarget {
        RedisTarget {
            url: url.into(),
            password: None,
            ca: None,
        }
    }

    /// `url` with the password read from `password_file` (one line; the
    /// trailing newline is not part of it) and the CA read from `ca`.
    pub fn from_files(
        url: impl Into<String>,
        password_file: Option<&Path>,
        ca: Option<&Path>,
    ) -> Result<RedisTarget, TargetError> {
        let mut target = RedisTarget::new(url);
        // A Sentinel URL that does not parse fails here, at start.
        target.sentinel_spec()?;
        if let Some(path) = password_file {
            target.password = Some(read_password(path)?);
        }
        if let Some(path) = ca {
            if !target.is_tls() {
                return Err(TargetError::CaWithoutTls {
                    url: target.to_string(),
                });
            }
            let pem = std::fs::read(path).map_err(|source| TargetError::CaFile {
                path: path.to_owned(),
                source,
            })?;
            target.ca = Some(pem);
        }
        Ok(target)
    }

    /// Whether the URL asks for TLS (`rediss://`, `rediss+sentinel://`).
    pub fn is_tls(&self) -> bool {
        self.url.starts_with("rediss://")
            || self.url.starts_with(crate::sentinel::SENTINEL_TLS_SCHEME)
    }

    /// Whether the primary is found through Sentinel (`redis+sentinel://`).
    pub fn is_sentinel(&self) -> bool {
        SentinelSpec::is_sentinel_url(&self.url)
    }

    /// The parsed Sentinel URL; `None` for a direct URL.
    pub fn sentinel_spec(&self) -> Result<Option<SentinelSpec>, TargetError> {
        if !self.is_sentinel() {
            return Ok(None);
        }
        SentinelSpec::parse(&self.url)
            .map(Some)
            .map_err(|reason| TargetError::InvalidSentinel {
                url: self.redacted(),
                reason,
            })
    }

    /// The password from `--redis-password-file`, if any.
    pub(crate) fn password_override(&self) -> Option<&str> {
        self.password.as_deref()
    }

    /// The CA from `--redis-ca`, if any.
    pub(crate) fn ca_pem(&self) -> Option<&[u8]> {
        self.ca.as_deref()
    }

    /// The URL as it may be printed (see [`redact`]; with a password file
    /// a user info without a colon is the user's name, and shown).
    pub fn redacted(&self) -> String {
        redact_as(&self.url, self.password.is_some())
    }

    /// A redis-rs client for this target: the one place a Telos process
    /// turns its settings into a connection.
    pub fn client(&self) -> Result<redis::Client, TargetError> {
        if self.is_sentinel() {
            return Err(TargetError::NeedsLookup {
                url: self.redacted(),
            });
        }
        self.client_for_url(&self.url)
    }

    /// A client for the direct `url` with this target's password and CA
    /// (for a Sentinel target: the URL of the primary it found).
    pub(crate) fn client_for_url(&self, url: &str) -> Result<redis::Client, TargetError> {
        let invalid = |source| TargetError::Invalid {
            url: self.redacted(),
            source,
        };
        let info = url.into_connection_info().map_err(invalid)?;
        // No `CLIENT SETINFO` after connecting: Redis 7.0 has no such
        // command and an ACL would have to grant it (docs/operations.md).
        let mut settings = info.redis_settings().clone().set_skip_set_lib_name();
        if let Some(password) = &self.password {
            settings = settings.set_password(password);
        }
        let info = info.set_redis_settings(settings);
        match &self.ca {
            None => redis::Client::open(info),
            Some(pem) => redis::Client::build_with_tls(
                info,
                TlsCertificates {
                    client_tls: None,
                    root_cert: Some(pem.clone()),
                },
            ),
        }
        .map_err(invalid)
    }
}

impl From<&str> for RedisTarget {
    fn from(url: &str) -> Self {
        RedisTarget::new(url)
    }
}

impl From<String> for RedisTarget {
    fn from(url: String) -> Self {
        RedisTarget::new(url)
    }
}

impl From<&String> for RedisTarget {
    fn from(url: &String) -> Self {
        RedisTarget::new(url.as_str())
    }
}

impl From<&RedisTarget> for RedisTarget {
    fn from(target: &RedisTarget) -> Self {
        target.clone()
    }
}

impl std::fmt::Display for RedisTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl std::fmt::Debug for RedisTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisTarget")
            .field("url", &self.redacted())
            .field("password", &self.password.as_ref().map(|_| REDACTED))
            .field("ca", &self.ca.is_some())
            .finish()
    }
}

fn read_password(path: &Path) -> Result<String, TargetError> {
    let text = std::fs::read_to_string(path).map_err(|source| TargetError::PasswordFile {
        path: path.to_owned(),
        source,
    })?;
    // Editors and `echo` end the file with a newline; it is not part of the
    // password. Other whitespace is (a password may end in a space).
    let password = text.strip_suffix('\n').unwrap_or(&text);
    let password = password.strip_suffix('\r').unwrap_or(password);
    if password.is_empty() {
        return Err(TargetError::EmptyPasswordFile {
            path: path.to_owned(),
        });
    }
    Ok(password.to_owned())
}

/// `url` fit to print: its user info's password, a lone user info (a
/// password typed without its colon, `redis://SECRET@host`, is read as a
/// user name) and the value of every query parameter but `db`, `protocol`
/// and `user` (`?password=…`, a `unix://` URL's `pass=`) replaced by
/// [`REDACTED`]; the user name before a colon, host, port and database
/// stay.
///
/// Works on text, not on a parsed URL, so that a URL too broken to parse
/// (a raw `/`, `?` or `@` in the password) is redacted too: the user info
/// is everything before the last `@`.
pub fn redact(url: &str) -> String {
    redact_as(url, false)
}

/// [`redact`]; `lone_user_is_a_name`: the password comes from elsewhere
/// (`--redis-password-file`), so a user info without a colon is the ACL
/// user's name and is shown.
fn redact_as(url: &str, lone_user_is_a_name: bool) -> String {
    // Without `://` (a mistyped scheme, or none) the whole text is the
    // authority: a password in it is hidden all the same.
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), url),
    };
    // The user info first: a broken password may hold a `?`.
    let url = match rest.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _password)) => format!("{scheme}{user}:{REDACTED}@{host}"),
            None if lone_user_is_a_name => url.to_string(),
            None => format!("{scheme}{REDACTED}@{host}"),
        },
        None => format!("{scheme}{}", redact_port_shaped_secret(rest)),
    };
    redact_query(&url)
}

/// An authority without `@` whose "port" is not a number: `telos:SECRET`
/// (a user and password typed without the host) would be shown whole as a
/// host and a port; what follows the colon is hidden unless it is a port.
fn redact_port_shaped_secret(rest: &str) -> String {
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    if authority.starts_with('[') {
        return rest.to_string();
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if !port.is_empty() && !port.bytes().all(|b| b.is_ascii_digit()) => {
            format!("{host}:{REDACTED}{tail}")
        }
        _ => rest.to_string(),
    }
}

/// Query parameters whose values are shown: no secret is spelled so.
const SHOWN_PARAMS: &[&str] = &["db", "protocol", "user"];

/// Replaces the value of every query parameter not in [`SHOWN_PARAMS`]
/// (up to the next `&` or `#`).
fn redact_query(url: &str) -> String {
    let Some((base, query)) = url.split_once('?') else {
        return url.to_string();
    };
    let params: Vec<String> = query
        .split('&')
        .map(|param| match param.split_once('=') {
            Some((name, _)) if SHOWN_PARAMS.contains(&name.to_ascii_lowercase().as_str()) => {
                param.to_string()
            }
            Some((name, _)) => format!("{name}={REDACTED}"),
            // A bare word: could be a secret typed without its name.
            None if param.is_empty() => String::new(),
            None => REDACTED.to_string(),
        })
        .collect();
    format!("{base}?{}", params.join("&"))
}

#[cfg(test)]
#[path = "target_tests.rs"]
mod tests;
