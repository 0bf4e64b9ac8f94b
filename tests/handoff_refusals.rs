//! The handoff service refuses what no honest peer sends (issue 13): a
//! `HandoverZone` to the owner itself, at generation 0 or a generation that
//! is not the live one, without a target, or racing another hand-over of
//! the same zone; an `AdoptZone` from a shard that is not the live owner at
//! the live generation, or from the adopting shard itself. Each refusal is
//! checked for what it must not have changed: the directory's owner and
//! generation, a logged-in player's play, no zone built on the adopter.

mod support;

use support::handoff::{Cluster, READY, cluster, request, snapshot};
use telos_proto::v1::{AdoptZoneRequest, HandoverZoneRequest};
use telos_redis::directory::Directory;
use telos_testkit::driver::Driver;
use tonic::Code;

const PASSWORD: &str = "correct horse";
const ZONE: &str = "city";
/// A caller's deadline far shorter than any hand-over (an AdoptZone round
/// trip, a flip): the request is abandoned while the hand-over runs.
/// The caller's deadline in the hang-up test: far below the hand-over's own
/// RPC timeout to the target, which is paused meanwhile so the caller is
/// sure to give up first.
const HANG_UP: std::time::Duration = std::time::Duration::from_millis(200);

fn handover(to: &str, generation: u64) -> HandoverZoneRequest {
    HandoverZoneRequest {
        zone_id: ZONE.into(),
        to_shard_id: to.into(),
        generation,
    }
}

fn adopt(from: &str, generation: u64) -> AdoptZoneRequest {
    AdoptZoneRequest {
        zone_id: ZONE.into(),
        from_shard_id: from.into(),
        generation,
        handoff_version: telos_world::handoff::HANDOFF_VERSION,
    }
}

/// The city's live `(owner, generation)`.
async fn owner(dir: &Directory) -> anyhow::Result<(String, u64)> {
    dir.zone_owner(ZONE)
        .await?
        .ok_or_else(|| anyhow::anyhow!("{ZONE} has no owner"))
}

/// A player logged in on the city's owner, and the city's live lease.
async fn player_in_city(c: &Cluster, name: &str) -> anyhow::Result<(Driver, Directory, u64)> {
    let dir = Directory::connect(&c.redis_url).await?;
    let (who, generation) = owner(&dir).await?;
    anyhow::ensure!(who == "shard-a", "the city starts on shard-a, not {who}");
    let p = Driver::login_with(&c.a.addr, Some(&c.gate()), name, PASSWORD, true).await?;
    Ok((p, dir, generation))
}

/// Nothing moved: the city is still shard-a's at `generation`, and the
/// player there is still answered by shard-a without a redirect.
async fn city_untouched(p: &mut Driver, dir: &Directory, generation: u64) -> anyhow::Result<()> {
    assert_eq!(owner(dir).await?, ("shard-a".to_string(), generation));
    let look = p.command("look").await?;
    assert!(!look.is_empty(), "look answered");
    let (zone, _, shard) = p.where_().await?;
    assert_eq!((zone.as_str(), shard.as_str()), (ZONE, "shard-a"));
    assert_eq!(p.redirects, 0, "the player was never moved");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handover_to_the_owner_itself_is_refused_and_the_zone_keeps_serving() -> anyhow::Result<()>
{
    let c = cluster().await?;
    let (mut p, dir, generation) = player_in_city(&c, "Pia").await?;
    let mut a = c.client_as("shard-a", &c.a.addr)?;
    let err = a
        .handover_zone(handover("shard-a", generation))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("itself"), "{err:?}");
    city_untouched(&mut p, &dir, generation).await?;
    // Asked again (the attack was repeatable): still nothing moves.
    let err = a
        .handover_zone(handover("shard-a", generation))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    city_untouched(&mut p, &dir, generation).await
}

