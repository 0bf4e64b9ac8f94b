//! Two keyed shards on one Redis, the handoff tests' cluster: `shard-a`
//! hosts the city, `shard-b` every other starter zone; and the snapshots
//! and `Prepare`s the tests send them.

use std::time::Duration;

use ed25519_dalek::SigningKey;
use telos_proto::v1::PrepareRequest;
use telos_proto::v1::handoff_client::HandoffClient;
use telos_testkit::RedisServer;
use telos_testkit::keys::TempKeys;
use telos_testkit::play::Channels;
use telos_testkit::process::{Proc, start_keyed_world};
use telos_testkit::world::starter_zones;
use telos_tls::{Role, TlsKeys};
use telos_world::game::Character;
use telos_world::handoff::keys::{self, ClusterKeys};
use telos_world::handoff::snapshot::{PlayerSnapshot, sign_snapshot};
use tonic::transport::Channel;

/// Bounds a shard's start (a hang, not a performance claim).
pub const READY: Duration = Duration::from_secs(20);

pub struct Cluster {
    pub _redis: RedisServer,
    pub redis_url: String,
    /// The key folder the shards were started on, removed with the cluster.
    pub _keys_dir: TempKeys,
    pub keys: ClusterKeys,
    pub a: Proc,
    pub b: Proc,
}

/// Start the cluster and wait until both shards serve their zones (a
/// shard prints its address before its zones' leases are claimed).
pub async fn cluster() -> anyhow::Result<Cluster> {
    let redis = RedisServer::start()?;
    let keys_dir = TempKeys::generate()?;
    let others: Vec<String> = starter_zones()
        .into_iter()
        .filter(|z| z != "city")
        .collect();
    let others: Vec<&str> = others.iter().map(String::as_str).collect();
    let no_flags: [&str; 0] = [];
    let a = start_keyed_world(
        "shard-a",
        &redis.url,
        &["city"],
        keys_dir.path(),
        None,
        &no_flags,
    )?;
    let b = start_keyed_world(
        "shard-b",
        &redis.url,
        &others,
        keys_dir.path(),
        None,
        &no_flags,
    )?;
    a.wait_log("zone started zone=city", READY).await?;
    for zone in &others {
        b.wait_log(&format!("zone started zone={zone}"), READY)
            .await?;
    }
    Ok(Cluster {
        redis_url: redis.url.clone(),
        _redis: redis,
        keys: keys::load(keys_dir.path(), "shard-a")?,
        _keys_dir: keys_dir,
        a,
        b,
    })
}

impl Cluster {
    /// The gate certificate a Play client of these keyed shards presents.
    pub fn gate(&self) -> TlsKeys {
        self._keys_dir.tls(Role::Gate)
    }

    /// A `Handoff` client on `addr` presenting shard `id`'s certificate,
    /// as that peer shard dials (over the testkit's channels): a request
    /// naming a source speaks for the caller's own shard only.
    pub fn client_as(&self, id: &str, addr: &str) -> anyhow::Result<HandoffClient<Channel>> {
        let channels = Channels::tls(self._keys_dir.shard_tls(id));
        Ok(HandoffClient::new(channels.channel(addr)?))
    }
}

/// A snapshot of `name` leaving `shard-a` for `to_shard`, into `target`.
pub fn snapshot(name: &str, to_shard: &str, target: &str, epoch: u64) -> PlayerSnapshot {
    let mut ch = Character::new(name, target);
    ch.add_journal("carried across");
    PlayerSnapshot::build(
        &ch, epoch, "shard-a", to_shard, target, 1, 0, "pid", "conn-x",
    )
}

/// The `Prepare` for `s`, its snapshot signed with `key`.
pub fn request(s: &PlayerSnapshot, key: &SigningKey) -> PrepareRequest {
    let encoded = s.encode();
    PrepareRequest {
        snapshot_sig: sign_snapshot(key, &encoded),
        snapshot: encoded,
        epoch: s.epoch,
        target_room: s.target_room.clone(),
        character: s.character.clone(),
        from_shard_id: s.from_shard.clone(),
        to_shard_id: s.to_shard.clone(),
        handoff_version: telos_world::handoff::HANDOFF_VERSION,
        // No source address: the destination looks "shard-a" up instead.
        from_shard_addr: String::new(),
        arrived_from: String::new(),
        in_place: false,
    }
}
