//! Pooled channels to other shards: one lazily connected tonic `Channel` per
//! address, so a handoff costs an RPC, not a TCP handshake.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use telos_proto::v1::handoff_client::HandoffClient;
use tonic::transport::{Channel, Endpoint};

/// Connecting to a peer may take this long before the call fails.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Default)]
pub struct Peers {
    channels: Mutex<HashMap<String, Channel>>,
}

impl Peers {
    pub fn channel(&self, addr: &str) -> Result<Channel, tonic::transport::Error> {
        let mut map = self.channels.lock().expect("peers lock");
        if let Some(ch) = map.get(addr) {
            return Ok(ch.clone());
        }
        let ch = Endpoint::from_shared(format!("http://{addr}"))?
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true)
            .connect_lazy();
        map.insert(addr.to_string(), ch.clone());
        Ok(ch)
    }

    pub fn handoff(&self, addr: &str) -> Result<HandoffClient<Channel>, tonic::transport::Error> {
        Ok(HandoffClient::new(self.channel(addr)?))
    }
}
