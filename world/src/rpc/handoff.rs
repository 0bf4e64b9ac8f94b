//! `telos.v1.Handoff`: thin handlers over [`crate::handoff`]. `AdoptZone`
//! and `HandoverZone` arrive with the graceful drain.

use std::sync::Arc;

use telos_proto::v1::handoff_server::Handoff;
use telos_proto::v1::*;
use tonic::{Request, Response, Status};

use crate::handoff::destination::{self, PrepareRefused};
use crate::handoff::source::CommitRefused;
use crate::shard::Shard;

pub struct HandoffService {
    shard: Arc<Shard>,
}

impl HandoffService {
    pub fn new(shard: Arc<Shard>) -> Self {
        HandoffService { shard }
    }
}

fn prepare_status(e: PrepareRefused) -> Status {
    match e {
        PrepareRefused::Keyless => Status::failed_precondition(e.to_string()),
        PrepareRefused::BadSignature => Status::permission_denied(e.to_string()),
        PrepareRefused::Malformed(_) | PrepareRefused::InstanceZone(_) => {
            Status::invalid_argument(e.to_string())
        }
        PrepareRefused::WrongDestination(_) => Status::permission_denied(e.to_string()),
        PrepareRefused::NotOwner(_) => Status::failed_precondition(e.to_string()),
    }
}

fn commit_status(e: CommitRefused) -> Status {
    match e {
        CommitRefused::Unknown => Status::not_found(e.to_string()),
        CommitRefused::Expired | CommitRefused::Keyless => {
            Status::failed_precondition(e.to_string())
        }
        CommitRefused::BadSignature => Status::permission_denied(e.to_string()),
    }
}

#[tonic::async_trait]
impl Handoff for HandoffService {
    async fn prepare(
        &self,
        req: Request<PrepareRequest>,
    ) -> Result<Response<PrepareResponse>, Status> {
        let req = req.into_inner();
        let h = &self.shard.env.handoff;
        let token =
            destination::prepare(h, &self.shard.env.hosted, &req).map_err(prepare_status)?;
        Ok(Response::new(PrepareResponse {
            handoff_token: token,
            target_shard_addr: h.addr.clone(),
        }))
    }

    async fn commit(
        &self,
        req: Request<CommitRequest>,
    ) -> Result<Response<CommitResponse>, Status> {
        let req = req.into_inner();
        let h = &self.shard.env.handoff;
        h.outbound
            .commit(h, &req.handoff_token, &req.to_shard_id, &req.sig)
            .map_err(commit_status)?;
        Ok(Response::new(CommitResponse {}))
    }

    async fn abort(&self, req: Request<AbortRequest>) -> Result<Response<AbortResponse>, Status> {
        let req = req.into_inner();
        destination::abort(
            &self.shard.env.handoff,
            &req.handoff_token,
            &req.to_shard_id,
            &req.sig,
        )
        .map_err(prepare_status)?;
        Ok(Response::new(AbortResponse {}))
    }

    async fn adopt_zone(
        &self,
        _: Request<AdoptZoneRequest>,
    ) -> Result<Response<AdoptZoneResponse>, Status> {
        Err(Status::unimplemented(
            "Handoff.AdoptZone arrives with the graceful drain",
        ))
    }

    async fn handover_zone(
        &self,
        _: Request<HandoverZoneRequest>,
    ) -> Result<Response<HandoverZoneResponse>, Status> {
        Err(Status::unimplemented(
            "Handoff.HandoverZone arrives with the graceful drain",
        ))
    }
}
