//! One probe of a shard: a gRPC health check on the very HTTP/2
//! connection its players use. [`crate::liveness`] probes a shard that
//! stopped heartbeating; [`crate::reachability`] probes every listed one.

use std::time::Duration;

use tonic::Code;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::Channel;

/// A suspect shard that gives no gRPC answer within this is condemned. A
/// live shard answers in milliseconds even on a loaded machine; a suspect
/// has also missed three heartbeats. Short enough that the players resume
/// before their zone can be served elsewhere (see `crate::liveness`).
pub const PROBE_TIMEOUT: Duration = Duration::from_millis(1500);

/// The standard gRPC health check (`grpc.health.v1.Health/Check`), sent
/// with an empty request (the whole server). Shards need not implement it:
/// `Unimplemented` is an answer too.
pub const HEALTH_CHECK: &str = "/grpc.health.v1.Health/Check";

/// Whether the shard behind `channel` answers one gRPC call in time.
pub async fn answers(channel: Channel) -> bool {
    let mut grpc = tonic::client::Grpc::new(channel);
    let call = async {
        grpc.ready()
            .await
            .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
        let codec = tonic_prost::ProstCodec::<(), ()>::default();
        grpc.unary(
            tonic::Request::new(()),
            PathAndQuery::from_static(HEALTH_CHECK),
            codec,
        )
        .await
    };
    match tokio::time::timeout(PROBE_TIMEOUT, call).await {
        Err(_) => false,
        Ok(Ok(_)) => true,
        Ok(Err(status)) => answered(status.code()),
    }
}

/// Whether a call that ended with `code` was answered by the shard itself,
/// rather than failed in transport (no connection, a broken one, a reset).
fn answered(code: Code) -> bool {
    !matches!(
        code,
        Code::Unavailable
            | Code::Unknown
            | Code::Cancelled
            | Code::DeadlineExceeded
            | Code::Internal
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_failures_are_not_answers() {
        assert!(answered(Code::Ok));
        assert!(answered(Code::Unimplemented));
        assert!(answered(Code::NotFound));
        assert!(!answered(Code::Unavailable));
        assert!(!answered(Code::Unknown));
    }
}
