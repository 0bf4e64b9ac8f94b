//! `telos.v1.Handoff`: thin handlers over [`crate::handoff`].

use std::sync::Arc;

use telos_proto::v1::handoff_server::Handoff;
use telos_proto::v1::*;
use tonic::{Request, Response, Status};
use tracing::{Instrument, info_span};

use crate::handoff::destination::{self, PrepareRefused};
use crate::handoff::source::{self, CommitRefused};
use crate::runtime::moves::adopt::{self, AdoptRefused};
use crate::runtime::moves::drain::{self, HandoverError};
use crate::runtime::shard::Shard;
use telos_telemetry::with_remote_parent;

pub struct HandoffService {
    shard: Arc<Shard>,
}

impl HandoffService {
    pub fn new(shard: Arc<Shard>) -> Self {
        HandoffService { shard }
    }

    /// A request that names `claimed` as the shard it comes from is served
    /// only to that shard's own certificate (`PermissionDenied` otherwise),
    /// so a shard cannot speak for another: no spoofed source adopts, hands
    /// over, prepares or commits. A keyless shard has no certificates to
    /// check (and refuses every handoff anyway).
    fn speaks_for<T>(&self, req: &Request<T>, claimed: &str, what: &str) -> Result<(), Status> {
        if self.shard.handoff().keys.is_none() {
            return Ok(());
        }
        telos_tls::holder::require(req, claimed, what)
    }
}

fn prepare_status(e: PrepareRefused) -> Status {
    match e {
        // Never: a keyless shard takes no handoff, so the source does not
        // try again (`FailedPrecondition` — not serving the zone *yet* —
        // is worth another attempt).
        PrepareRefused::Keyless => Status::unimplemented(e.to_string()),
        PrepareRefused::BadSignature => Status::permission_denied(e.to_string()),
        PrepareRefused::Malformed(_) | PrepareRefused::InstanceZone(_) => {
            Status::invalid_argument(e.to_string())
        }
        PrepareRefused::WrongDestination(_) => Status::permission_denied(e.to_string()),
        // Not serving the zone *yet* (an adoption or transfer opening):
        // worth another attempt.
        PrepareRefused::NotOwner(_) => Status::failed_precondition(e.to_string()),
        // Another protocol version (a rolling upgrade's skew): no retry
        // changes that.
        PrepareRefused::Version { .. } => Status::unimplemented(e.to_string()),
    }
}

