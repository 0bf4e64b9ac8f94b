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
use tracing::{info, warn};

use crate::config::WorldConfig;
use crate::game::{WorldDef, is_instance_id};
use crate::handoff::context::Handoff;
use crate::handoff::keys;
use crate::zone::lease::{LeaseState, renew_loop};
use crate::zone::{Hosted, ZoneEnv, ZoneHandle, roster::Roster, spawn_zone};
use telos_redis::directory::{Claim, Directory, ShardInfo, ShardState};
use telos_redis::store::Store;

/// Registry heartbeat period.
const HEARTBEAT: Duration = Duration::from_secs(1);

/// Presence TTL: three heartbeats, so one slow Redis round trip never makes
/// a live shard look dead, while a dead one disappears within 3 s.
pub const PRESENCE_TTL: Duration = Duration::from_secs(3);

/// Coalesce roster changes this long before publishing the online list.
const ONLINE_DEBOUNCE: Duration = Duration::from_millis(50);

/// This shard's hold on one zone's lease.
#[derive(Clone)]
pub struct HeldLease {
    pub state: LeaseState,
    /// Stops the renew loop without fencing the zone (a planned handover).
    pub renew_stop: CancellationToken,
}

pub struct Shard {
    pub cfg: WorldConfig,
    /// Leases of the zones this shard hosts (not instances).
    pub leases: std::sync::Mutex<std::collections::HashMap<String, HeldLease>>,
    /// Zones being closed for an operator transfer right now.
    pub transfer_closing: crate::handoff::transfer::Closing,
    /// The address peers and gates dial (the bound gRPC address).
    pub addr: String,
    pub env: ZoneEnv,
    pub tracker: TaskTracker,
    pub root: CancellationToken,
    draining: AtomicBool,
}

/// Where a player's zone is served.
pub enum ZoneRoute {
    Local(ZoneHandle),
    Remote(ShardInfo),
    Unserved,
}

impl Shard {
    /// Connect to Redis and load the world. Starts nothing yet.
    pub async fn new(
        cfg: WorldConfig,
        addr: String,
        world: WorldDef,
    ) -> anyhow::Result<Arc<Shard>> {
        let directory = Directory::connect(&cfg.redis_url)
            .await
            .with_context(|| format!("connecting to Redis at {}", cfg.redis_url))?;
        let store = Store::connect_with_hash_queue(&cfg.redis_url, cfg.login_hash_queue)
            .await
            .with_context(|| format!("connecting to Redis at {}", cfg.redis_url))?;
        for zone in &cfg.zones {
            if world.zone(zone).is_none() {
                anyhow::bail!("invalid setting --zones (TELOS_ZONES): unknown zone {zone:?}");
            }
        }
        let zone_ids: Vec<String> = world
            .zones
            .values()
            .filter(|z| !z.instanced)
            .map(|z| z.id.clone())
            .collect();
        directory.register_zones(&zone_ids).await?;
        let keys = match &cfg.keys {
            Some(dir) => Some(
                keys::load(dir)
                    .with_context(|| "invalid setting --keys (TELOS_KEYS)".to_string())?,
            ),
            None => {
                warn!("no --keys: this shard is keyless and never hands a player off");
                None
            }
        };
        let tracker = TaskTracker::new();
        let root = CancellationToken::new();
        let handoff = Arc::new(Handoff::new(
            &cfg.shard_id,
            &addr,
            keys,
            directory.clone(),
            store.clone(),
            cfg.handoff_version,
            crate::handoff::context::Tasks {
                tracker: tracker.clone(),
                stop: root.clone(),
            },
        ));
        let env = ZoneEnv {
            shard_id: cfg.shard_id.clone(),
            world: Arc::new(world),
            store,
            directory,
            hosted: Hosted::default(),
            roster: Roster::default(),
            tick: cfg.tick,
            save_interval: cfg.save_interval,
            handoff,
            tracker: tracker.clone(),
            root: root.clone(),
            instances: Arc::default(),
        };
        Ok(Arc::new(Shard {
            cfg,
            addr,
            env,
            tracker,
            root,
            draining: AtomicBool::new(false),
            leases: Default::default(),
            transfer_closing: Default::default(),
        }))
    }

