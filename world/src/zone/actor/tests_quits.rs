//! Leavers saved off the actor's loop (issue 18), against a real Redis
//! reached through the testkit's TCP proxy, which can slow every save.

use std::time::Duration;

use telos_proto::v1::{Attached, Closed, ServerFrame, server_frame::Frame};
use telos_redis::store::Store;
use telos_testkit::RedisServer;
use telos_testkit::proxy::{LinkMode, Proxy};
use tokio::sync::mpsc;

use super::TAKEN_OVER;
use super::tests::{WAIT, city};
use crate::model::Game;
use crate::zone::handle::{InputReply, JoinError, ZoneHandle};
use crate::zone::roster::Roster;
use crate::zone::session::{GateStream, Joining, OUT_CHANNEL, SessionMeta};

/// A password hash no test logs in with (no hash is spent on a crowd).
const PHC: &str = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA";

/// The store as the test sees it (direct), the zone's store behind `proxy`.
pub(super) struct Setup {
    _redis: RedisServer,
    pub(super) proxy: Proxy,
    pub(super) store: Store,
    pub(super) zone: ZoneHandle,
    game: std::sync::Arc<dyn Game>,
    roster: Roster,
}

pub(super) async fn setup() -> anyhow::Result<Setup> {
    let redis = RedisServer::start()?;
    let proxy = Proxy::start("127.0.0.1:0", &format!("127.0.0.1:{}", redis.port), None).await?;
    let (zone, game, roster) = city(&redis, &format!("redis://{}/", proxy.addr)).await?;
    let store = Store::connect(&redis.url).await?;
    Ok(Setup {
        _redis: redis,
        proxy,
        store,
        zone,
        game,
        roster,
    })
}

/// What a session was sent, read as it comes (as a gate reads: a crowd's
/// room chatter never fills the out channel and wedges the session).
pub(super) type Frames = mpsc::UnboundedReceiver<ServerFrame>;

/// Create `name`'s row, claim it as a login does, and join it (connection
/// `conn`); its frames.
pub(super) async fn login(s: &Setup, name: &str, conn: &str) -> anyhow::Result<Frames> {
    let (joining, frames) = claim(s, name, conn).await?;
    s.zone.join(joining).await?;
    Ok(frames)
}

/// Create `name`'s row if need be and claim it as a login does (minting
/// its next epoch), for connection `conn`: the join to send, and the
/// session's frames.
pub(super) async fn claim(s: &Setup, name: &str, conn: &str) -> anyhow::Result<(Joining, Frames)> {
    let fresh = s.game.new_player(name).dump_state_json();
    if s.store.load(name).await?.is_none() {
        s.store.create_character_hashed(name, PHC, &fresh).await?;
    }
    let claimed = s.store.claim_character(name).await?;
    let character = s
        .game
        .load_player(&claimed.row.state_json, Default::default())?;
    let (out, mut from_zone) = mpsc::channel(OUT_CHANNEL);
    let (read, frames) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(f) = from_zone.recv().await {
            let _ = read.send(f);
        }
    });
    let meta = SessionMeta {
        conn_id: conn.into(),
        epoch: claimed.epoch,
        claim: claimed.claim,
        departure_claim: None,
        state_version: claimed.row.state_version,
        applied_seq: 0,
        saved_seq: 0,
        dirty: false,
        quit: false,
        stream: GateStream::new(out),
        persist_id: claimed.row.persist_id.clone(),
        chat: Default::default(),
        commit: None,
    };
    let attached = Attached {
        ack_input_seq: 0,
        name: name.into(),
        credential: String::new(),
        shard_id: "shard-a".into(),
    };
    let joining = Joining {
        character,
        meta,
        attached,
        arrival: crate::model::Arrival::Appears,
    };
    Ok((joining, frames))
}

