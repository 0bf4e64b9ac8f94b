//! The frames every step of a session sends.

use telos_proto::v1::{Closed, Refusal, ServerFrame, server_frame::Frame};
use tokio::sync::mpsc;
use tracing::debug;

pub(super) fn frame(f: Frame) -> ServerFrame {
    ServerFrame { frame: Some(f) }
}

pub(super) async fn send_closed(out: &mpsc::Sender<ServerFrame>, reason: &str, is_final: bool) {
    let _ = out
        .send(frame(Frame::Closed(Closed {
            reason: reason.to_string(),
            r#final: is_final,
            ..Default::default()
        })))
        .await;
}

/// The shard cannot hash the password now (every core hashing, the queue
/// full): not a failed login. Non-final, so the gate tries another shard
/// and, if none has room, shows the player the line and keeps them.
pub(super) async fn send_login_busy(out: &mpsc::Sender<ServerFrame>) {
    metrics::counter!("telos_login_busy_total").increment(1);
    debug!("login refused for now: password hashing at capacity");
    let closed = Closed {
        reason: telos_proto::LOGIN_BUSY.into(),
        r#final: false,
        refusal: Refusal::Busy.into(),
    };
    let _ = out.send(frame(Frame::Closed(closed))).await;
}
