//! One player session on the `Play` stream: log in (or resume, or attach),
//! find the zone that serves the character, then forward input lines to the
//! zone actor that holds the player, one at a time, in order.
//!
//! Lines are forwarded one at a time and each waits for its reply, so when a
//! line walks the player into a sibling zone the next line can only go to
//! the new zone, after the player arrived there: exactly-once survives the
//! move without any cross-actor ordering games.

use std::sync::Arc;
use std::time::Duration;

use telos_proto::v1::{
    Attached, ClientFrame, Closed, Redirect, ServerFrame, client_frame, server_frame::Frame,
};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tonic::Streaming;
use tracing::{debug, info, warn};

use crate::game::{
    Character, display_name, from_state_json, sanitize_loaded, to_state_json, valid_name, zone_of,
};
use crate::handoff::destination::{Activated, activate};
use crate::handoff::fence::{Outcome, SETTLE_BOUND};
use crate::runtime::shard::{Shard, ZoneRoute};
use crate::zone::{InputReply, Joining, SessionMeta, ZoneHandle};
use telos_redis::store::StoreError;

/// A resume credential lives this long after its last use: long enough to
/// ride out a shard restart or a long outage, short enough that a leaked one
/// goes stale.
const CREDENTIAL_TTL: Duration = Duration::from_secs(24 * 3600);

/// How long a login waits for the character's zone to be served (a zone
/// between owners, a shard restarting) before answering "try again".
const UNSERVED_WAIT: Duration = Duration::from_secs(10);
/// Parked opens re-check this often: short enough that a transfer's parked
/// login gets in within ~50 ms of the zone opening, cheap enough (two Redis
/// reads) for a crowd of parked logins over the 10 s bound.
const UNSERVED_POLL: Duration = Duration::from_millis(50);

/// Bound on a client-chosen connection id.
const MAX_CONN_ID: usize = 64;

pub const MIN_PASSWORD: usize = 8;

fn frame(f: Frame) -> ServerFrame {
    ServerFrame { frame: Some(f) }
}

async fn send_closed(out: &mpsc::Sender<ServerFrame>, reason: &str, is_final: bool) {
    let _ = out
        .send(frame(Frame::Closed(Closed {
            reason: reason.to_string(),
            r#final: is_final,
        })))
        .await;
}

/// Drive one `Play` stream to its end.
pub async fn run_session(
    shard: Arc<Shard>,
    mut inbound: Streaming<ClientFrame>,
    out: mpsc::Sender<ServerFrame>,
) {
    let first = match inbound.message().await {
        Ok(Some(ClientFrame { frame: Some(f) })) => f,
        Ok(_) => return,
        Err(status) => {
            debug!(%status, "session stream failed before the first frame");
            return;
        }
    };
    let started = match first {
        client_frame::Frame::Login(login) => login_frame(&shard, login, &out).await,
        client_frame::Frame::Resume(resume) => resume_frame(&shard, resume, &out).await,
        client_frame::Frame::Attach(attach) => attach_frame(&shard, attach, &out).await,
        client_frame::Frame::Input(_) => {
            send_closed(&out, "Protocol error: log in first.", true).await;
            None
        }
    };
    if let Some((key, conn_id, zone)) = started {
        forward_input(shard.clone(), key, conn_id, zone, inbound).await;
    }
}

/// The shard cannot hash the password now (every core hashing, the queue
/// full): not a failed login. Non-final, so the gate tries another shard
/// and, if none has room, shows the player the line and keeps them.
async fn send_login_busy(out: &mpsc::Sender<ServerFrame>) {
    metrics::counter!("telos_login_busy_total").increment(1);
    debug!("login refused for now: password hashing at capacity");
    send_closed(out, telos_proto::LOGIN_BUSY, false).await;
}

