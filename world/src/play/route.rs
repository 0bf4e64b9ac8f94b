//! Routing: where an authenticated character plays. Taken over where it is
//! online already, redirected to the shard that serves its zone, put into
//! play here, or parked while its zone is between owners.

use std::sync::Arc;
use std::time::Duration;

use telos_proto::v1::{Redirect, ServerFrame, server_frame::Frame};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{info, warn};

use telos_redis::store::Claimant;

use crate::model::Tier;
use crate::model::ids::zone_of;
use crate::runtime::shard::{Shard, ZoneRoute};

use super::attach::{AttachError, attach_local, resolve_room};
use super::forward::InPlay;
use super::frames::{frame, send_closed};

/// How long a login waits for the character's zone to be served (a zone
/// between owners, a shard restarting) before answering "try again".
const UNSERVED_WAIT: Duration = Duration::from_secs(10);
/// Parked opens re-check this often: short enough that a transfer's parked
/// login gets in within ~50 ms of the zone opening, cheap enough (two Redis
/// reads) for a crowd of parked logins over the 10 s bound.
const UNSERVED_POLL: Duration = Duration::from_millis(50);

/// The answer to an attempt its gate gave up for a later one.
const OUTDATED_ATTEMPT: &str = "A later attempt of this connection is in play.";

/// Put an authenticated character into play here, or redirect the gate to
/// the shard that serves it.
pub(super) async fn enter(
    shard: &Arc<Shard>,
    key: String,
    conn_id: String,
    attempt: u64,
    credential: String,
    out: &mpsc::Sender<ServerFrame>,
) -> Option<InPlay> {
    let redirect = |addr: String| {
        frame(Frame::Redirect(Redirect {
            addr,
            token: String::new(),
            credential: credential.clone(),
        }))
    };
    let wait_until = Instant::now() + UNSERVED_WAIT;
    let mut told = false;
    // Where the claimed row put the player when it was not where routing
    // looked: routed there next, whatever the roster or the read said.
    let mut misrouted: Option<String> = None;
    loop {
        // A newer process of this shard id serves its zones: this one is
        // stopping and serves nothing again, so an open parked here would
        // wait out its whole bound for a zone "unserved" only here (the
        // directory names our shard id as owner), and hold this process's
        // shutdown up meanwhile. Refused at once, non-final: the gate tries
        // again and reaches the newer process once this one is gone (issue
        // 17, overlap seed 91: a resume parked 10 s on the woken
        // predecessor of a restart-while-paused).
        if shard.superseded().is_cancelled() {
            send_closed(out, "The world is restarting; hold on...", false).await;
            return None;
        }
        // The gate that asked is gone (it crashed, or gave this attempt up):
        // claiming now would mint an epoch for no one, newer than the
        // session its player has meanwhile logged in again with (issue 17,
        // overlap seed 409998530: a dead gate's resume waited here for
        // its zone to open, then claimed after the player's new login).
        if out.is_closed() {
            info!(player = %key, "the gate left before the login was placed; not claiming");
            return None;
        }
        // Online somewhere already: that session is taken over where it is.
        let zone = match misrouted.take().or_else(|| shard.roster().zone_of(&key)) {
            Some(zone) => zone,
            None => match online_elsewhere(shard, &key).await {
                Some(addr) => {
                    let _ = out.send(redirect(addr)).await;
                    return None;
                }
                None => match saved_zone(shard, &key).await {
                    Ok(zone) => zone,
                    Err(e) => {
                        warn!(player = %key, error = %e, "loading character failed");
                        send_closed(out, "The world cannot be reached right now.", false).await;
                        return None;
                    }
                },
            },
        };
        let route = match shard.route(&zone).await {
            Ok(r) => r,
            Err(e) => {
                warn!(zone, error = %e, "resolving the zone's shard failed");
                send_closed(out, "The world cannot be reached right now.", false).await;
                return None;
            }
        };
        match route {
            ZoneRoute::Remote(info) => {
                let _ = out.send(redirect(info.addr)).await;
                return None;
            }
            // Draining: fresh sessions wait for the zone to move, then
            // follow it (a handoff bind still lands through Attach).
            ZoneRoute::Local(_) if shard.is_draining() && Instant::now() < wait_until => {}
            ZoneRoute::Local(handle) => {
                let asker = Claimant {
                    conn_id: &conn_id,
                    attempt,
                };
                match attach_local(shard, &key, asker, &credential, &handle, out).await {
                    Ok(()) => {
                        return Some(InPlay {
                            key,
                            conn_id,
                            zone: handle,
                            stream: out.downgrade(),
                        });
                    }
                    Err(AttachError::ZoneRefused) if Instant::now() < wait_until => {
                        // Parked: the zone is opening here (a transfer's
                        // target). The player waits, they are not refused.
                        if !told {
                            told = true;
                            metrics::counter!("telos_parked_opens_total").increment(1);
                            let _ = out
                                .send(frame(Frame::Output(telos_proto::v1::Output {
                                    text: "The world shifts around you...\n".into(),
                                    ..Default::default()
                                })))
                                .await;
                        }
                    }
                    Err(AttachError::Misrouted(zone)) if Instant::now() < wait_until => {
                        misrouted = Some(zone);
                        continue;
                    }
                    Err(AttachError::Gone) => return None,
                    // Said for the record: the gate has moved on from it.
                    Err(AttachError::Outdated) => {
                        send_closed(out, OUTDATED_ATTEMPT, false).await;
                        return None;
                    }
                    Err(_) => {
                        send_closed(out, "The world cannot be reached right now.", false).await;
                        return None;
                    }
                }
            }
            ZoneRoute::Unserved if Instant::now() < wait_until => {}
            ZoneRoute::Unserved => {
                send_closed(
                    out,
                    "That part of the world is not being served right now; try again shortly.",
                    false,
                )
                .await;
                return None;
            }
        }
        tokio::time::sleep(UNSERVED_POLL).await;
    }
}

/// The shard currently playing this character, if another live shard.
async fn online_elsewhere(shard: &Shard, key: &str) -> Option<String> {
    let online = shard.directory().online().await.ok()?;
    let entry = online
        .into_iter()
        .find(|p| p.name.eq_ignore_ascii_case(key) && p.shard != shard.id())?;
    shard.handoff().shard_addr(&entry.shard).await
}

/// The zone of the character's saved room (instances and unknown rooms fall
/// back to where the player entered from, or the start room).
async fn saved_zone(shard: &Shard, key: &str) -> anyhow::Result<String> {
    let row = shard
        .store()
        .load(key)
        .await?
        .ok_or_else(|| anyhow::anyhow!("no such character"))?;
    // Only the room is read here: the tier does not place anyone.
    let ch = shard.game().load_player(&row.state_json, Tier::default())?;
    Ok(zone_of(&resolve_room(shard, &*ch)).to_string())
}
