//! `telos.v1.Admin`: operator calls on every shard, thin over the same
//! directory scripts `telosctl` uses.

use std::sync::Arc;

use telos_proto::v1::admin_server::Admin;
use telos_proto::v1::{StatusRequest, StatusResponse, TransferZoneRequest, TransferZoneResponse};
use tonic::{Request, Response, Status};

use crate::runtime::shard::Shard;
use telos_redis::directory::transfer::Proposal;
use telos_redis::status::cluster_status;

pub struct AdminService {
    shard: Arc<Shard>,
}

impl AdminService {
    pub fn new(shard: Arc<Shard>) -> Self {
        AdminService { shard }
    }
}

#[tonic::async_trait]
impl Admin for AdminService {
    async fn transfer_zone(
        &self,
        req: Request<TransferZoneRequest>,
    ) -> Result<Response<TransferZoneResponse>, Status> {
        let req = req.into_inner();
        let answer = self
            .shard
            .directory()
            .propose_operator_transfer(&req.zone_id, &req.to_shard_id)
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?
            .map_err(|e| Status::failed_precondition(e.to_string()))?;
        let (outcome, from) = match answer {
            Proposal::Recorded { from } => ("recorded", from),
            Proposal::AlreadyPending { from } => ("already_pending", from),
            Proposal::AlreadyThere => ("already_there", req.to_shard_id.clone()),
        };
        Ok(Response::new(TransferZoneResponse {
            outcome: outcome.into(),
            from_shard_id: from,
        }))
    }

    async fn status(&self, _: Request<StatusRequest>) -> Result<Response<StatusResponse>, Status> {
        let status = cluster_status(self.shard.directory())
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        let json = serde_json::to_string(&status).map_err(|e| Status::internal(e.to_string()))?;
        Ok(Response::new(StatusResponse { json }))
    }
}