pub(super) async fn say(s: &Setup, name: &str, conn: &str, seq: u64, line: &str) -> InputReply {
    let key = name.to_lowercase();
    tokio::time::timeout(WAIT, s.zone.input(&key, conn, seq, line.into()))
        .await
        .expect("the zone answers")
        .expect("the zone runs")
}

/// Read `frames` (after `seen`, read before) up to the session's
/// `Closed`: it, and the highest `DurableAck` before it.
pub(super) async fn until_closed(frames: &mut Frames, seen: Vec<ServerFrame>) -> (Closed, u64) {
    let mut durable = 0;
    let mut seen = seen.into_iter();
    loop {
        let frame = match seen.next() {
            Some(f) => f,
            None => tokio::time::timeout(WAIT, frames.recv())
                .await
                .expect("the session is closed")
                .expect("the stream stays open until closed"),
        };
        match frame.frame {
            Some(Frame::DurableAck(a)) => durable = durable.max(a.seq),
            Some(Frame::Closed(c)) => return (c, durable),
            _ => {}
        }
    }
}

/// The text `frames` carry up to the `InputAck` of line `seq`.
async fn until_ack(frames: &mut Frames, seq: u64) -> String {
    let mut all = String::new();
    loop {
        let frame = tokio::time::timeout(WAIT, frames.recv())
            .await
            .expect("the line is acknowledged")
            .expect("the stream stays open");
        match frame.frame {
            Some(Frame::Output(o)) => all.push_str(&format!("{o:?}")),
            Some(Frame::InputAck(a)) if a.seq >= seq => return all,
            _ => {}
        }
    }
}