async fn login_frame(
    shard: &Arc<Shard>,
    login: telos_proto::v1::Login,
    out: &mpsc::Sender<ServerFrame>,
) -> Option<(String, String, ZoneHandle)> {
    if !valid_conn_id(&login.conn_id) {
        send_closed(out, "Protocol error: bad connection id.", true).await;
        return None;
    }
    if !valid_name(&login.name) {
        send_closed(out, "Login failed: names are 3-16 letters.", true).await;
        return None;
    }
    let key = login.name.to_ascii_lowercase();
    let store = &shard.env.store;
    if login.create {
        if login.password.chars().count() < MIN_PASSWORD {
            send_closed(
                out,
                "Login failed: passwords need at least 8 characters.",
                true,
            )
            .await;
            return None;
        }
        let ch = Character::new(&display_name(&login.name), &shard.env.world.start_room);
        match store
            .create_character(&login.name, &login.password, &to_state_json(&ch))
            .await
        {
            Ok(()) => info!(player = %key, "character created"),
            Err(StoreError::NameTaken) => {
                send_closed(out, "Login failed: that name is taken.", true).await;
                return None;
            }
            Err(StoreError::Busy) => {
                send_login_busy(out).await;
                return None;
            }
            Err(e) => {
                warn!(error = %e, "create failed");
                send_closed(
                    out,
                    "Login failed: the world cannot be reached; try again.",
                    true,
                )
                .await;
                return None;
            }
        }
    } else {
        match store.verify_password(&login.name, &login.password).await {
            Ok(true) => {}
            Ok(false) => {
                metrics::counter!("telos_login_failures_total").increment(1);
                send_closed(out, "Login failed.", true).await;
                return None;
            }
            Err(StoreError::Busy) => {
                send_login_busy(out).await;
                return None;
            }
            Err(e) => {
                warn!(error = %e, "password check failed");
                send_closed(
                    out,
                    "Login failed: the world cannot be reached; try again.",
                    true,
                )
                .await;
                return None;
            }
        }
    }
    let credential = match store
        .issue_credential(&key, &login.conn_id, CREDENTIAL_TTL)
        .await
    {
        Ok(c) => c,
        Err(e) => {
            warn!(error = %e, "issuing a credential failed");
            send_closed(
                out,
                "Login failed: the world cannot be reached; try again.",
                true,
            )
            .await;
            return None;
        }
    };
    enter(shard, key, login.conn_id, credential, out).await
}

async fn resume_frame(
    shard: &Arc<Shard>,
    resume: telos_proto::v1::Resume,
    out: &mpsc::Sender<ServerFrame>,
) -> Option<(String, String, ZoneHandle)> {
    if !valid_conn_id(&resume.conn_id) || !valid_name(&resume.name) {
        send_closed(out, "Protocol error: bad resume.", true).await;
        return None;
    }
    let key = resume.name.to_ascii_lowercase();
    match shard
        .env
        .store
        .check_credential(&key, &resume.conn_id, &resume.credential)
        .await
    {
        Ok(true) => enter(shard, key, resume.conn_id, resume.credential, out).await,
        Ok(false) => {
            send_closed(
                out,
                "Login failed: your session expired; please log in again.",
                true,
            )
            .await;
            None
        }
        Err(e) => {
            warn!(error = %e, "credential check failed");
            send_closed(out, "The world cannot be reached right now.", false).await;
            None
        }
    }
}

fn valid_conn_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_CONN_ID && id.bytes().all(|b| b.is_ascii_graphic())
}

