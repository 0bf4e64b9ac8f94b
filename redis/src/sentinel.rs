//! Redis behind Sentinel: the `redis+sentinel://` URL form and the lookup of
//! the current primary.
//!
//! ```text
//! redis+sentinel://[USER[:PASSWORD]@]HOST:PORT[,HOST:PORT...]/MASTER[/DB]
//! rediss+sentinel://...   (TLS to the Sentinels and to the data nodes)
//! ```
//!
//! The URL's user and password (or `--redis-password-file`) authenticate to
//! the data nodes *and* to the Sentinels, and `--redis-ca` verifies both:
//! run the Sentinels with the same ACL user (or `requirepass`) as the data
//! nodes, or with none when the URL has none. `--redis-sentinels` +
//! `--redis-master-name` build the same URL ([`sentinel_url`]).
//!
//! The lookup ([`Resolver::primary`]) asks the Sentinels, through redis-rs's
//! `SentinelClient`, which node is the primary of `MASTER`; the library also
//! checks with `ROLE` that the node calls itself the primary. Connections
//! to it are then made exactly as to a plain `redis://` target
//! ([`RedisTarget::client_for`]). Who calls the lookup again, and when, is
//! `directory::sentinel_link`.

use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{ConnectionAddr, IntoConnectionInfo, TlsCertificates, TlsMode};

use crate::target::{RedisTarget, TargetError};

/// The plain-TCP scheme.
pub const SENTINEL_SCHEME: &str = "redis+sentinel://";
/// TLS to the Sentinels and the data nodes.
pub const SENTINEL_TLS_SCHEME: &str = "rediss+sentinel://";

/// A parsed `redis+sentinel://` URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SentinelSpec {
    /// The Sentinels, in the order given (asked in that order).
    pub sentinels: Vec<(String, u16)>,
    /// The name the Sentinels monitor the primary under.
    pub master: String,
    /// The database on the data nodes.
    pub db: i64,
    pub tls: bool,
    /// `USER[:PASSWORD]`, still percent-encoded, without the `@`.
    userinfo: Option<String>,
}

impl SentinelSpec {
    /// Whether `url` is in the Sentinel form (any other URL is a direct one).
    pub fn is_sentinel_url(url: &str) -> bool {
        url.starts_with(SENTINEL_SCHEME) || url.starts_with(SENTINEL_TLS_SCHEME)
    }

    /// Parses `url`; the error's text never repeats the password.
    pub fn parse(url: &str) -> Result<SentinelSpec, String> {
        let (tls, rest) = if let Some(rest) = url.strip_prefix(SENTINEL_TLS_SCHEME) {
            (true, rest)
        } else if let Some(rest) = url.strip_prefix(SENTINEL_SCHEME) {
            (false, rest)
        } else {
            return Err(format!(
                "expected {SENTINEL_SCHEME}HOST:PORT[,HOST:PORT...]/MASTER"
            ));
        };
        let (authority, path) = rest
            .split_once('/')
            .ok_or("no master name: expected .../MASTER after the Sentinels")?;
        let (userinfo, hosts) = match authority.rsplit_once('@') {
            Some((userinfo, hosts)) => (Some(userinfo.to_owned()), hosts),
            None => (None, authority),
        };
        let sentinels = hosts
            .split(',')
            .map(parse_host_port)
            .collect::<Result<Vec<_>, _>>()?;
        let mut path = path.trim_end_matches('/').splitn(2, '/');
        let master = path.next().unwrap_or_default().to_owned();
        if master.is_empty() {
            return Err("no master name: expected .../MASTER after the Sentinels".into());
        }
        let db = match path.next() {
            None | Some("") => 0,
            Some(db) => db
                .parse()
                .map_err(|_| format!("database {db:?} is not a number"))?,
        };
        Ok(SentinelSpec {
            sentinels,
            master,
            db,
            tls,
            userinfo,
        })
    }

