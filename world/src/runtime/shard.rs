//! The shard runtime: which zones this process hosts, their leases, the
//! registry heartbeat, and the one shutdown story.
//!
//! A root [`CancellationToken`] has a child per zone; a [`TaskTracker`]
//! holds every task so shutdown can wait on them with a deadline.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, info, info_span, warn};

use super::closing::Closing;
use super::host_lock::{self, HostLock, Predecessors};
use super::leases::{Confirm, LeaseKeeper};
use crate::config::WorldConfig;
use crate::handoff::context::{Handoff, Shared, Tasks};
use crate::handoff::keys;
use crate::model::ids::{is_instance_id, template_of};
use crate::model::{Game, ZoneInfo, ZoneModel};
use crate::zone::comm::{Comm, Outgoing};
use crate::zone::lease::LeaseState;
use crate::zone::{
    Hosted, Opening, Taken, ZoneEnv, ZoneHandle, roster::Roster, spawn_adopted_zone, spawn_zone,
};
use telos_redis::directory::{Directory, DirectoryError, ShardInfo};
use telos_redis::store::Store;

/// One shard. Its parts are the runtime's own (the zone moves and the
/// placement loops beside it reach them); the layers above ask through
/// the accessors below.
pub struct Shard {
    pub(super) cfg: WorldConfig,
    /// Leases of the zones this shard hosts (not instances).
    pub(super) leases: LeaseKeeper,
    /// Zones being closed for an operator transfer right now.
    pub(super) transfer_closing: Closing,
    /// Zones being handed over to a peer right now (drain or `HandoverZone`).
    pub(super) handing_over: Closing,
    /// The address peers and gates dial (the bound gRPC address).
    pub(super) addr: String,
    /// What every zone actor shares (the store, the directory, the game…).
    pub(super) env: ZoneEnv,
    draining: AtomicBool,
    /// What `/readyz` reports (see [`Shard::readiness`]).
    pub(super) ready: super::readiness::Readiness,
    /// Cancelled when a newer process of this shard id has taken over the
    /// registry entry: this process stops (see [`Shard::superseded`]).
    pub(super) superseded: CancellationToken,
    /// What the zones send beyond the shard (`tell`, `chat`), until
    /// [`super::start`] hands it to the comm task.
    pub(super) comm: std::sync::Mutex<Option<tokio::sync::mpsc::Receiver<Outgoing>>>,
    /// This process's lock file (`--data-dir`), held for its life.
    _host_lock: Option<HostLock>,
}

/// With `--data-dir`, take the shard's lock file: taken at once, every
/// earlier process of this shard id is gone, and `directory` takes their
/// live leases over at once.
fn prove_predecessors_gone(
    cfg: &WorldConfig,
    directory: Directory,
) -> anyhow::Result<(Directory, Option<HostLock>)> {
    let Some(dir) = &cfg.data_dir else {
        return Ok((directory, None));
    };
    match host_lock::take(dir, &cfg.shard_id)? {
        Predecessors::Gone(lock) => {
            info!(shard = %cfg.shard_id, "lock file taken at once: an earlier process of this shard is gone; its leases are taken over without waiting");
            Ok((directory.with_predecessors_gone(), Some(lock)))
        }
        Predecessors::MaybeAlive => {
            warn!(shard = %cfg.shard_id, "another live process of this shard holds its lock file; its leases are waited out");
            Ok((directory, None))
        }
    }
}

/// Why a zone could not be hosted here.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("instance zones take no lease: {0}")]
    Instance(String),
    #[error("unknown zone {0}")]
    UnknownZone(String),
    #[error("the game could not open zone {0}")]
    GameRefused(String),
    #[error("claiming the lease failed: {0}")]
    Directory(#[from] DirectoryError),
}

/// Where a player's zone is served.
pub enum ZoneRoute {
    Local(ZoneHandle),
    Remote(ShardInfo),
    Unserved,
}

