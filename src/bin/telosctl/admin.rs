//! `telosctl --shard ADDR …`: the operator's calls through a shard's Admin
//! service, with the operator certificate on a keyed cluster.

use std::time::Duration;

use telos_proto::v1::admin_client::AdminClient;
use telos_proto::v1::{StatusRequest, TransferZoneRequest};
use telos_redis::status::{ClusterStatus, render};
use telos_tls::{Role, TlsKeys};
use tokio::time::Instant;
use tonic::transport::Channel;

use crate::Cli;

/// A shard that does not answer within this long is reported, not waited on.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// How often `transfer --wait` asks the shard again.
const WAIT_POLL: Duration = Duration::from_millis(100);

/// Told when a keyless telosctl cannot talk to a shard: a keyed shard
/// speaks only TLS and wants the operator certificate.
const NEEDS_KEYS: &str = " (a keyed cluster's shard accepts only TLS with the operator certificate: telosctl needs --keys DIR)";

/// A shard's Admin service, dialled.
pub struct Admin {
    client: AdminClient<Channel>,
    addr: String,
    /// Dialled without `--keys`, in plaintext.
    keyless: bool,
}

impl Admin {
    /// A call's failure. Plaintext to a TLS listener connects (the HTTP/2
    /// preface is only sent) and fails at the first call, at the transport:
    /// that failure says what is missing, as a refused connect does.
    fn refused(&self, call: &str, s: &tonic::Status) -> anyhow::Error {
        use tonic::Code;
        let transport = matches!(
            s.code(),
            Code::Unavailable | Code::Unknown | Code::Internal | Code::Cancelled
        );
        if self.keyless && transport {
            anyhow::anyhow!(
                "cannot reach shard {}: {}{NEEDS_KEYS}",
                self.addr,
                s.message()
            )
        } else {
            anyhow::anyhow!("{call} refused: {}", s.message())
        }
    }
}

pub async fn connect(cli: &Cli) -> anyhow::Result<Admin> {
    let addr = cli.shard.as_deref().expect("called with --shard");
    let keys = cli
        .keys
        .as_ref()
        .map(|dir| TlsKeys::load(dir, Role::Operator))
        .transpose()
        .map_err(|e| anyhow::anyhow!("invalid --keys (TELOS_KEYS): {e}"))?;
    let channel = telos_tls::grpc::endpoint(addr, keys.as_ref())?
        .connect_timeout(CALL_TIMEOUT)
        .timeout(CALL_TIMEOUT)
        .connect()
        .await
        .map_err(|e| {
            let hint = if cli.keys.is_none() { NEEDS_KEYS } else { "" };
            anyhow::anyhow!("cannot reach shard {addr}: {}{hint}", chain(&e))
        })?;
    Ok(Admin {
        client: AdminClient::new(channel),
        addr: addr.to_string(),
        keyless: cli.keys.is_none(),
    })
}

/// A transport error's whole chain: the TLS reason is at its end. A layer
/// that says what the one before it said (hyper's and tonic's wrappers
/// both say `tcp connect error`, and some repeat their source's text) is
/// said once.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

async fn fetch(admin: &Admin) -> anyhow::Result<ClusterStatus> {
    let reply = admin
        .client
        .clone()
        .status(StatusRequest {})
        .await
        .map_err(|s| admin.refused("Admin.Status", &s))?;
    Ok(serde_json::from_str(&reply.into_inner().json)?)
}

pub async fn status(admin: &Admin, json: bool) -> anyhow::Result<()> {
    let status = fetch(admin).await?;
    if json {
        println!("{}", crate::status_json::contract_json(&status));
    } else {
        print!("{}", render(&status));
    }
    Ok(())
}

pub async fn transfer(
    admin: &Admin,
    zone: &str,
    to: &str,
    wait: Option<u64>,
) -> anyhow::Result<()> {
    let reply = admin
        .client
        .clone()
        .transfer_zone(TransferZoneRequest {
            zone_id: zone.to_string(),
            to_shard_id: to.to_string(),
        })
        .await
        .map_err(|s| admin.refused("transfer", &s))?
        .into_inner();
    let from = reply.from_shard_id;
    match reply.outcome.as_str() {
        "already_there" => {
            println!("{zone} is already on {to}");
            return Ok(());
        }
        "already_pending" => println!("transfer of {zone} from {from} to {to} is already pending"),
        _ => println!("transfer of {zone} from {from} to {to} recorded"),
    }
    let Some(secs) = wait else { return Ok(()) };
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let status = fetch(admin).await?;
        if let Some(z) = status.zones.iter().find(|z| z.id == zone)
            && z.transfer.is_none()
            && z.owner.as_deref() == Some(to)
        {
            println!("transfer of {zone} to {to} completed");
            return Ok(());
        }
        if Instant::now() >= deadline {
            anyhow::bail!("transfer of {zone} to {to} did not complete within {secs} s");
        }
        tokio::time::sleep(WAIT_POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::chain;

    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);
    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }
    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|l| l as _)
        }
    }

    #[test]
    fn a_layer_repeating_the_one_before_is_said_once() {
        let refused = Layer("Connection refused", None);
        let inner = Layer("tcp connect error", Some(Box::new(refused)));
        let outer = Layer("tcp connect error", Some(Box::new(inner)));
        let top = Layer("transport error", Some(Box::new(outer)));
        assert_eq!(
            chain(&top),
            "transport error: tcp connect error: Connection refused"
        );
    }
}
