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
//! The lookup (`crate::primary::Resolver::primary`) asks the Sentinels, through redis-rs's
//! `SentinelClient`, which node is the primary of `MASTER`; the library also
//! checks with `ROLE` that the node calls itself the primary. Connections
//! to it are then made exactly as to a plain `redis://` target
//! (`RedisTarget::client_for_url`). Who calls the lookup again, and when, is
//! `directory::sentinel_link`.

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