fn handover_status(e: HandoverError) -> Status {
    match e {
        HandoverError::InstanceZone(_) | HandoverError::NoTarget | HandoverError::SelfTarget(_) => {
            Status::invalid_argument(e.to_string())
        }
        HandoverError::NotOwner(_)
        | HandoverError::StaleGeneration { .. }
        | HandoverError::Busy(_)
        | HandoverError::NoPeer
        | HandoverError::NotHosted(_) => Status::failed_precondition(e.to_string()),
        HandoverError::Directory(_) => Status::unavailable(e.to_string()),
        HandoverError::AdoptFailed(_)
        | HandoverError::FlipRefused
        | HandoverError::NotSaved
        | HandoverError::Interrupted => Status::aborted(e.to_string()),
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
        let span = with_remote_parent(
            info_span!("prepare_received", shard = %self.shard.id()),
            &req,
        );
        self.speaks_for(&req, &req.get_ref().from_shard_id, "Prepare")?;
        let req = req.into_inner();
        let (h, hosted) = (&self.shard.handoff(), &self.shard.hosted());
        // Only a zone that takes players now, or will once its lease is
        // observed (an adoption, a transfer's target), is a destination: a
        // zone stopping here (drained, transferred away, fenced) would take
        // the gate's attach only to refuse it, so the source tries again
        // where the zone is served next, within the walk's window.
        let hosts = |z: &str| {
            hosted
                .get(z)
                .is_some_and(|h| h.accepts_arrivals() || h.is_opening())
        };
        let token = span
            .in_scope(|| destination::prepare(h, hosts, &req))
            .map_err(prepare_status)?;
        Ok(Response::new(PrepareResponse {
            handoff_token: token,
            target_shard_addr: h.addr.clone(),
        }))
    }

    async fn commit(
        &self,
        req: Request<CommitRequest>,
    ) -> Result<Response<CommitResponse>, Status> {
        let span = with_remote_parent(
            info_span!("commit_received", shard = %self.shard.id()),
            &req,
        );
        // The destination commits: `to_shard_id` is the caller itself.
        self.speaks_for(&req, &req.get_ref().to_shard_id, "Commit")?;
        let req = req.into_inner();
        let h = &self.shard.handoff();
        span.in_scope(|| source::commit(h, &req.handoff_token, &req.to_shard_id, &req.sig))
            .map_err(commit_status)?;
        Ok(Response::new(CommitResponse {}))
    }

    async fn abort(&self, req: Request<AbortRequest>) -> Result<Response<AbortResponse>, Status> {
        let span = with_remote_parent(info_span!("abort_received", shard = %self.shard.id()), &req);
        // Only the source of a pending record may abort it (none pending:
        // the abort is a no-op for anyone).
        let source = self
            .shard
            .handoff()
            .pending
            .from_shard(&req.get_ref().handoff_token);
        if let Some(source) = source {
            self.speaks_for(&req, &source, "Abort")?;
        }
        let req = req.into_inner();
        span.in_scope(|| {
            destination::abort(
                self.shard.handoff(),
                &req.handoff_token,
                &req.to_shard_id,
                &req.sig,
            )
        })
        .map_err(prepare_status)?;
        Ok(Response::new(AbortResponse {}))
    }

    async fn adopt_zone(
        &self,
        req: Request<AdoptZoneRequest>,
    ) -> Result<Response<AdoptZoneResponse>, Status> {
        let span = with_remote_parent(info_span!("adopt_received", shard = %self.shard.id()), &req);
        // (No source at all is refused below: nobody is the live owner.)
        if !req.get_ref().from_shard_id.is_empty() {
            self.speaks_for(&req, &req.get_ref().from_shard_id, "AdoptZone")?;
        }
        let req = req.into_inner();
        adopt::adopt_zone(
            &self.shard,
            &req.zone_id,
            &req.from_shard_id,
            req.generation,
            req.handoff_version,
        )
        .instrument(span)
        .await
        .map_err(|e| match e {
            AdoptRefused::InstanceZone(_) | AdoptRefused::UnknownZone(_) => {
                Status::invalid_argument(e.to_string())
            }
            // Not a live owner handing over, as every misnamed source is.
            AdoptRefused::NotOwner { .. }
            | AdoptRefused::FromSelf
            | AdoptRefused::Draining
            | AdoptRefused::Version { .. } => Status::failed_precondition(e.to_string()),
            AdoptRefused::Directory(_) | AdoptRefused::Opening(_) => {
                Status::unavailable(e.to_string())
            }
        })?;
        Ok(Response::new(AdoptZoneResponse {}))
    }

    /// Ask this shard (the owner) to hand `zone_id` over to `to_shard_id`
    /// at the live `generation`: AdoptZone there, the fenced flip, then the
    /// in-place fan-off. Asked only by the target itself (its certificate);
    /// what else is refused is [`drain::handover_requested`]'s.
    async fn handover_zone(
        &self,
        req: Request<HandoverZoneRequest>,
    ) -> Result<Response<HandoverZoneResponse>, Status> {
        // Only the target may ask for a zone: a shard asks for itself. (No
        // target at all is refused below as the malformed request it is.)
        if !req.get_ref().to_shard_id.is_empty() {
            self.speaks_for(&req, &req.get_ref().to_shard_id, "HandoverZone")?;
        }
        let req = req.into_inner();
        drain::handover_requested(&self.shard, &req.zone_id, &req.to_shard_id, req.generation)
            .await
            .map_err(handover_status)?;
        let generation = self
            .shard
            .directory()
            .zone_owner(&req.zone_id)
            .await
            .ok()
            .flatten()
            .map(|(_, g)| g)
            .unwrap_or_default();
        Ok(Response::new(HandoverZoneResponse {
            new_generation: generation,
        }))
    }
}
