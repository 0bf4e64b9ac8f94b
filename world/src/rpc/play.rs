//! `telos.v1.Play`: one bidirectional stream per player session.

use std::pin::Pin;
use std::sync::Arc;

use telos_proto::v1::{ClientFrame, ServerFrame, play_server::Play};
use tokio::sync::mpsc;
use tokio_stream::{Stream, StreamExt, wrappers::ReceiverStream};
use tonic::{Request, Response, Status, Streaming};

use crate::runtime::shard::Shard;
use crate::zone::session::OUT_CHANNEL;

pub struct PlayService {
    shard: Arc<Shard>,
}

impl PlayService {
    pub fn new(shard: Arc<Shard>) -> Self {
        PlayService { shard }
    }
}

/// Who is calling, as the login limits count a caller's budget: the
/// certificate's role and holder (`gate:gate-1`), or `plaintext` on a
/// keyless shard.
fn caller<T>(request: &Request<T>) -> String {
    let role = request
        .peer_certs()
        .and_then(|certs| certs.first().and_then(telos_tls::Role::of));
    match (role, telos_tls::holder::caller(request)) {
        (Some(role), Some(holder)) => format!("{role}:{holder}"),
        _ => "plaintext".to_string(),
    }
}

type FrameStream = Pin<Box<dyn Stream<Item = Result<ServerFrame, Status>> + Send>>;

#[tonic::async_trait]
impl Play for PlayService {
    type SessionStream = FrameStream;

    async fn session(
        &self,
        request: Request<Streaming<ClientFrame>>,
    ) -> Result<Response<Self::SessionStream>, Status> {
        let (out, rx) = mpsc::channel(OUT_CHANNEL);
        let shard = self.shard.clone();
        let caller = caller(&request);
        shard.tracker().spawn(crate::play::run_session(
            shard.clone(),
            request.into_inner(),
            out,
            caller,
        ));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx).map(Ok))))
    }
}