/// Put an authenticated character into play here, or redirect the gate to
/// the shard that serves it.
async fn enter(
    shard: &Arc<Shard>,
    key: String,
    conn_id: String,
    credential: String,
    out: &mpsc::Sender<ServerFrame>,
) -> Option<(String, String, ZoneHandle)> {
    let redirect = |addr: String| {
        frame(Frame::Redirect(Redirect {
            addr,
            token: String::new(),
            credential: credential.clone(),
        }))
    };
    let wait_until = Instant::now() + UNSERVED_WAIT;
    let mut told = false;
    loop {
        // Online somewhere already: that session is taken over where it is.
        let zone = match shard.env.roster.zone_of(&key) {
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
                match attach_local(shard, &key, &conn_id, &credential, &handle, out).await {
                    Ok(()) => return Some((key, conn_id, handle)),
                    Err(retry) if retry && Instant::now() < wait_until => {
                        // Parked: the zone is opening here (a transfer's
                        // target). The player waits, they are not refused.
                        if !told {
                            told = true;
                            metrics::counter!("telos_parked_opens_total").increment(1);
                            let _ = out
                                .send(frame(Frame::Output(telos_proto::v1::Output {
                                    text: "The world shifts around you...\n".into(),
                                })))
                                .await;
                        }
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
    let online = shard.env.directory.online().await.ok()?;
    let entry = online
        .into_iter()
        .find(|p| p.name.eq_ignore_ascii_case(key) && p.shard != shard.id())?;
    shard.env.handoff.shard_addr(&entry.shard).await
}

/// The zone of the character's saved room (instances and unknown rooms fall
/// back to where the player entered from, or the start room).
async fn saved_zone(shard: &Shard, key: &str) -> anyhow::Result<String> {
    let row = shard
        .env
        .store
        .load(key)
        .await?
        .ok_or_else(|| anyhow::anyhow!("no such character"))?;
    let ch = from_state_json(&row.state_json)?;
    Ok(zone_of(&resolve_room(shard, &ch)).to_string())
}

fn resolve_room(shard: &Shard, ch: &Character) -> String {
    let world = &shard.env.world;
    if world.room(&ch.room).is_some() && !crate::game::is_instance_id(zone_of(&ch.room)) {
        return ch.room.clone();
    }
    ch.instance_return
        .as_ref()
        .filter(|r| world.room(r).is_some())
        .cloned()
        .unwrap_or_else(|| world.start_room.clone())
}

/// Claim the character (minting its next `owner_epoch`) and put it into the
/// local zone actor. `Err(true)`: worth retrying (zone stopping).
async fn attach_local(
    shard: &Arc<Shard>,
    key: &str,
    conn_id: &str,
    credential: &str,
    handle: &ZoneHandle,
    out: &mpsc::Sender<ServerFrame>,
) -> Result<(), bool> {
    let claimed = shard.env.store.claim_character(key).await.map_err(|e| {
        warn!(player = %key, error = %e, "claiming character failed");
        false
    })?;
    let row = claimed.row;
    let mut character = from_state_json(&row.state_json).map_err(|e| {
        warn!(player = %key, error = %e, "character state unreadable");
        false
    })?;
    character.room = resolve_room(shard, &character);
    // The row's tier is the authority; flags, aliases and bounds are
    // re-derived on every load.
    character.tier = row.tier.parse().unwrap_or_default();
    sanitize_loaded(&mut character);
    // The watermark carries over only for the same gate connection: its seqs
    // continue; a new connection numbers from 1.
    let applied_seq = if row.conn_id == conn_id {
        row.applied_seq
    } else {
        0
    };
    let meta = SessionMeta {
        conn_id: conn_id.to_string(),
        epoch: claimed.epoch,
        claim: claimed.claim,
        departure_claim: None,
        state_version: row.state_version,
        applied_seq,
        saved_seq: applied_seq,
        dirty: false,
        out: out.clone(),
        wedged: false,
        persist_id: row.persist_id.clone(),
        commit: None,
    };
    let attached = Attached {
        ack_input_seq: applied_seq,
        name: character.name.clone(),
        credential: credential.to_string(),
        shard_id: shard.id().to_string(),
    };
    handle
        .join(Joining {
            character,
            meta,
            attached,
        })
        .await
        .map(|_| ())
        .map_err(|e| {
            info!(player = %key, error = %e, "zone refused the join");
            true
        })
}

/// The gate followed a handoff `Redirect`: complete phase 2 and put the
/// player into play with the snapshot's watermark, so the gate replays
/// exactly the lines above it.
async fn attach_frame(
    shard: &Arc<Shard>,
    attach: telos_proto::v1::Attach,
    out: &mpsc::Sender<ServerFrame>,
) -> Option<(String, String, ZoneHandle)> {
    let h = &shard.env.handoff;
    let activated = match activate(h, &attach.token, &attach.conn_id) {
        Ok(a) => a,
        Err(e) => {
            info!(error = %e, "attach refused; the gate resumes from durable state");
            send_closed(
                out,
                "Your arrival was lost in the mists; reconnecting...",
                false,
            )
            .await;
            return None;
        }
    };
    let key = activated.character.key();
    let zone = zone_of(&activated.character.room).to_string();
    let meta = SessionMeta {
        conn_id: attach.conn_id.clone(),
        epoch: activated.epoch,
        claim: activated.claim,
        departure_claim: None,
        state_version: activated.state_version,
        applied_seq: activated.applied_seq,
        // Unknown how much of it the row holds: count every line as
        // unsaved, so the early save fires and the gate gets a DurableAck
        // soon after each hop (a constant walker would otherwise never be
        // saved and fill the gate's replay buffer).
        saved_seq: 0,
        // Not saved since the freeze: the first cadence saves it here.
        dirty: true,
        out: out.clone(),
        wedged: false,
        persist_id: activated.persist_id.clone(),
        commit: Some(activated.commit.clone()),
    };
    let attached = Attached {
        ack_input_seq: activated.applied_seq,
        name: activated.character.name.clone(),
        credential: String::new(),
        shard_id: shard.id().to_string(),
    };
    // A zone adopted for a drain may not have observed its flip yet (its
    // confirm loop polls); give it a moment before giving up.
    let until = Instant::now() + ADOPTION_GRACE;
    let mut joining = Joining {
        character: activated.character.clone(),
        meta,
        attached,
    };
    while let Some(handle) = shard.env.hosted.get(&zone) {
        match handle.join_or_return(joining).await {
            Ok(_) => return Some((key, attach.conn_id, handle)),
            Err(Some(back)) if Instant::now() < until => {
                joining = back;
                tokio::time::sleep(ADOPTION_POLL).await;
            }
            Err(_) => break,
        }
    }
    // The zone moved on while the player was in flight: save (under this
    // connection, so the gate's replay lines up with the row) and let the
    // gate resume wherever the zone is served now.
    info!(player = %key, zone, "zone refused the handed-off player");
    save_activated(shard, &activated, &attach.conn_id).await;
    send_closed(out, "The world shifts around you; reconnecting...", false).await;
    None
}

/// How long an attach waits for an adopted zone to confirm its lease.
const ADOPTION_GRACE: Duration = Duration::from_secs(3);
const ADOPTION_POLL: Duration = Duration::from_millis(20);

async fn save_activated(shard: &Shard, a: &Activated, conn_id: &str) {
    let json = to_state_json(&a.character);
    let key = a.character.key();
    // Write only under the epoch the Commit's outcome settles on.
    let (epoch, state_version) = match a.commit.clone().wait(SETTLE_BOUND).await {
        Some(Outcome::Committed) => (a.epoch, a.state_version),
        Some(Outcome::Reclaimed {
            epoch,
            state_version,
            ..
        }) => (epoch, state_version),
        Some(Outcome::Superseded { .. }) => {
            info!(player = %key, "claimed elsewhere while arriving: not saving");
            return;
        }
        None => {
            warn!(player = %key, "Commit unresolved: not saving (the gate replays from the durable row)");
            return;
        }
    };
    let saved = shard
        .env
        .store
        .save(&key, epoch, state_version, &json, conn_id, a.applied_seq)
        .await;
    if let Err(e) = saved {
        warn!(error = %e, "saving a handed-off player failed");
    }
}

/// Forward input to whichever local zone actor holds the player.
async fn forward_input(
    shard: Arc<Shard>,
    key: String,
    conn_id: String,
    mut zone: ZoneHandle,
    mut inbound: Streaming<ClientFrame>,
) {
    loop {
        // Shutdown ends every session task, whatever its client does.
        let next = tokio::select! {
            _ = shard.root.cancelled() => return,
            next = inbound.message() => next,
        };
        let input = match next {
            Ok(Some(ClientFrame {
                frame: Some(client_frame::Frame::Input(input)),
            })) => input,
            Ok(Some(_)) => {
                debug!(player = %key, "ignoring a non-input frame on a live session");
                continue;
            }
            Ok(None) => break,
            Err(status) => {
                debug!(player = %key, %status, "session stream failed");
                break;
            }
        };
        // At most a couple of hops: the zone that moved the player itself
        // (an instance walking its players out) is followed via the roster.
        let mut hops = 0;
        let reply = loop {
            let reply = match zone
                .input(&key, &conn_id, input.seq, input.line.clone())
                .await
            {
                Ok(r) => r,
                Err(_) => return, // the zone stopped; it closed the session itself
            };
            if !matches!(reply, InputReply::Gone) || hops >= 2 {
                break reply;
            }
            hops += 1;
            let now = shard.env.roster.zone_of(&key);
            match now
                .filter(|z| z != zone.id())
                .and_then(|z| shard.env.hosted.get(&z))
            {
                Some(h) => zone = h,
                None => break reply,
            }
        };
        let mut reply = reply;
        loop {
            match reply {
                InputReply::Applied | InputReply::Duplicate | InputReply::Departing => break,
                InputReply::Gone => return,
                InputReply::Moved { to, transfer } => match to.arrive(transfer).await {
                    Ok(()) => {
                        zone = to;
                        break;
                    }
                    // The sibling stopped or is not open yet: the zone the
                    // player left takes them back and keeps trying within
                    // the walk's window; its answer is the move's.
                    Err(back) => match zone.take_back(back).await {
                        Ok(next) => reply = next,
                        Err(_) => {
                            // Neither zone can hold the player (both
                            // stopping): the stream ends and the gate
                            // resumes from the durable row, replaying every
                            // line above it.
                            warn!(player = %key, "both zones refused the player; the session ends");
                            return;
                        }
                    },
                },
            }
        }
    }
    zone.detach(&key, &conn_id).await;
}