impl Shard {
    /// Connect to Redis for a shard running `game`. Starts nothing yet.
    pub async fn new(
        cfg: WorldConfig,
        addr: String,
        game: Arc<dyn Game>,
    ) -> anyhow::Result<Arc<Shard>> {
        // The errors name the (redacted) URL themselves.
        let directory = Directory::connect(&cfg.redis).await?;
        super::topology::say(&directory, cfg.redis.is_sentinel()).await;
        // One fencing token per process (issue 17, defect 2): every lease
        // this process claims, renews or releases and every heartbeat is
        // bound to it, so a process restarted with this shard id never
        // writes under its predecessor's lease, and a predecessor that was
        // only paused finds itself superseded.
        let incarnation = directory.mint_incarnation(&cfg.shard_id).await?;
        let (directory, host_lock) =
            prove_predecessors_gone(&cfg, directory.for_incarnation(incarnation))?;
        info!(shard = %cfg.shard_id, incarnation, "process incarnation minted");
        super::events::started(&directory, &cfg.shard_id, &addr).await;
        let store = Store::connect_with_hash_queue(&cfg.redis, cfg.login_hash_queue).await?;
        register_zones(&directory, &*game, &cfg.zones).await?;
        let keys = load_keys(&directory, &cfg).await?;
        let tracker = TaskTracker::new();
        let root = CancellationToken::new();
        let handoff = Arc::new(Handoff::new(
            &cfg.shard_id,
            &addr,
            keys,
            cfg.handoff_version,
            Shared {
                directory: directory.clone(),
                store: store.clone(),
                game: game.clone(),
                tasks: Tasks {
                    tracker: tracker.clone(),
                    stop: root.clone(),
                },
            },
        ));
        let (comm, comm_rx) = Comm::new();
        let env = ZoneEnv {
            shard_id: cfg.shard_id.clone(),
            game,
            store,
            directory,
            hosted: Hosted::default(),
            roster: Roster::default(),
            tick: cfg.tick,
            save_interval: cfg.save_interval,
            handoff,
            tracker: tracker.clone(),
            root: root.clone(),
            chat_limit: cfg.chat_limit,
            comm,
            instances: Arc::default(),
        };
        let leases = LeaseKeeper::new(
            env.directory.clone(),
            &cfg.shard_id,
            cfg.lease_ttl,
            tracker.clone(),
        );
        Ok(Arc::new(Shard {
            cfg,
            addr,
            env,
            draining: AtomicBool::new(false),
            ready: Default::default(),
            superseded: CancellationToken::new(),
            leases,
            transfer_closing: Default::default(),
            handing_over: Default::default(),
            comm: std::sync::Mutex::new(Some(comm_rx)),
            _host_lock: host_lock,
        }))
    }

    pub fn id(&self) -> &str {
        &self.cfg.shard_id
    }

    /// The shard's settings.
    pub fn config(&self) -> &WorldConfig {
        &self.cfg
    }

    pub fn store(&self) -> &Store {
        &self.env.store
    }

    pub fn directory(&self) -> &Directory {
        &self.env.directory
    }

    pub fn game(&self) -> &Arc<dyn Game> {
        &self.env.game
    }

    /// The player-handoff state (pending and frozen players, peers, keys).
    pub fn handoff(&self) -> &Arc<Handoff> {
        &self.env.handoff
    }

    /// The zones running here.
    pub fn hosted(&self) -> &Hosted {
        &self.env.hosted
    }

    /// Who is online on this shard.
    pub fn roster(&self) -> &Roster {
        &self.env.roster
    }

    /// What a zone actor of this shard is built with (benchmarks build
    /// one actor on a real shard's wiring).
    pub fn zone_env(&self) -> &ZoneEnv {
        &self.env
    }

    /// The leases this shard holds.
    pub fn leases(&self) -> &LeaseKeeper {
        &self.leases
    }

    /// Where the shard's tasks run (shutdown waits for them).
    pub fn tracker(&self) -> &TaskTracker {
        &self.env.tracker
    }

    /// Cancelled when the shard stops.
    pub fn stopped(&self) -> &CancellationToken {
        &self.env.root
    }

    /// Not ready from now on (`/readyz`, `grpc.health.v1`), whatever else
    /// holds: called at a stop signal, before the drain or the stop.
    pub fn stop_being_ready(&self) {
        self.ready.stop();
    }

