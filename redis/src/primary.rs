//! The primary behind a Sentinel URL: the lookup ([`Resolver`]) and what a
//! [`RedisTarget`] builds on it (its settings check, a client for the
//! current primary). Apart from `target`, which knows only the URL's shape
//! (`crate::sentinel`), so the two never import each other.

use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{ConnectionAddr, IntoConnectionInfo, TlsCertificates, TlsMode};

use crate::sentinel::SentinelSpec;
use crate::target::{RedisTarget, TargetError};

impl RedisTarget {
    /// Checks the settings without connecting: the URL parses (either
    /// form) and the CA is usable.
    pub fn check(&self) -> Result<(), TargetError> {
        match self.sentinel_spec()? {
            None => self.client().map(|_| ()),
            Some(spec) => self.resolver_for(spec).map(|_| ()),
        }
    }

    /// A lookup of the primary through the Sentinels; `None` for a direct
    /// URL.
    pub fn resolver(&self) -> Result<Option<Resolver>, TargetError> {
        self.sentinel_spec()?
            .map(|spec| self.resolver_for(spec))
            .transpose()
    }

    fn resolver_for(&self, spec: SentinelSpec) -> Result<Resolver, TargetError> {
        Resolver::new(self, spec)
    }

    /// A client for the primary: [`client`](Self::client) for a direct URL,
    /// the node the Sentinels name now for a Sentinel URL (one lookup, no
    /// following: for short-lived connections such as a subscription that
    /// is made again when lost).
    pub async fn primary_client(&self) -> Result<redis::Client, redis::RedisError> {
        let as_redis = |e: TargetError| {
            redis::RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "invalid Redis settings",
                e.to_string(),
            ))
        };
        match self.resolver().map_err(as_redis)? {
            None => self.client().map_err(as_redis),
            Some(mut resolver) => resolver.primary().await.map(|(_, client)| client),
        }
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