    pub fn id(&self) -> &str {
        &self.cfg.shard_id
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    pub fn set_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// Start the background loops: registry heartbeat, online list, and the
    /// boot-zone claimer (which also re-claims a boot zone whose lease came
    /// free again, e.g. after a fence).
    pub fn start(self: &Arc<Self>) {
        let me = self.clone();
        self.tracker.spawn(async move { me.heartbeat_loop().await });
        let me = self.clone();
        self.tracker.spawn(async move { me.online_loop().await });
        let me = self.clone();
        self.tracker.spawn(async move { me.boot_zone_loop().await });
        let me = self.clone();
        self.tracker.spawn(async move { me.orphan_loop().await });
        self.tracker
            .spawn(crate::handoff::transfer::transfer_watcher(self.clone()));
    }

    /// The live, compatible shard with the most headroom (players plus
    /// live drain reservations against capacity; ties to the lowest id):
    /// the same rule the drain selector applies, read-only.
    async fn orphan_claimer(&self) -> Option<String> {
        let dir = &self.env.directory;
        let shards = dir.shards().await.ok()?;
        let mut best: Option<(i128, String)> = None;
        for s in shards {
            if s.state != ShardState::Live || s.handoff_version != self.cfg.handoff_version {
                continue;
            }
            let reserved: u64 = dir
                .drain_reservations(&s.id)
                .await
                .map(|r| r.iter().map(|(_, count, _)| count).sum())
                .unwrap_or(0);
            let headroom = s.capacity as i128 - s.players as i128 - reserved as i128;
            let better = match &best {
                None => true,
                Some((h, id)) => headroom > *h || (headroom == *h && s.id < *id),
            };
            if better {
                best = Some((headroom, s.id));
            }
        }
        best.map(|(_, id)| id)
    }

    /// A zone with a pending transfer is never (re)claimed by the boot-zone
    /// or orphan loops: the transfer decides where it goes.
    async fn transfer_pending(&self, zone: &str) -> bool {
        self.transfer_closing.contains(zone)
            || !matches!(self.env.directory.transfer(zone).await, Ok(None))
    }

    /// A shard that died without draining leaves its zones' leases to
    /// expire. Every live shard looks for zones with no live lease once per
    /// lease TTL and asks the same director-owned selector that drains use
    /// who should take each; only the chosen shard claims it (and the claim
    /// is atomic, so two never both win). With the defaults a dead shard's
    /// zones are served again within lease TTL + one period: 6 s + 6 s.
    async fn orphan_loop(&self) {
        let period = self.cfg.lease_ttl;
        loop {
            tokio::select! {
                _ = self.root.cancelled() => return,
                _ = tokio::time::sleep(period) => {}
            }
            if self.is_draining() {
                continue;
            }
            let orphans = match self.env.directory.orphaned_zones().await {
                Ok(z) => z,
                Err(e) => {
                    warn!(error = %e, "listing orphaned zones failed");
                    continue;
                }
            };
            if orphans.is_empty() {
                continue;
            }
            // One placement for all orphans of this round, computed from the
            // same registry + reservation view on every shard, so they agree
            // on who claims without writing holds for one another.
            let Some(chosen) = self.orphan_claimer().await else {
                continue;
            };
            if chosen != self.cfg.shard_id {
                continue;
            }
            for zone in orphans {
                if self.env.world.zone(&zone).is_none_or(|d| d.instanced)
                    || self.transfer_pending(&zone).await
                {
                    continue;
                }
                match self.host_zone(&zone).await {
                    Ok(Some(_)) => info!(zone, "claimed an orphaned zone"),
                    Ok(None) => {}
                    Err(e) => warn!(zone, error = %e, "claiming an orphaned zone failed"),
                }
            }
        }
    }

    /// This shard's registry entry and the players it hosts per zone, both
    /// counted from one roster snapshot so they always agree. Every hosted
    /// (non-instance) zone is listed, 0 when empty; an instance's players
    /// count for its template.
    fn presence(&self) -> (ShardInfo, Vec<(String, u64)>) {
        let players = self.env.roster.snapshot();
        let mut counts: std::collections::BTreeMap<String, u64> = self
            .env
            .hosted
            .ids()
            .into_iter()
            .filter(|z| !is_instance_id(z))
            .map(|z| (z, 0))
            .collect();
        for p in &players {
            let zone = crate::game::template_of(&p.zone).to_string();
            *counts.entry(zone).or_default() += 1;
        }
        let info = ShardInfo {
            id: self.cfg.shard_id.clone(),
            addr: self.addr.clone(),
            state: if self.is_draining() {
                ShardState::Draining
            } else {
                ShardState::Live
            },
            players: players.len() as u64,
            capacity: self.cfg.capacity,
            handoff_version: self.cfg.handoff_version,
        };
        (info, counts.into_iter().collect())
    }

    /// Publish the registry entry, with its per-zone counts, now (e.g.
    /// `draining` at once); it replaces the previous entry whole.
    pub async fn heartbeat_now(&self) {
        let (info, zone_players) = self.presence();
        metrics::gauge!("telos_players", "shard" => self.cfg.shard_id.clone())
            .set(info.players as f64);
        if let Err(e) = self
            .env
            .directory
            .heartbeat_with_zones(&info, &zone_players, PRESENCE_TTL)
            .await
        {
            metrics::counter!("telos_redis_errors_total", "op" => "heartbeat").increment(1);
            warn!(error = %e, "registry heartbeat failed");
        }
    }

    async fn heartbeat_loop(&self) {
        let mut every = tokio::time::interval(HEARTBEAT);
        loop {
            tokio::select! {
                _ = self.root.cancelled() => return,
                _ = every.tick() => {}
            }
            self.heartbeat_now().await;
        }
    }

    async fn online_loop(&self) {
        loop {
            tokio::select! {
                _ = self.root.cancelled() => return,
                _ = self.env.roster.changed() => tokio::time::sleep(ONLINE_DEBOUNCE).await,
                _ = tokio::time::sleep(HEARTBEAT) => {}
            }
            let players = self.env.roster.snapshot();
            if let Err(e) = self
                .env
                .directory
                .publish_online(&self.cfg.shard_id, &players, PRESENCE_TTL)
                .await
            {
                metrics::counter!("telos_redis_errors_total", "op" => "publish_online")
                    .increment(1);
                warn!(error = %e, "publishing the online list failed");
            }
        }
    }

    async fn boot_zone_loop(&self) {
        let period = self.cfg.lease_ttl / 2;
        loop {
            for zone in &self.cfg.zones {
                if self.env.hosted.get(zone).is_none()
                    && !self.is_draining()
                    && !self.transfer_pending(zone).await
                    && let Err(e) = self.host_zone(zone).await
                {
                    warn!(zone, error = %e, "claiming boot zone failed");
                }
            }
            tokio::select! {
                _ = self.root.cancelled() => return,
                _ = tokio::time::sleep(period) => {}
            }
        }
    }

    /// Claim `zone`'s lease and start its actor and renew loop. `Ok(None)`
    /// when another shard holds the lease.
    pub async fn host_zone(&self, zone: &str) -> anyhow::Result<Option<ZoneHandle>> {
        if is_instance_id(zone) {
            anyhow::bail!("instance zones take no lease: {zone}");
        }
        if let Some(h) = self.env.hosted.get(zone) {
            return Ok(Some(h));
        }
        let def = self
            .env
            .world
            .zone(zone)
            .cloned()
            .with_context(|| format!("unknown zone {zone}"))?;
        let sent_at = Instant::now();
        let claim = self
            .env
            .directory
            .claim_zone(zone, &self.cfg.shard_id, self.cfg.lease_ttl)
            .await?;
        let generation = match claim {
            Claim::Acquired { r#gen } => r#gen,
            Claim::Held { owner, r#gen } => {
                info!(
                    zone,
                    owner,
                    generation = r#gen,
                    "zone lease held by another shard"
                );
                return Ok(None);
            }
        };
        let lease = LeaseState::new(generation, self.cfg.lease_ttl, sent_at);
        let handle = spawn_zone(
            self.env.clone(),
            zone,
            def,
            Some(lease.clone()),
            &self.tracker,
            &self.root,
        );
        info!(zone, generation, "zone lease acquired");
        self.start_renewing(zone, &lease, &handle);
        // When the zone stops (fence or shutdown), give the lease back if it
        // is still ours at this generation, so a peer need not wait the TTL.
        let (dir, shard, zone_id, token) = (
            self.env.directory.clone(),
            self.cfg.shard_id.clone(),
            zone.to_string(),
            handle.cancel_token().clone(),
        );
        self.tracker.spawn(async move {
            token.cancelled().await;
            if let Err(e) = dir.release_zone(&zone_id, &shard, generation).await {
                warn!(zone = zone_id, error = %e, "releasing the lease failed; it expires by TTL");
            }
        });
        Ok(Some(handle))
    }

    /// Keep `zone`'s lease renewed; the loop fences the zone on loss and
    /// stops quietly when the lease is handed over.
    pub fn start_renewing(&self, zone: &str, lease: &LeaseState, handle: &ZoneHandle) {
        let renew_stop = handle.cancel_token().child_token();
        self.leases.lock().expect("leases lock").insert(
            zone.to_string(),
            HeldLease {
                state: lease.clone(),
                renew_stop: renew_stop.clone(),
            },
        );
        self.tracker.spawn(renew_loop(
            self.env.directory.clone(),
            zone.to_string(),
            self.cfg.shard_id.clone(),
            lease.clone(),
            handle.cancel_token().clone(),
            renew_stop,
        ));
    }

    pub fn held_lease(&self, zone: &str) -> Option<HeldLease> {
        self.leases.lock().expect("leases lock").get(zone).cloned()
    }

    pub fn forget_lease(&self, zone: &str) {
        self.leases.lock().expect("leases lock").remove(zone);
    }

    /// Where the zone of `room` is served right now.
    pub async fn route(&self, zone: &str) -> anyhow::Result<ZoneRoute> {
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
        self.root.cancel();
        self.tracker.close();
        if tokio::time::timeout(deadline, self.tracker.wait())
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