/// Issue 18: 200 players of one zone hang up at once while every save
/// takes a slow round trip; a bystander's commands are answered while the
/// crowd's saves are still under way (before the old code answered, every
/// quitter had been saved and closed: it saved them one by one inside the
/// actor). Every quitter is still closed `Goodbye.`, final, only after a
/// `DurableAck` for its last line, with the quit mark on its row and its
/// resume credential revoked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crowd_quitting_does_not_hold_a_bystander() -> anyhow::Result<()> {
    const CROWD: usize = 200;
    let s = setup().await?;
    let mut crowd = Vec::new();
    for i in 0..CROWD {
        let (name, conn) = (format!("Q{i:03}"), format!("qc-{i}"));
        let frames = login(&s, &name, &conn).await?;
        say(&s, &name, &conn, 1, "say farewell").await;
        let credential = s
            .store
            .issue_credential(&name, &conn, Duration::from_secs(600))
            .await?;
        crowd.push((name, conn, frames, credential));
    }
    let _bystander = login(&s, "Bystander", "bc").await?;
    // Every save from here takes two delayed legs.
    s.proxy.set(LinkMode::Delay(Duration::from_millis(50)));
    for (name, conn, ..) in &crowd {
        s.zone.hangup(&name.to_lowercase(), conn).await;
    }
    for seq in 1..=3 {
        let reply = say(&s, "Bystander", "bc", seq, "look").await;
        assert!(matches!(reply, InputReply::Applied), "look not applied");
    }
    // The bystander was answered behind the hang-ups, not behind their
    // saves: most quitters are still waiting for theirs.
    // A login now is routed to this zone, which holds the newest state
    // until the save settles.
    let listed = crowd
        .iter()
        .filter(|(name, ..)| s.roster.zone_of(&name.to_lowercase()).is_some())
        .count();
    let mut closed_by_then = 0;
    let mut seen = Vec::new();
    for (_, _, frames, _) in &mut crowd {
        let mut mine = Vec::new();
        while let Ok(f) = frames.try_recv() {
            closed_by_then += usize::from(matches!(f.frame, Some(Frame::Closed(_))));
            mine.push(f);
        }
        seen.push(mine);
    }
    assert!(
        closed_by_then < CROWD / 2,
        "the bystander waited for {closed_by_then} of {CROWD} quitters' saves"
    );
    assert!(
        listed >= CROWD / 2,
        "only {listed} of {CROWD} quitters still placed here while saving"
    );
    s.proxy.heal();
    for ((name, conn, frames, credential), seen) in crowd.iter_mut().zip(seen) {
        let (closed, durable) = until_closed(frames, seen).await;
        assert_eq!((closed.reason.as_str(), closed.r#final), ("Goodbye.", true));
        assert_eq!(
            durable, 1,
            "{name}: Goodbye before its last line was durable"
        );
        let row = s.store.load(name).await?.expect("the row");
        assert!(row.quit_by(conn), "{name}: no quit mark on the row");
        assert!(
            !s.store.check_credential(name, conn, credential).await?,
            "{name}: the resume credential outlived the quit"
        );
    }
    // Every leaver is off the roster once its save settled (the actor
    // forgets it right after the close; read again on its next turn).
    assert!(matches!(
        say(&s, "Bystander", "bc", 4, "look").await,
        InputReply::Applied
    ));
    let still: Vec<_> = crowd
        .iter()
        .filter(|(name, ..)| s.roster.zone_of(&name.to_lowercase()).is_some())
        .map(|(name, ..)| name.clone())
        .collect();
    assert!(still.is_empty(), "quitters still online: {still:?}");
    Ok(())
}

/// A quit whose save fails (the store resets every connection) is closed
/// not-final, so the gate resumes and replays it; no `DurableAck` for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quit_whose_save_fails_closes_not_final() -> anyhow::Result<()> {
    let s = setup().await?;
    let mut frames = login(&s, "Ada", "c-1").await?;
    say(&s, "Ada", "c-1", 1, "say one last thing").await;
    s.proxy.set(LinkMode::Reset);
    let reply = say(&s, "Ada", "c-1", 2, "quit").await;
    assert!(
        matches!(reply, InputReply::Gone),
        "the quit line left no session"
    );
    let (closed, durable) = until_closed(&mut frames, Vec::new()).await;
    assert!(!closed.r#final, "closed final unsaved: {closed:?}");
    // Output commit: the line answered before the quit is durable (its
    // answer waited for that); the quit is not.
    assert_eq!(durable, 1);
    s.proxy.heal();
    let row = s.store.load("Ada").await?.expect("the row");
    assert!(!row.quit_by("c-1"), "the quit is not on the row");
    Ok(())
}

/// A login racing a quit's save (its claim lands first, so the save is
/// refused by the login's newer epoch) plays on from the state the player
/// quit with — here the room they walked to — never from the older row the
/// claim read. The old code closed the quitter as claimed elsewhere and let
/// the login in from that row, a room behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_racing_a_quits_save_gets_the_state_quit_with() -> anyhow::Result<()> {
    let s = setup().await?;
    let mut frames = login(&s, "Ada", "c-1").await?;
    say(&s, "Ada", "c-1", 1, "north").await;
    s.proxy.set(LinkMode::Delay(Duration::from_millis(100)));
    s.zone.hangup("ada", "c-1").await;
    // The direct store: this claim lands while the quit's save is delayed.
    let mut again = login(&s, "Ada", "c-2").await?;
    let (closed, _) = until_closed(&mut frames, Vec::new()).await;
    // The login took the quitter over (the race this test is about: its
    // claim beat the save, which was refused).
    assert_eq!((closed.reason.as_str(), closed.r#final), (TAKEN_OVER, true));
    // Its entry view ends as every login's does, with the InputAck the
    // gate's prompt follows (a login that waited for the save had none).
    let entry = until_ack(&mut again, 0).await;
    assert!(entry.contains("Temple Street"), "{entry}");
    say(&s, "Ada", "c-2", 1, "look").await;
    let seen = until_ack(&mut again, 1).await;
    assert!(
        seen.contains("Temple Street"),
        "the login did not come back where Ada quit: {seen}"
    );
    Ok(())
}

/// The connection that quit resuming while its quit's save is in flight
/// (its gate lost the stream before the `Goodbye.`): its claim beats the
/// save, but the session is not put back into play with the quit applied
/// and unanswered — it ends again, `Goodbye.` after its quit is saved
/// under the resume's epoch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_racing_its_own_quits_save_says_goodbye() -> anyhow::Result<()> {
    let s = setup().await?;
    let mut frames = login(&s, "Ada", "c-1").await?;
    say(&s, "Ada", "c-1", 1, "say bye").await;
    s.proxy.set(LinkMode::Delay(Duration::from_millis(300)));
    say(&s, "Ada", "c-1", 2, "quit").await;
    let mut resumed = login(&s, "Ada", "c-1").await?;
    let (closed, _) = until_closed(&mut frames, Vec::new()).await;
    assert_eq!(
        (closed.reason.as_str(), closed.r#final),
        ("resumed on a newer link", false),
        "the race"
    );
    s.proxy.heal();
    let (closed, durable) = until_closed(&mut resumed, Vec::new()).await;
    assert_eq!((closed.reason.as_str(), closed.r#final), ("Goodbye.", true));
    assert_eq!(durable, 2, "the quit line is durable");
    let row = s.store.load("Ada").await?.expect("the row");
    assert!(row.quit_by("c-1"), "the quit mark is on the row");
    Ok(())
}

/// A login on another connection takes over a quitter whose final save
/// then fails (here: slower than the save timeout): the quitter's lines
/// live on in the login's session, so the quitter is closed final. The old
/// code closed it not-final because its save failed; its gate resumed,
/// took the login's session over and replayed the quitter's lines onto the
/// in-memory state that already held them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quitter_taken_over_by_another_login_is_closed_final_even_unsaved() -> anyhow::Result<()>
{
    let s = setup().await?;
    let mut frames = login(&s, "Ada", "c-1").await?;
    let credential = s
        .store
        .issue_credential("Ada", "c-1", Duration::from_secs(60))
        .await?;
    say(&s, "Ada", "c-1", 1, "journal kept once").await;
    s.proxy
        .set(LinkMode::Delay(crate::zone::persist::SAVE_TIMEOUT * 2));
    say(&s, "Ada", "c-1", 2, "quit").await;
    // The direct store: this claim and join do not wait on the slow link.
    let mut again = login(&s, "Ada", "c-2").await?;
    let (closed, _) = until_closed(&mut frames, Vec::new()).await;
    assert_eq!(
        (closed.reason.as_str(), closed.r#final),
        (TAKEN_OVER, true),
        "a quitter taken over, its save failed"
    );
    s.proxy.heal();
    say(&s, "Ada", "c-2", 1, "journal").await;
    let seen = until_ack(&mut again, 1).await;
    assert_eq!(
        seen.matches("kept once").count(),
        1,
        "the login plays on with the quitter's line, once: {seen}"
    );
    // Nor can the quitter's gate resume over the login with its credential.
    let deadline = tokio::time::Instant::now() + WAIT;
    while s.store.check_credential("Ada", "c-1", &credential).await? {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the superseded connection's credential still resumes"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// Two claims wait for a quitter's save — its own connection's resume,
/// claimed first, and a login from another connection, claimed later —
/// and reach the zone in that order too. The newest claim takes the
/// character over and the older is refused (its shard claims again). The
/// old code handed the character to whichever joined first, then let the
/// other take it over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_claims_waiting_for_a_quit_the_newer_takes_over() -> anyhow::Result<()> {
    let s = setup().await?;
    let mut frames = login(&s, "Ada", "c-1").await?;
    say(&s, "Ada", "c-1", 1, "journal kept once").await;
    s.proxy.set(LinkMode::Delay(Duration::from_millis(300)));
    say(&s, "Ada", "c-1", 2, "quit").await;
    let (resume, _resumed) = claim(&s, "Ada", "c-1").await?;
    let (login2, mut again) = claim(&s, "Ada", "c-2").await?;
    let zone = s.zone.clone();
    let older = tokio::spawn(async move { zone.join(resume).await });
    // The resume's join is queued first, the login's after it: the order
    // of arrival is not the order of the claims.
    tokio::time::sleep(Duration::from_millis(50)).await;
    s.zone.join(login2).await?;
    let older = older.await?;
    assert!(
        matches!(older, Err(JoinError::Superseded)),
        "the older claim joined: {older:?}"
    );
    let (closed, _) = until_closed(&mut frames, Vec::new()).await;
    assert_eq!((closed.reason.as_str(), closed.r#final), (TAKEN_OVER, true));
    s.proxy.heal();
    say(&s, "Ada", "c-2", 1, "journal").await;
    let seen = until_ack(&mut again, 1).await;
    assert!(
        seen.contains("kept once"),
        "the newer login plays on with the quitter's line: {seen}"
    );
    Ok(())
}

/// Issue 17, overlap seed 409998530: a crashed gate's resume (its stream
/// gone) claimed after the player's new login through another gate, but
/// reached the zone first. The login took that orphan over under its own,
/// older claim, which the orphan's newer one refused at the first save: the
/// player was closed "Claimed by a newer session." and the lines it had
/// been answered for were lost. The zone now refuses the older claim (the
/// shard claims again: `play::attach`), and the newer claim takes over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_claim_never_takes_over_a_newer_one() -> anyhow::Result<()> {
    let s = setup().await?;
    let (login2, _) = claim(&s, "Ada", "c-2").await?;
    let (mut orphan, _) = claim(&s, "Ada", "c-9").await?;
    // Its gate is gone: nothing reads the stream.
    let (dead, _) = mpsc::channel(OUT_CHANNEL);
    orphan.meta.stream.redirect_to(dead);
    s.zone.join(orphan).await?;
    let stale = s.zone.join(login2).await;
    assert!(
        matches!(stale, Err(JoinError::Superseded)),
        "the older claim took the newer over: {stale:?}"
    );
    // Claimed again, as the shard does: the newest claim takes over.
    let mut frames = login(&s, "Ada", "c-2").await?;
    say(&s, "Ada", "c-2", 1, "journal kept").await;
    // Its save: the quit's.
    say(&s, "Ada", "c-2", 2, "quit").await;
    let (closed, durable) = until_closed(&mut frames, Vec::new()).await;
    assert_eq!(
        (closed.reason.as_str(), closed.r#final, durable),
        ("Goodbye.", true, 2),
        "the login's lines were saved"
    );
    Ok(())
}

/// A hand-over's seal (and likewise a drain, a transfer's close, a fence
/// and a shutdown) settles the final saves still in flight before it
/// answers: by then every quitter's quit is on its row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seal_waits_for_the_quits_in_flight() -> anyhow::Result<()> {
    const CROWD: usize = 40;
    let s = setup().await?;
    let mut crowd = Vec::new();
    for i in 0..CROWD {
        let (name, conn) = (format!("S{i:02}"), format!("sc-{i}"));
        let frames = login(&s, &name, &conn).await?;
        say(&s, &name, &conn, 1, "say so long").await;
        crowd.push((name, conn, frames));
    }
    s.proxy.set(LinkMode::Delay(Duration::from_millis(50)));
    for (name, conn, _) in &crowd {
        s.zone.hangup(&name.to_lowercase(), conn).await;
    }
    assert!(tokio::time::timeout(WAIT, s.zone.seal()).await?, "sealed");
    for (name, conn, _) in &crowd {
        let row = s.store.load(name).await?.expect("the row");
        assert!(
            row.quit_by(conn),
            "{name}: the seal answered before its quit was saved"
        );
    }
    for (name, _, frames) in &mut crowd {
        let (closed, durable) = until_closed(frames, Vec::new()).await;
        assert_eq!(
            (closed.reason.as_str(), closed.r#final, durable),
            ("Goodbye.", true, 1),
            "{name}"
        );
    }
    Ok(())
}