    /// The direct URL of the data node at `host:port`, with this URL's
    /// credentials and database.
    pub(crate) fn node_url(&self, host: &str, port: u16) -> String {
        let scheme = if self.tls { "rediss" } else { "redis" };
        let host = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]")
        } else {
            host.to_owned()
        };
        match &self.userinfo {
            Some(userinfo) => format!("{scheme}://{userinfo}@{host}:{port}/{}", self.db),
            None => format!("{scheme}://{host}:{port}/{}", self.db),
        }
    }
}

/// `HOST:PORT` (`[V6]:PORT` for IPv6).
fn parse_host_port(text: &str) -> Result<(String, u16), String> {
    let (host, port) = text
        .rsplit_once(':')
        .ok_or_else(|| format!("Sentinel {text:?} is not HOST:PORT"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = port
        .parse::<u16>()
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| format!("Sentinel {text:?}: bad port"))?;
    if host.is_empty() {
        return Err(format!("Sentinel {text:?}: no host"));
    }
    Ok((host.to_owned(), port))
}

/// The URL `--redis-sentinels` + `--redis-master-name` stand for.
pub fn sentinel_url(sentinels: &str, master: &str) -> String {
    format!("{SENTINEL_SCHEME}{sentinels}/{master}")
}

/// The Redis URL from the three flags: `--redis-url`, or the Sentinel URL
/// of `--redis-sentinels` + `--redis-master-name` (both or neither; not
/// with `--redis-url`), or `default`.
pub fn url_from_flags(
    url: Option<String>,
    sentinels: Option<String>,
    master: Option<String>,
    default: &str,
) -> Result<String, String> {
    match (url, sentinels, master) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => Err(
            "give either --redis-url or --redis-sentinels with --redis-master-name, not both"
                .into(),
        ),
        (None, Some(sentinels), Some(master)) => Ok(sentinel_url(&sentinels, &master)),
        (None, Some(_), None) => Err("--redis-sentinels needs --redis-master-name".into()),
        (None, None, Some(_)) => Err("--redis-master-name needs --redis-sentinels".into()),
        (Some(url), None, None) => Ok(url),
        (None, None, None) => Ok(default.to_owned()),
    }
}

/// Finds the current primary through the Sentinels. Owned by one task at a
/// time (the lookup needs `&mut`; it caches its Sentinel connections).
pub struct Resolver {
    client: SentinelClient,
    target: RedisTarget,
    spec: SentinelSpec,
}

impl Resolver {
    /// A resolver for `target`, which must be a Sentinel URL.
    pub(crate) fn new(target: &RedisTarget, spec: SentinelSpec) -> Result<Resolver, TargetError> {
        let invalid = |source| TargetError::Invalid {
            url: target.redacted(),
            source,
        };
        // The credentials as redis-rs decodes them from a direct URL.
        let (host, port) = spec.sentinels[0].clone();
        let info = spec
            .node_url(&host, port)
            .as_str()
            .into_connection_info()
            .map_err(invalid)?;
        let user = info.redis_settings().username().map(str::to_owned);
        let password = target
            .password_override()
            .or(info.redis_settings().password())
            .map(str::to_owned);
        let nodes = spec.sentinels.iter().map(|(host, port)| {
            if spec.tls {
                ConnectionAddr::TcpTls {
                    host: host.clone(),
                    port: *port,
                    insecure: false,
                    tls_params: None,
                }
            } else {
                ConnectionAddr::Tcp(host.clone(), *port)
            }
        });
        let mut builder =
            SentinelClientBuilder::new(nodes, &spec.master, SentinelServerType::Master)
                .map_err(invalid)?
                .set_client_to_redis_db(spec.db);
        if let Some(user) = &user {
            builder = builder
                .set_client_to_redis_username(user)
                .set_client_to_sentinel_username(user);
        }
        if let Some(password) = &password {
            builder = builder
                .set_client_to_redis_password(password)
                .set_client_to_sentinel_password(password);
        }
        if spec.tls {
            builder = builder
                .set_client_to_redis_tls_mode(TlsMode::Secure)
                .set_client_to_sentinel_tls_mode(TlsMode::Secure);
            if let Some(ca) = target.ca_pem() {
                let certs = || TlsCertificates {
                    client_tls: None,
                    root_cert: Some(ca.to_vec()),
                };
                builder = builder
                    .set_client_to_redis_certificates(certs())
                    .set_client_to_sentinel_certificates(certs());
            }
        }
        let client = builder.build().map_err(invalid)?;
        Ok(Resolver {
            client,
            target: target.clone(),
            spec,
        })
    }

