//! One player session on the `Play` stream: log in (or resume, or attach),
//! find the zone that serves the character, then forward input lines to the
//! zone actor that holds the player, one at a time, in order.
//!
//! Lines are forwarded one at a time and each waits for its reply, so when a
//! line walks the player into a sibling zone the next line can only go to
//! the new zone, after the player arrived there: exactly-once survives the
//! move without any cross-actor ordering games.
//!
//! One job per module, each importing only those after it:
//! - [`account`]: `Login` and `Resume`: who the player is;
//! - [`route`]: where the character plays (taken over, redirected, parked);
//! - [`attach`]: joining the zone actor, from the store or from a handoff;
//! - [`forward`]: input lines to the zone actor that holds the player;
//! - [`frames`]: the frames every step sends.

mod account;
mod attach;
mod forward;
mod frames;
mod limits;
mod route;
mod strength;

use std::sync::Arc;
use std::time::Duration;

use telos_proto::v1::{ClientFrame, ServerFrame, client_frame};
use tokio::sync::mpsc;
use tonic::Streaming;
use tracing::debug;

use crate::runtime::shard::Shard;
use account::{login_frame, resume_frame};
use attach::attach_frame;
use forward::forward_input;
use frames::send_closed;

/// How long a new stream may stay silent before its first frame. A gate
/// sends it with the stream's opening, so anything slower is a client that
/// holds a session task (and a stream) for nothing; seconds leave room for
/// a slow network, and a dial of its own is bounded apart from this.
pub const FIRST_FRAME_DEADLINE: Duration = Duration::from_secs(5);

/// Drive one `Play` stream to its end.
/// `caller`: who opened the stream (its certificate's role and holder),
/// for the login limits' per-caller budget.
pub async fn run_session(
    shard: Arc<Shard>,
    mut inbound: Streaming<ClientFrame>,
    out: mpsc::Sender<ServerFrame>,
    caller: String,
) {
    // Shutdown ends a stream still waiting for its first frame too: every
    // session task is in the shard's tracker, which shutdown waits for.
    let first = tokio::select! {
        _ = shard.stopped().cancelled() => return,
        first = tokio::time::timeout(FIRST_FRAME_DEADLINE, inbound.message()) => first,
    };
    let Ok(first) = first else {
        metrics::counter!("telos_play_first_frame_timeouts_total").increment(1);
        debug!("a Play stream sent no first frame in time; closing it");
        let reason = format!(
            "Protocol error: no Login, Resume or Attach within {} s.",
            FIRST_FRAME_DEADLINE.as_secs()
        );
        send_closed(&out, &reason, true).await;
        return;
    };
    let first = match first {
        Ok(Some(ClientFrame { frame: Some(f) })) => f,
        Ok(_) => return,
        Err(status) => {
            debug!(%status, "session stream failed before the first frame");
            return;
        }
    };
    let started = match first {
        client_frame::Frame::Login(login) => login_frame(&shard, login, &out, &caller).await,
        client_frame::Frame::Resume(resume) => resume_frame(&shard, resume, &out).await,
        client_frame::Frame::Attach(attach) => attach_frame(&shard, attach, &out).await,
        client_frame::Frame::Input(_) | client_frame::Frame::Hangup(_) => {
            send_closed(&out, "Protocol error: log in first.", true).await;
            None
        }
    };
    if let Some((key, conn_id, zone)) = started {
        forward_input(shard.clone(), key, conn_id, zone, inbound).await;
    }
}
