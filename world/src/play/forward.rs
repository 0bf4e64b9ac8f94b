//! Forwarding: input lines go to whichever local zone actor holds the
//! player, one at a time, each waiting for its reply; a `Hangup` after the
//! last of them ends the session as `quit` does.

use std::sync::Arc;

use telos_proto::v1::{ClientFrame, Input, ServerFrame, client_frame};
use tokio::sync::mpsc;
use tonic::Streaming;
use tracing::{debug, warn};

use crate::runtime::shard::Shard;
use crate::zone::{InputReply, ZoneHandle};

/// A session put into play: whose, on which gate connection, and the zone
/// actor that holds it now.
pub(super) struct InPlay {
    pub key: String,
    pub conn_id: String,
    pub zone: ZoneHandle,
    /// The stream's way to the gate, not keeping it open: when the stream
    /// ends, the session is detached only if it is still this stream's.
    pub stream: mpsc::WeakSender<ServerFrame>,
}

/// Forward input to whichever local zone actor holds the player.
pub(super) async fn forward_input(
    shard: Arc<Shard>,
    in_play: InPlay,
    inbound: &mut Streaming<ClientFrame>,
) {
    let InPlay {
        key,
        conn_id,
        mut zone,
        stream,
    } = in_play;
    loop {
        // Shutdown ends every session task, whatever its client does.
        let next = tokio::select! {
            _ = shard.stopped().cancelled() => return,
            next = inbound.message() => next,
        };
        let input = match next {
            Ok(Some(ClientFrame {
                frame: Some(client_frame::Frame::Input(input)),
            })) => input,
            Ok(Some(ClientFrame {
                frame: Some(client_frame::Frame::Hangup(_)),
            })) => {
                // Every line before it has had its reply (one at a time),
                // so it is applied after them.
                zone.hangup(&key, &conn_id).await;
                continue;
            }
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
        match apply_line(&shard, &key, &conn_id, zone, input).await {
            Some(holder) => zone = holder,
            None => return,
        }
    }
    zone.detach(&key, &conn_id, stream).await;
}

/// Send one line to the zone that holds the player and see its reply
/// through; the zone holding the player after it, or `None` when the
/// session ended here (the zone stopped, the player left, or nowhere
/// could hold them).
async fn apply_line(
    shard: &Shard,
    key: &str,
    conn_id: &str,
    zone: ZoneHandle,
    input: Input,
) -> Option<ZoneHandle> {
    let (zone, reply) = send_following(shard, key, conn_id, zone, &input).await?;
    settle_reply(shard, key, zone, reply).await
}

/// Send the line, following the player at most a couple of hops: the zone
/// that moved the player itself (an instance walking its players out) is
/// followed via the roster. `None`: the zone stopped (it closed the
/// session itself).
async fn send_following(
    shard: &Shard,
    key: &str,
    conn_id: &str,
    mut zone: ZoneHandle,
    input: &Input,
) -> Option<(ZoneHandle, InputReply)> {
    let mut hops = 0;
    loop {
        let reply = zone
            .input(key, conn_id, input.seq, input.line.clone())
            .await
            .ok()?;
        if !matches!(reply, InputReply::Gone) || hops >= 2 {
            return Some((zone, reply));
        }
        hops += 1;
        let now = shard.roster().zone_of(key);
        match now
            .filter(|z| z != zone.id())
            .and_then(|z| shard.hosted().get(&z))
        {
            Some(h) => zone = h,
            None => return Some((zone, reply)),
        }
    }
}

/// See a reply through: a move into a sibling zone delivered there (or,
/// refused, taken back by the zone the player left, whose answer is the
/// move's). The zone holding the player after it; `None` when nobody does.
async fn settle_reply(
    shard: &Shard,
    key: &str,
    zone: ZoneHandle,
    mut reply: InputReply,
) -> Option<ZoneHandle> {
    loop {
        match reply {
            InputReply::Applied | InputReply::Duplicate | InputReply::Departing => {
                return Some(zone);
            }
            InputReply::Gone => return None,
            InputReply::Moved { to, transfer } => match to.arrive(transfer).await {
                Ok(()) => return Some(to),
                // The sibling stopped or is not open yet: the zone the
                // player left takes them back and keeps trying within the
                // walk's window; its answer is the move's.
                Err(back) => match zone.take_back(back).await {
                    Ok(next) => reply = next,
                    Err(_) => {
                        // Neither zone can hold the player (both stopping):
                        // the stream ends and the gate resumes from the
                        // durable row, replaying every line above it. No
                        // zone here holds them, so this shard must stop
                        // listing them online: a stale entry routes their
                        // resume back here and here on to the zone's new
                        // owner, which sends it back (issue 17, partition
                        // seed 4242: redirected until the gate gave up).
                        warn!(player = %key, "both zones refused the player; the session ends");
                        shard.roster().remove_if_in(key, &[zone.id(), to.id()]);
                        return None;
                    }
                },
            },
        }
    }
}