    /// The primary's `host:port` and a client for it (the target's
    /// credentials and CA), as the Sentinels name it now.
    pub async fn primary(&mut self) -> redis::RedisResult<(String, redis::Client)> {
        let found = self.client.async_get_client().await?;
        let (host, port) = match found.get_connection_info().addr() {
            ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
                (host.clone(), *port)
            }
            other => {
                return Err(redis::RedisError::from((
                    redis::ErrorKind::InvalidClientConfig,
                    "Sentinel named a primary that is not a TCP address",
                    other.to_string(),
                )));
            }
        };
        let client = self
            .target
            .client_for_url(&self.spec.node_url(&host, port))
            .map_err(|e| match e {
                TargetError::Invalid { source, .. } => source,
                other => redis::RedisError::from((
                    redis::ErrorKind::InvalidClientConfig,
                    "bad primary address",
                    other.to_string(),
                )),
            })?;
        Ok((format!("{host}:{port}"), client))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sentinels_master_credentials_and_db() {
        let spec =
            SentinelSpec::parse("redis+sentinel://telos:p%40ss@10.0.0.1:26379,s2:26380/mymaster/2")
                .unwrap();
        assert_eq!(
            spec.sentinels,
            vec![("10.0.0.1".to_owned(), 26379), ("s2".to_owned(), 26380)]
        );
        assert_eq!(spec.master, "mymaster");
        assert_eq!(spec.db, 2);
        assert!(!spec.tls);
        assert_eq!(
            spec.node_url("10.0.0.9", 6380),
            "redis://telos:p%40ss@10.0.0.9:6380/2"
        );
        let tls = SentinelSpec::parse("rediss+sentinel://[::1]:26379/m").unwrap();
        assert!(tls.tls);
        assert_eq!(tls.sentinels, vec![("::1".to_owned(), 26379)]);
        assert_eq!(tls.node_url("::1", 7000), "rediss://[::1]:7000/0");
    }

    #[test]
    fn refuses_what_is_not_a_sentinel_url_with_a_reason() {
        for (url, reason) in [
            ("redis://h:1/m", "expected"),
            ("redis+sentinel://h:1", "no master name"),
            ("redis+sentinel://h:1/", "no master name"),
            ("redis+sentinel://h/m", "not HOST:PORT"),
            ("redis+sentinel://h:0/m", "bad port"),
            ("redis+sentinel://h:x/m", "bad port"),
            ("redis+sentinel://:1/m", "no host"),
            ("redis+sentinel://h:1,/m", "not HOST:PORT"),
            ("redis+sentinel://h:1/m/x", "not a number"),
        ] {
            let err = SentinelSpec::parse(url).unwrap_err();
            assert!(err.contains(reason), "{url}: {err}");
        }
    }

    #[test]
    fn flags_make_one_url_and_refuse_half_or_double_settings() {
        let url = |u: Option<&str>, s: Option<&str>, m: Option<&str>| {
            url_from_flags(
                u.map(Into::into),
                s.map(Into::into),
                m.map(Into::into),
                "redis://default:6379",
            )
        };
        assert_eq!(
            url(None, Some("a:1,b:2"), Some("m")).unwrap(),
            "redis+sentinel://a:1,b:2/m"
        );
        assert_eq!(url(None, None, None).unwrap(), "redis://default:6379");
        assert_eq!(url(Some("redis://x:1"), None, None).unwrap(), "redis://x:1");
        assert!(url(Some("redis://x:1"), Some("a:1"), Some("m")).is_err());
        assert!(url(Some("redis://x:1"), None, Some("m")).is_err());
        assert!(url(None, Some("a:1"), None).is_err());
        assert!(url(None, None, Some("m")).is_err());
    }
}
