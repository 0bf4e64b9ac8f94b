//! `telos.v1.Handoff`. Declared in full; the bodies arrive with the
//! cross-shard handoff and drain work and answer `Unimplemented` until then.

use telos_proto::v1::handoff_server::Handoff;
use telos_proto::v1::*;
use tonic::{Request, Response, Status};

#[derive(Default)]
pub struct HandoffService;

fn not_yet(rpc: &str) -> Status {
    Status::unimplemented(format!(
        "Handoff.{rpc} is not implemented by this shard yet"
    ))
}

#[tonic::async_trait]
impl Handoff for HandoffService {
    async fn prepare(
        &self,
        _: Request<PrepareRequest>,
    ) -> Result<Response<PrepareResponse>, Status> {
        Err(not_yet("Prepare"))
    }
    async fn commit(&self, _: Request<CommitRequest>) -> Result<Response<CommitResponse>, Status> {
        Err(not_yet("Commit"))
    }
    async fn abort(&self, _: Request<AbortRequest>) -> Result<Response<AbortResponse>, Status> {
        Err(not_yet("Abort"))
    }
    async fn adopt_zone(
        &self,
        _: Request<AdoptZoneRequest>,
    ) -> Result<Response<AdoptZoneResponse>, Status> {
        Err(not_yet("AdoptZone"))
    }
    async fn handover_zone(
        &self,
        _: Request<HandoverZoneRequest>,
    ) -> Result<Response<HandoverZoneResponse>, Status> {
        Err(not_yet("HandoverZone"))
    }
}
