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

/// How long a session that has ended keeps reading (and dropping) what the
/// gate still sends, until the gate ends its side: a gate does so as soon
/// as it reads the `Closed` or `Redirect`, so this only bounds one that
/// does not. See [`drain_inbound`].
pub const DRAIN_AFTER_END: Duration = Duration::from_secs(5);

/// Drive one `Play` stream to its end.
/// `caller`: who opened the stream (its certificate's role and holder),
/// for the login limits' per-caller budget.
pub async fn run_session(
    shard: Arc<Shard>,
    mut inbound: Streaming<ClientFrame>,
    out: mpsc::Sender<ServerFrame>,
    caller: String,
) {
    session(&shard, &mut inbound, out, &caller).await;
    drain_inbound(&shard, inbound).await;
}

/// After the session ended (its `out` dropped, so the response ends),
/// read and drop what the gate sent meanwhile until it ends its side. A
/// request stream dropped while the gate still sends costs the connection
/// for good: h2 (0.4.20) charges every small DATA frame that arrives for a
/// stream no one reads against the connection's small-frame budget and
/// never gives it back, and the budget's end closes the connection, every
/// player on it with it (`GOAWAY ENHANCE_YOUR_CALM "too_many_data_frames"`).
/// A player who typed ahead of their `quit` did exactly that.
async fn drain_inbound(shard: &Shard, mut inbound: Streaming<ClientFrame>) {
    let until = tokio::time::Instant::now() + DRAIN_AFTER_END;
    loop {
        let next = tokio::select! {
            _ = shard.stopped().cancelled() => return,
            next = tokio::time::timeout_at(until, inbound.message()) => next,
        };
        match next {
            Ok(Ok(Some(_))) => metrics::counter!("telos_play_frames_after_end_total").increment(1),
            Ok(Ok(None) | Err(_)) => return,
            Err(_) => {
                debug!("a Play stream was not ended within the drain bound; dropping it");
                return;
            }
        }
    }
}

async fn session(
    shard: &Arc<Shard>,
    inbound: &mut Streaming<ClientFrame>,
    out: mpsc::Sender<ServerFrame>,
    caller: &str,
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
        client_frame::Frame::Login(login) => login_frame(shard, login, &out, caller).await,
        client_frame::Frame::Resume(resume) => resume_frame(shard, resume, &out).await,
        client_frame::Frame::Attach(attach) => attach_frame(shard, attach, &out).await,
        client_frame::Frame::Input(_) | client_frame::Frame::Hangup(_) => {
            send_closed(&out, "Protocol error: log in first.", true).await;
            None
        }
    };
    drop(out);
    if let Some(in_play) = started {
        forward_input(shard.clone(), in_play, inbound).await;
    }
}
