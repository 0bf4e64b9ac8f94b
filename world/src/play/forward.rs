//! Forwarding: input lines go to whichever local zone actor holds the
//! player, one at a time, each waiting for its reply; a `Hangup` after the
//! last of them ends the session as `quit` does.

use std::sync::Arc;

use telos_proto::v1::{ClientFrame, ServerFrame, client_frame};
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
            let now = shard.roster().zone_of(&key);
            match now
                .filter(|z| z != zone.id())
                .and_then(|z| shard.hosted().get(&z))
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
                            // line above it. No zone here holds them, so
                            // this shard must stop listing them online: a
                            // stale entry routes their resume back here
                            // and here on to the zone's new owner, which
                            // sends it back (issue 17, partition seed
                            // 4242: redirected until the gate gave up).
                            warn!(player = %key, "both zones refused the player; the session ends");
                            shard.roster().remove_if_in(&key, &[zone.id(), to.id()]);
                            return;
                        }
                    },
                },
            }
        }
    }
    zone.detach(&key, &conn_id, stream).await;
}
