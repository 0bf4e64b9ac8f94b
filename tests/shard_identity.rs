//! A shard certificate speaks for its own shard only (issue 18, item 7).
//! Every shard's certificate was `CN=shard`, so any of them could claim to
//! be any shard: a `HandoverZone` moved zones for whoever asked and an
//! `AdoptZone(from=shard-a)` from another shard was accepted. Now each of
//! `AdoptZone`, `HandoverZone`, `Prepare`, `Commit` and `Abort` is served
//! only when the shard it names as its source (the target, for a
//! hand-over) is the one the caller's certificate was issued to; each
//! refusal is `PermissionDenied` and changes nothing, and the same request
//! from the right certificate is served.

mod support;

use support::handoff::{Cluster, cluster, request, snapshot};
use telos_proto::v1::handoff_client::HandoffClient;
use telos_proto::v1::{AbortRequest, AdoptZoneRequest, CommitRequest, HandoverZoneRequest};
use telos_redis::directory::Directory;
use telos_testkit::play::Channels;
use telos_tls::Role;
use telos_world::handoff::phase2::{Phase2, sign_phase2};
use tonic::Code;
use tonic::transport::Channel;

const ZONE: &str = "city";

/// Callers that must not speak for `shard-a` or `shard-b`: another shard's
/// own certificate, and keygen's role certificate (issued to `shard`).
fn impostors(c: &Cluster, addr: &str) -> anyhow::Result<Vec<(&'static str, Client)>> {
    let generic = Channels::tls(c._keys_dir.tls(Role::Shard));
    Ok(vec![
        ("shard-c's certificate", c.client_as("shard-c", addr)?),
        (
            "keygen's shard.crt",
            HandoffClient::new(generic.channel(addr)?),
        ),
    ])
}

type Client = HandoffClient<Channel>;

async fn city(dir: &Directory) -> anyhow::Result<(String, u64)> {
    dir.zone_owner(ZONE)
        .await?
        .ok_or_else(|| anyhow::anyhow!("{ZONE} has no owner"))
}

fn denied<T: std::fmt::Debug>(what: &str, r: Result<T, tonic::Status>) {
    match r {
        Err(e) => assert_eq!(e.code(), Code::PermissionDenied, "{what}: {e:?}"),
        Ok(v) => panic!("{what}: served: {v:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adopt_and_handover_are_served_only_to_the_shard_they_name() -> anyhow::Result<()> {
    let c = cluster().await?;
    let dir = Directory::connect(&c.redis_url).await?;
    let (owner, generation) = city(&dir).await?;
    assert_eq!(owner, "shard-a");
    let adopt = AdoptZoneRequest {
        zone_id: ZONE.into(),
        from_shard_id: "shard-a".into(),
        generation,
        handoff_version: telos_world::handoff::HANDOFF_VERSION,
    };
    let handover = HandoverZoneRequest {
        zone_id: ZONE.into(),
        to_shard_id: "shard-b".into(),
        generation,
    };
    for (who, mut b) in impostors(&c, &c.b.addr)? {
        denied(
            &format!("AdoptZone(from=shard-a) with {who}"),
            b.adopt_zone(adopt.clone()).await,
        );
    }
    for (who, mut a) in impostors(&c, &c.a.addr)? {
        denied(
            &format!("HandoverZone(to=shard-b) with {who}"),
            a.handover_zone(handover.clone()).await,
        );
    }
    // The owner check is not what refused them: the claimed owner at the
    // live generation is exactly what the owner sends.
    assert!(
        !c.b.plain_log().contains("zone adopted"),
        "a refused adopt built a zone"
    );
    assert_eq!(city(&dir).await?, ("shard-a".to_string(), generation));

    // Control: the target asking for the zone for itself is served, and
    // the zone moves — through shard-a's own AdoptZone(from=shard-a) to
    // shard-b, which presents shard-a's certificate and is served.
    let moved = c
        .client_as("shard-b", &c.a.addr)?
        .handover_zone(handover)
        .await?
        .into_inner();
    c.b.wait_log(
        "adoption confirmed: the flip landed zone=\"city\"",
        support::handoff::READY,
    )
    .await?;
    assert_eq!(
        city(&dir).await?,
        ("shard-b".to_string(), moved.new_generation)
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepare_commit_and_abort_are_served_only_to_the_shard_they_name() -> anyhow::Result<()> {
    let c = cluster().await?;
    // A validly signed Prepare from shard-a into shard-b.
    let s = snapshot("Ivy", "shard-b", "forest:eaves", 3);
    for (who, mut b) in impostors(&c, &c.b.addr)? {
        denied(
            &format!("Prepare(from=shard-a) with {who}"),
            b.prepare(request(&s, &c.keys.snapshot)).await,
        );
    }
    let token = c
        .client_as("shard-a", &c.b.addr)?
        .prepare(request(&s, &c.keys.snapshot))
        .await?
        .into_inner()
        .handoff_token;

    // Abort: only the source of the pending record (shard-a) may.
    let abort = AbortRequest {
        handoff_token: token.clone(),
        to_shard_id: "shard-b".into(),
        sig: sign_phase2(&c.keys.handoff, Phase2::Abort, &token, "shard-b"),
    };
    for (who, mut b) in impostors(&c, &c.b.addr)? {
        denied(
            &format!("Abort of shard-a's pending record with {who}"),
            b.abort(abort.clone()).await,
        );
    }
    c.client_as("shard-a", &c.b.addr)?.abort(abort).await?;

    // Commit (destination -> source): only the destination it names. The
    // token is not awaiting a Commit, so the right caller hears NotFound:
    // served, and answered for what the token is.
    let commit = CommitRequest {
        handoff_token: token.clone(),
        to_shard_id: "shard-b".into(),
        sig: sign_phase2(&c.keys.handoff, Phase2::Commit, &token, "shard-b"),
    };
    for (who, mut a) in impostors(&c, &c.a.addr)? {
        denied(
            &format!("Commit(to=shard-b) with {who}"),
            a.commit(commit.clone()).await,
        );
    }
    let err = c
        .client_as("shard-b", &c.a.addr)?
        .commit(commit)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    Ok(())
}
