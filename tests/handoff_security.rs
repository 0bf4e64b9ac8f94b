//! Handoff security and trust, each a test against real shards: forged,
//! re-targeted or edited snapshots; forged and replayed phase-2 messages;
//! instance destinations; tier elevation across a walk; hostile aliases;
//! keyless shards.

mod support;

use std::collections::BTreeMap;

use ed25519_dalek::SigningKey;
use support::handoff::{cluster, request, snapshot};
use telos_proto::v1::handoff_client::HandoffClient;
use telos_proto::v1::server_frame::Frame;
use telos_proto::v1::{AbortRequest, CommitRequest};
use telos_testkit::RedisServer;
use telos_testkit::driver::Driver;
use telos_testkit::play::{Channels, PlayStream};
use telos_testkit::process::{WorldOpts, start_world};
use telos_testkit::world::path_to_zone;
use telos_testkit::world::starter_zones;
use telos_world::game::Tier;
use telos_world::handoff::phase2::{Phase2, sign_phase2};
use telos_world::handoff::snapshot::handoff_token;
use tonic::Code;

const PASSWORD: &str = "correct horse";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepare_refuses_every_forged_or_misdirected_snapshot() -> anyhow::Result<()> {
    let c = cluster().await?;
    let mut b = c.client_as("shard-a", &c.b.addr)?;
    let good = snapshot("Ivy", "shard-b", "forest:eaves", 3);

    // Signed with a key that is not the cluster's snapshot key.
    let rogue = SigningKey::from_bytes(&[7; 32]);
    let err = b.prepare(request(&good, &rogue)).await.unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    // Signed with the handoff key (the other credential): still refused.
    let err = b
        .prepare(request(&good, &c.keys.handoff))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");

    // Re-targeted: a validly signed snapshot for shard-c sent to shard-b.
    let other = snapshot("Ivy", "shard-c", "forest:eaves", 3);
    let err = b
        .prepare(request(&other, &c.keys.snapshot))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    // Re-targeted after signing: the envelope says b, the signature says c.
    let mut req = request(&other, &c.keys.snapshot);
    let mut edited = other.clone();
    edited.to_shard = "shard-b".into();
    req.snapshot = edited.encode();
    req.to_shard_id = "shard-b".into();
    let err = b.prepare(req).await.unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");

    // The seed's collision: an ordinary player's account moved into tier.
    let mut plain = good.clone();
    plain.tier = String::new();
    plain.account = "admin".into();
    let mut req = request(&plain, &c.keys.snapshot);
    let mut moved = plain.clone();
    moved.tier = "admin".into();
    moved.account = String::new();
    req.snapshot = moved.encode();
    let err = b.prepare(req).await.unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");

    // A builder's snapshot edited to say admin.
    let mut builder = good.clone();
    builder.tier = Tier::Builder.to_string();
    let mut req = request(&builder, &c.keys.snapshot);
    let mut elevated = builder.clone();
    elevated.tier = Tier::Admin.to_string();
    req.snapshot = elevated.encode();
    let err = b.prepare(req).await.unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");

    // Instance-shaped destination, even validly signed.
    let inst = snapshot("Ivy", "shard-b", "crypt#1:stair", 3);
    let err = b
        .prepare(request(&inst, &c.keys.snapshot))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    // A zone shard-b does not own.
    let city = snapshot("Ivy", "shard-b", "city:square", 3);
    let err = b
        .prepare(request(&city, &c.keys.snapshot))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");

    // The genuine one is accepted, and a retry converges on one token.
    let t1 = b
        .prepare(request(&good, &c.keys.snapshot))
        .await?
        .into_inner();
    let t2 = b
        .prepare(request(&good, &c.keys.snapshot))
        .await?
        .into_inner();
    assert_eq!(t1.handoff_token, t2.handoff_token);
    assert_eq!(t1.handoff_token, handoff_token("ivy", 3));
    assert_eq!(t1.target_shard_addr, c.b.addr);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_and_replayed_phase_two_messages_are_refused() -> anyhow::Result<()> {
    let c = cluster().await?;
    let mut b = c.client_as("shard-a", &c.b.addr)?;
    // The character exists (a row to fence), but is not online.
    Driver::login_with(&c.a.addr, Some(&c.gate()), "Jade", PASSWORD, true)
        .await?
        .command("quit")
        .await
        .ok();
    let good = snapshot("Jade", "shard-b", "forest:eaves", 5);
    let token = b
        .prepare(request(&good, &c.keys.snapshot))
        .await?
        .into_inner()
        .handoff_token;
    // The token is recomputable from public inputs...
    assert_eq!(token, handoff_token("jade", 5));
    // ...but an Abort without a valid signature is refused.
    let forged = AbortRequest {
        handoff_token: token.clone(),
        to_shard_id: "shard-b".into(),
        sig: vec![0; 64],
    };
    assert_eq!(
        b.abort(forged).await.unwrap_err().code(),
        Code::PermissionDenied
    );
    // A validly signed Abort captured for destination shard-a, replayed
    // against shard-b (same token): refused.
    let for_a = AbortRequest {
        handoff_token: token.clone(),
        to_shard_id: "shard-a".into(),
        sig: sign_phase2(&c.keys.handoff, Phase2::Abort, &token, "shard-a"),
    };
    assert_eq!(
        b.abort(for_a.clone()).await.unwrap_err().code(),
        Code::PermissionDenied
    );
    let relabelled = AbortRequest {
        to_shard_id: "shard-b".into(),
        ..for_a
    };
    assert_eq!(
        b.abort(relabelled).await.unwrap_err().code(),
        Code::PermissionDenied
    );
    // A signed Commit is not an Abort.
    let commit_sig = AbortRequest {
        handoff_token: token.clone(),
        to_shard_id: "shard-b".into(),
        sig: sign_phase2(&c.keys.handoff, Phase2::Commit, &token, "shard-b"),
    };
    assert_eq!(
        b.abort(commit_sig).await.unwrap_err().code(),
        Code::PermissionDenied
    );
    // The pending record survived all of that: attaching still works.
    let mut s = PlayStream::open_with(&c.b.addr, Some(&c.gate())).await?;
    s.attach(&token, "conn-x").await?;
    s.until(|f| matches!(f, Frame::Attached(_)).then_some(()))
        .await?;

    // A real walk: forge the destination's Commit to the source while the
    // player is in flight; the source refuses it, the real one goes through.
    let mut p = Driver::login_with(&c.a.addr, Some(&c.gate()), "Kit", PASSWORD, true).await?;
    let route = path_to_zone("city:square", "forest");
    let (last, approach) = route.split_last().expect("route");
    for dir in approach {
        p.command(dir).await?;
    }
    let seq = p.send(last).await?;
    let redirect = p
        .stream
        .until(|f| match f {
            Frame::Redirect(r) => Some(r.clone()),
            _ => None,
        })
        .await?;
    let mut a = c.client_as("shard-b", &c.a.addr)?;
    let forged_commit = CommitRequest {
        handoff_token: redirect.token.clone(),
        to_shard_id: "shard-b".into(),
        sig: vec![1; 64],
    };
    assert_eq!(
        a.commit(forged_commit).await.unwrap_err().code(),
        Code::PermissionDenied
    );
    let wrong_dest = CommitRequest {
        handoff_token: redirect.token.clone(),
        to_shard_id: "shard-c".into(),
        sig: sign_phase2(&c.keys.handoff, Phase2::Commit, &redirect.token, "shard-c"),
    };
    assert_eq!(
        a.commit(wrong_dest).await.unwrap_err().code(),
        Code::PermissionDenied
    );
    p.stream = PlayStream::open_with(&redirect.addr, Some(&c.gate())).await?;
    p.stream.attach(&redirect.token, &p.conn_id).await?;
    let ack = p
        .stream
        .until(|f| match f {
            Frame::Attached(a) => Some(a.ack_input_seq),
            _ => None,
        })
        .await?;
    assert_eq!(
        ack, seq,
        "the destination resumes right after the move line"
    );
    let (zone, _, shard) = p.where_().await?;
    assert_eq!((zone.as_str(), shard.as_str()), ("forest", "shard-b"));
    // Once the source has accepted the genuine Commit, a replay of it is
    // refused. The destination saves only after its Commit resolved, so a
    // line made durable there (its `DurableAck`) means the source has it:
    // without this wait a loaded machine let the replay arrive first, and
    // it was accepted as the Commit itself.
    let noted = p.send("journal committed").await?;
    p.stream
        .until(|f| match f {
            Frame::DurableAck(a) if a.seq >= noted => Some(()),
            _ => None,
        })
        .await?;
    let replay = CommitRequest {
        handoff_token: redirect.token.clone(),
        to_shard_id: "shard-b".into(),
        sig: sign_phase2(&c.keys.handoff, Phase2::Commit, &redirect.token, "shard-b"),
    };
    assert_eq!(a.commit(replay).await.unwrap_err().code(), Code::NotFound);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_aliases_are_resanitized_on_arrival() -> anyhow::Result<()> {
    let c = cluster().await?;
    let mut b = c.client_as("shard-a", &c.b.addr)?;
    Driver::login_with(&c.a.addr, Some(&c.gate()), "Lark", PASSWORD, true)
        .await?
        .command("quit")
        .await
        .ok();
    let mut s = snapshot("Lark", "shard-b", "forest:eaves", 2);
    s.aliases = BTreeMap::from([
        ("look".to_string(), "quit".to_string()),
        ("gg".to_string(), "get\u{1b}[31m all\u{7}".to_string()),
        ("x".repeat(40), "too long a name".to_string()),
    ]);
    let token = b
        .prepare(request(&s, &c.keys.snapshot))
        .await?
        .into_inner()
        .handoff_token;
    let mut p = PlayStream::open_with(&c.b.addr, Some(&c.gate())).await?;
    p.attach(&token, "conn-x").await?;
    p.until(|f| matches!(f, Frame::Attached(_)).then_some(()))
        .await?;
    let list = p.command(1, "alias").await?;
    assert!(!list.contains("look"), "reserved name dropped: {list}");
    assert!(
        !list.contains('\u{1b}') && !list.contains('\u{7}'),
        "{list:?}"
    );
    assert!(list.contains("gg"), "{list}");
    assert!(!list.contains(&"x".repeat(40)), "{list}");
    // The carried state arrived: the journal came with the snapshot.
    assert!(p.command(2, "journal").await?.contains("carried across"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_keeps_elevation_across_shards_and_loses_wizinvis() -> anyhow::Result<()> {
    let c = cluster().await?;
    let store = telos_redis::store::Store::connect(&c.redis_url).await?;
    // Create, then raise the tier (takes effect at the next login).
    drop(Driver::login_with(&c.a.addr, Some(&c.gate()), "Mara", PASSWORD, true).await?);
    store.set_tier("mara", "admin").await?;
    let mut admin = Driver::login_with(&c.a.addr, Some(&c.gate()), "Mara", PASSWORD, false).await?;
    let mut watcher = Driver::login_with(&c.a.addr, Some(&c.gate()), "Ned", PASSWORD, true).await?;
    assert!(admin.command("score").await?.contains("Tier: admin"));
    assert!(admin.command("wizinvis").await?.contains("fade"));
    let who = watcher.command("who").await?;
    assert!(!who.contains("Mara"), "hidden from a player: {who}");
    let route = path_to_zone("city:square", "forest");
    for dir in &route {
        admin.command(dir).await?;
    }
    let (zone, _, shard) = admin.where_().await?;
    assert_eq!((zone.as_str(), shard.as_str()), ("forest", "shard-b"));
    assert!(admin.command("score").await?.contains("Tier: admin"));
    // wizinvis cleared on arrival: visible again (poll until the online
    // list reflects the arrival).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let who = watcher.command("who").await?;
        if who.contains("Mara") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{who}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // A plain player cannot wizinvis at all.
    assert!(watcher.command("wizinvis").await?.contains("can't"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyless_shard_never_hands_off() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let others: Vec<String> = starter_zones()
        .into_iter()
        .filter(|z| z != "city")
        .collect();
    let others: Vec<&str> = others.iter().map(String::as_str).collect();
    let a = start_world(WorldOpts::new("shard-a", &redis.url, &["city"]))?;
    let _b = start_world(WorldOpts::new("shard-b", &redis.url, &others))?;
    let mut p = Driver::login(&a.addr, "Opal", PASSWORD, true).await?;
    let route = path_to_zone("city:square", "forest");
    let (last, approach) = route.split_last().expect("route");
    for dir in approach {
        p.command(dir).await?;
    }
    let (_, before, _) = p.where_().await?;
    let text = p.command(last).await?;
    assert!(text.contains("cannot send you"), "{text}");
    let seq = p.send("journal still here").await?;
    p.wait_ack(seq).await?;
    let (zone, room, shard) = p.where_().await?;
    assert_eq!(
        (zone.as_str(), room.as_str(), shard.as_str()),
        ("city", before.as_str(), "shard-a")
    );
    assert_eq!(p.redirects, 0);
    // And a keyless destination refuses Prepare outright, as something
    // no retry changes.
    let mut b = HandoffClient::new(Channels::default().channel(&_b.addr)?);
    let s = snapshot("Opal", "shard-b", "forest:eaves", 9);
    let err = b
        .prepare(request(&s, &SigningKey::from_bytes(&[3; 32])))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented);
    Ok(())
}
