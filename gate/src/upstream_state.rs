//! A session's upstream, as an enum: a live stream to a shard, an attach in
//! flight (handoff, redirect or resume), or a backoff before the next
//! resume; and the one cancel-safe wait on whichever it is.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use telos_proto::v1::server_frame::Frame;

use crate::shared::Shared;
use crate::upstream::{EstablishError, Established, Link, Opening, Who, establish};

/// An attach in flight.
pub type Attaching = Pin<Box<dyn Future<Output = Result<Established, EstablishError>> + Send>>;

/// A resume of `who`'s session on a random live shard (`fallback`, the
/// last shard's address, when the registry lists none).
pub fn resume_attempt(shared: Arc<Shared>, who: Who, fallback: String) -> Attaching {
    Box::pin(async move {
        let shards = shared
            .registry
            .live_shards()
            .await
            .map_err(|e| EstablishError::Unavailable(e.to_string()))?;
        let addr = if shards.is_empty() {
            fallback
        } else {
            shards[rand::random_range(0..shards.len())].addr.clone()
        };
        establish(&shared.pool, &addr, Opening::Resume, who).await
    })
}

#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Handoff,
    Redirect,
    Resume,
}

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::Handoff => "handoff",
            Kind::Redirect => "redirect",
            Kind::Resume => "resume",
        }
    }
}

pub enum Upstream {
    Live(Box<Link>),
    Connecting(Attaching, Kind),
    Backoff(tokio::time::Instant),
}

pub enum UpEvent {
    Frame(Result<Option<Frame>, tonic::Status>),
    Attached(Result<Established, EstablishError>, Kind),
    BackoffOver,
}

/// Whatever the upstream does next: a frame of the live stream, the end of
/// an attach in flight, or the end of a backoff wait. Cancel safe.
pub async fn upstream_event(up: &mut Upstream) -> UpEvent {
    match up {
        Upstream::Live(link) => UpEvent::Frame(link.next().await),
        Upstream::Connecting(fut, kind) => UpEvent::Attached(fut.await, *kind),
        Upstream::Backoff(until) => {
            tokio::time::sleep_until(*until).await;
            UpEvent::BackoffOver
        }
    }
}
