//! Pooled channels to other shards: one lazily connected tonic `Channel` per
//! address, so a handoff costs an RPC, not a TCP handshake. A keyed shard
//! dials its peers with mutual TLS, presenting its shard certificate and
//! accepting only a shard's.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use telos_proto::v1::handoff_client::HandoffClient;
use telos_tls::TlsKeys;
use telos_tls::grpc::{TlsError, endpoint};
use tonic::transport::Channel;

/// Connecting to a peer may take this long before the call fails.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Default)]
pub struct Peers {
    tls: Option<TlsKeys>,
    channels: Mutex<HashMap<String, Channel>>,
}

impl Peers {
    /// Peers dialed with `tls` (`None`: plaintext, a keyless shard).
    pub fn new(tls: Option<TlsKeys>) -> Self {
        Self {
            tls,
            channels: Mutex::default(),
        }
    }

    pub fn channel(&self, addr: &str) -> Result<Channel, TlsError> {
        let mut map = self.channels.lock().expect("peers lock");
        if let Some(ch) = map.get(addr) {
            return Ok(ch.clone());
        }
        let ch = endpoint(addr, self.tls.as_ref())?
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true)
            .connect_lazy();
        map.insert(addr.to_string(), ch.clone());
        Ok(ch)
    }

    pub fn handoff(&self, addr: &str) -> Result<HandoffClient<Channel>, TlsError> {
        Ok(HandoffClient::new(self.channel(addr)?))
    }
}