/// The city handed to shard-b and back, honestly, so that two generations
/// it once lived at are stale now. Returns them.
async fn bounce_city(c: &Cluster, dir: &Directory) -> anyhow::Result<[u64; 2]> {
    let (_, first) = owner(dir).await?;
    let confirmed = "adoption confirmed: the flip landed zone=\"city\"";
    let second = c
        .client_as("shard-b", &c.a.addr)?
        .handover_zone(handover("shard-b", first))
        .await?
        .into_inner()
        .new_generation;
    c.b.wait_log(confirmed, READY).await?;
    c.client_as("shard-a", &c.b.addr)?
        .handover_zone(handover("shard-a", second))
        .await?;
    c.a.wait_log(confirmed, READY).await?;
    Ok([first, second])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handover_at_generation_zero_a_stale_generation_or_to_nobody_is_refused()
-> anyhow::Result<()> {
    let c = cluster().await?;
    let stale = bounce_city(&c, &Directory::connect(&c.redis_url).await?).await?;
    let (mut p, dir, generation) = player_in_city(&c, "Quin").await?;
    let mut a = c.client_as("shard-b", &c.a.addr)?;
    // Generation 0 once meant "any generation" and moved the zone at once.
    let err = a.handover_zone(handover("shard-b", 0)).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    city_untouched(&mut p, &dir, generation).await?;
    for g in stale.into_iter().chain([generation + 1]) {
        let err = a.handover_zone(handover("shard-b", g)).await.unwrap_err();
        assert_eq!(err.code(), Code::FailedPrecondition, "{g}: {err:?}");
    }
    city_untouched(&mut p, &dir, generation).await?;
    // No target named: the service never picks one for the caller.
    let err = a.handover_zone(handover("", generation)).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    city_untouched(&mut p, &dir, generation).await
}

/// Two hand-overs of one zone at once (a retry racing its original): one
/// moves the zone, the other is refused — before, its fenced flip stopped
/// the zone the first was fanning its players off from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_honest_handover_moves_the_zone_once_and_a_racing_one_is_refused() -> anyhow::Result<()>
{
    let c = cluster().await?;
    let (mut p, dir, generation) = player_in_city(&c, "Rue").await?;
    let (mut first, mut second) = (
        c.client_as("shard-b", &c.a.addr)?,
        c.client_as("shard-b", &c.a.addr)?,
    );
    let (one, two) = tokio::join!(
        first.handover_zone(handover("shard-b", generation)),
        second.handover_zone(handover("shard-b", generation)),
    );
    let (moved, refused) = match (one, two) {
        (Ok(m), Err(r)) | (Err(r), Ok(m)) => (m.into_inner(), r),
        other => panic!("exactly one hand-over must move the zone: {other:?}"),
    };
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    let (who, now) = owner(&dir).await?;
    assert_eq!(who, "shard-b");
    assert!(
        now > generation,
        "a new generation: {now} after {generation}"
    );
    assert_eq!(moved.new_generation, now);
    // The player was fanned off in place, not dropped.
    assert!(!p.command("look").await?.is_empty());
    let (zone, _, shard) = p.where_().await?;
    assert_eq!((zone.as_str(), shard.as_str()), (ZONE, "shard-b"));
    assert_eq!(p.redirects, 1, "redirected once, in place");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adopt_from_anyone_but_the_live_owner_is_refused_and_builds_nothing()
-> anyhow::Result<()> {
    let c = cluster().await?;
    let (mut p, dir, generation) = player_in_city(&c, "Sol").await?;
    let mut b = c.client_as("shard-a", &c.b.addr)?;
    let refused = [
        (
            "a shard that is not the owner",
            adopt("shard-c", generation),
        ),
        ("the adopter itself", adopt("shard-b", generation)),
        ("nobody", adopt("", generation)),
        ("generation 0", adopt("shard-a", 0)),
        (
            "a generation before the live one",
            adopt("shard-a", generation - 1),
        ),
        ("a future generation", adopt("shard-a", generation + 1)),
    ];
    for (what, req) in refused {
        // Each from the shard it names (its own certificate), so that what
        // refuses it is the owner check, not the certificate's.
        let from = match req.from_shard_id.as_str() {
            "" => "shard-c",
            named => named,
        };
        let err = c
            .client_as(from, &c.b.addr)?
            .adopt_zone(req)
            .await
            .unwrap_err();
        assert!(
            matches!(err.code(), Code::FailedPrecondition | Code::InvalidArgument),
            "{what}: {err:?}"
        );
    }
    // The owner asked to adopt from itself at its own live generation
    // passes the owner check; it is refused for what it is.
    let err = c
        .client_as("shard-a", &c.a.addr)?
        .adopt_zone(adopt("shard-a", generation))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    // An unknown zone, even from the "owner" at a generation.
    let mut unknown = adopt("shard-a", generation);
    unknown.zone_id = "atlantis".into();
    let err = b.adopt_zone(unknown).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    // Nothing was built on shard-b: it does not serve the city (a signed
    // Prepare into it is refused as not owned), and never logged adopting.
    let into_city = snapshot("Sol", "shard-b", "city:square", 4);
    let err = b
        .prepare(request(&into_city, &c.keys.snapshot))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(
        !c.b.plain_log().contains("zone adopted"),
        "a refused adopt built a zone"
    );
    // The directory is unchanged and the city plays on.
    city_untouched(&mut p, &dir, generation).await
}

/// A caller that hangs up (here: its deadline passes at once) does not cut
/// the hand-over it asked for half-way: it completes — before, the dropped
/// request could stop the zone's renewal and never flip the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handover_whose_caller_hangs_up_still_completes() -> anyhow::Result<()> {
    let c = cluster().await?;
    let (mut p, dir, generation) = player_in_city(&c, "Tam").await?;
    let mut req = tonic::Request::new(handover("shard-b", generation));
    req.set_timeout(HANG_UP);
    // Shard-b is paused, so the hand-over waits on its AdoptZone and the
    // caller's deadline passes first whatever the machine's speed (with a
    // running target the hand-over sometimes won the race and answered).
    c.b.signal(libc::SIGSTOP);
    let answer = c.client_as("shard-b", &c.a.addr)?.handover_zone(req).await;
    c.b.signal(libc::SIGCONT);
    let err = answer.unwrap_err();
    assert!(
        matches!(err.code(), Code::Cancelled | Code::DeadlineExceeded),
        "the caller gave up before the answer: {err:?}"
    );
    c.b.wait_log("adoption confirmed: the flip landed zone=\"city\"", READY)
        .await?;
    assert_eq!(owner(&dir).await?.0, "shard-b");
    let (zone, _, shard) = p.where_().await?;
    assert_eq!((zone.as_str(), shard.as_str()), (ZONE, "shard-b"));
    Ok(())
}