    /// `Ok` while the shard can take players; else why not.
    pub fn readiness(&self) -> Result<(), String> {
        self.ready.check(self.is_draining())
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    pub fn set_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// Claim `zone`'s lease and start its actor and renew loop; the actor
    /// already running here if there is one. `Ok(None)` when another shard
    /// holds the lease, or another caller here is opening the zone right
    /// now (it holds the zone's [`Opening`] slot across its claim and build,
    /// so two callers never both spawn).
    pub async fn host_zone(&self, zone: &str) -> Result<Option<ZoneHandle>, HostError> {
        if is_instance_id(zone) {
            return Err(HostError::Instance(zone.to_string()));
        }
        let slot = match self.env.hosted.reserve(zone) {
            Ok(slot) => slot,
            Err(Taken::Running(h)) => return Ok(Some(h)),
            Err(Taken::Opening) => return Ok(None),
        };
        if self.env.game.zone(zone).is_none() {
            return Err(HostError::UnknownZone(zone.to_string()));
        }
        let Some(lease) = self.leases.claim(zone).await? else {
            return Ok(None);
        };
        let Some(model) = self.env.game.open_zone(zone) else {
            // Ours now, but the game cannot build it: give the lease back
            // at once rather than hold a zone nobody serves.
            let released = self.leases.release(zone, lease.generation()).await;
            if let Err(e) = released {
                warn!(zone, error = %e, "releasing the lease failed; it expires by TTL");
            }
            return Err(HostError::GameRefused(zone.to_string()));
        };
        let handle = spawn_zone(
            self.env.clone(),
            slot,
            model,
            Some(lease.clone()),
            &self.env.tracker,
            &self.env.root,
        );
        info!(zone, generation = lease.generation(), "zone lease acquired");
        self.leases.hold(zone, &lease, handle.cancel_token());
        Ok(Some(handle))
    }

    /// Build and run the zone of `slot` ahead of its lease: it takes no one
    /// until the lease is confirmed ([`Confirm`]), and is un-adopted if that
    /// has not happened by `deadline`. Drain adoptions and transfer targets
    /// differ only in how they confirm.
    pub fn build_unconfirmed(
        self: &Arc<Self>,
        slot: Opening,
        model: Box<dyn ZoneModel>,
        how: Confirm,
        deadline: Instant,
    ) {
        let zone = slot.zone().to_string();
        let zone = zone.as_str();
        let lease = LeaseState::unconfirmed(self.cfg.lease_ttl);
        let handle = spawn_adopted_zone(
            self.env.clone(),
            slot,
            model,
            lease.clone(),
            &self.env.tracker,
            &self.env.root,
        );
        let (shard, zone) = (self.clone(), zone.to_string());
        let span = match how {
            Confirm::Flip => info_span!("adopt", zone = %template_of(&zone)),
            Confirm::Completion => info_span!("transfer_target", zone = %template_of(&zone)),
        };
        self.env.tracker.spawn(
            async move {
                // This very actor, not a later one built for the same zone.
                let running = || {
                    shard
                        .env
                        .hosted
                        .get(&zone)
                        .is_some_and(|h| h.same_actor(&handle))
                };
                let stop = handle.cancel_token();
                let open_state = |generation| {
                    let handle = handle.clone();
                    async move { handle.restore(generation).await }
                };
                let confirmed = shard
                    .leases
                    .confirm(&zone, &lease, how, stop, running, open_state, deadline)
                    .await;
                let generation = lease.generation();
                match (confirmed, how) {
                    (true, Confirm::Flip) => {
                        info!(zone, generation, "adoption confirmed: the flip landed")
                    }
                    (true, Confirm::Completion) => {
                        info!(zone, generation, "transfer target: zone open")
                    }
                    (false, _) if stop.is_cancelled() || !running() => {}
                    (false, Confirm::Flip) => {
                        if handle.unadopt().await.is_gone() {
                            warn!(zone, "adoption never confirmed: un-adopted");
                        }
                    }
                    (false, Confirm::Completion) => {
                        if handle.unadopt().await.is_gone() {
                            warn!(
                                zone,
                                "transfer never completed here: pre-built zone torn down"
                            );
                        }
                    }
                }
            }
            .instrument(span),
        );
    }

    /// Where the zone of `room` is served right now.
    pub async fn route(&self, zone: &str) -> Result<ZoneRoute, DirectoryError> {
        // A pending transfer moves routing to its target at once.
        if let Some(t) = self.env.directory.transfer(zone).await?
            && t.to != self.cfg.shard_id
        {
            return Ok(match self.env.directory.shard_for_zone(zone).await? {
                Some(info) => ZoneRoute::Remote(info),
                None => ZoneRoute::Unserved,
            });
        }
        let local = self.env.hosted.get(zone);
        if let Some(h) = local.as_ref().filter(|h| h.accepts_arrivals()) {
            return Ok(ZoneRoute::Local(h.clone()));
        }
        // Not open here: a zone built ahead of its lease (an adoption whose
        // flip has not landed, a transfer target) or one stopping. Where the
        // directory says another live shard serves it, go there — never
        // wait on an opening that may never confirm while its owner serves
        // it; otherwise wait on the one opening here.
        Ok(match self.env.directory.shard_for_zone(zone).await? {
            Some(info) if info.id != self.cfg.shard_id => ZoneRoute::Remote(info),
            _ => match local {
                Some(h) => ZoneRoute::Local(h),
                None => ZoneRoute::Unserved,
            },
        })
    }

    /// Stop cleanly (SIGINT): save every player, close their sessions so
    /// their gates resume them elsewhere, release leases, leave the registry.
    pub async fn shutdown(&self, deadline: Duration) {
        info!(zones = ?self.env.hosted.ids(), "shutting down");
        let zones = self.env.hosted.all();
        let mut stops = tokio::task::JoinSet::new();
        for z in zones.clone() {
            stops.spawn(async move { z.shutdown("The world is restarting; hold on...").await });
        }
        if tokio::time::timeout(deadline, stops.join_all())
            .await
            .is_err()
        {
            warn!("zones did not stop within the deadline");
        }
        for z in &zones {
            z.cancel_token().cancel();
        }
        self.env.root.cancel();
        self.env.tracker.close();
        if tokio::time::timeout(deadline, self.env.tracker.wait())
            .await
            .is_err()
        {
            warn!("background tasks did not finish within the deadline");
        }
        if let Err(e) = self.env.directory.deregister(&self.cfg.shard_id).await {
            warn!(error = %e, "leaving the registry failed; the entry expires by TTL");
        }
    }
}

/// The game's zones, registered (the instanced ones apart), once the boot
/// zones asked for are known to be the game's.
async fn register_zones(
    directory: &Directory,
    game: &dyn Game,
    boot: &[String],
) -> anyhow::Result<()> {
    for zone in boot {
        if game.zone(zone).is_none() {
            anyhow::bail!("invalid setting --zones (TELOS_ZONES): unknown zone {zone:?}");
        }
    }
    let (instanced, zone_ids): (Vec<_>, Vec<_>) =
        game.zones().into_iter().partition(|z| z.instanced);
    let ids = |zones: Vec<ZoneInfo>| zones.into_iter().map(|z| z.id).collect::<Vec<_>>();
    directory.register_zones(&ids(zone_ids)).await?;
    directory.register_instanced(&ids(instanced)).await?;
    Ok(())
}

/// The shard's keys (`--keys`), and the cluster marked keyed; a keyless
/// shard serves every port in plaintext without a role check, so in a
/// keyed cluster it would let anyone move the cluster's zones through its
/// Admin service: refused.
async fn load_keys(
    directory: &Directory,
    cfg: &WorldConfig,
) -> anyhow::Result<Option<keys::ClusterKeys>> {
    let Some(dir) = &cfg.keys else {
        if directory.is_keyed_cluster().await? {
            anyhow::bail!(
                "this Redis serves a keyed cluster (mutual TLS); a keyless shard would \
                 open it to anyone who can reach its port: start it with --keys"
            );
        }
        warn!("no --keys: this shard is keyless and never hands a player off");
        return Ok(None);
    };
    let keys = keys::load(dir, &cfg.shard_id)
        .with_context(|| "invalid setting --keys (TELOS_KEYS)".to_string())?;
    directory.mark_keyed_cluster().await?;
    Ok(Some(keys))
}
