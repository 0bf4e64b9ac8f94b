//! A session's streams: a connection's newer stream (a resume after the
//! gate gave the old one up) carries the session; the old stream's end,
//! arriving late (its reset held by a cut link until it healed), never
//! ends it.

use super::tests_quits::{claim, say, setup};
use crate::zone::handle::InputReply;

/// Before, a stream's end detached whichever session its connection had:
/// a resumed player's new stream ended 80 ms after it attached, its
/// takeover view with it, when the old stream's reset arrived (partition
/// seed 3030, a cut gate link healing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_streams_end_never_ends_the_newer_one() -> anyhow::Result<()> {
    let s = setup().await?;
    let (old, _old_frames) = claim(&s, "Ada", "c-1").await?;
    let old_stream = old.meta.stream.sender().downgrade();
    // Something still holds the old stream open (a stream's end waiting
    // for room, a leaver's save task): it is alive, and still not this
    // session's.
    let _held_open = old.meta.stream.sender().clone();
    s.zone.join(old).await?;
    // The gate gave the old stream up and resumed on a new one.
    let (new, _new_frames) = claim(&s, "Ada", "c-1").await?;
    let new_stream = new.meta.stream.sender().downgrade();
    s.zone.join(new).await?;
    s.zone.detach("ada", "c-1", old_stream).await;
    let reply = say(&s, "Ada", "c-1", 1, "look").await;
    assert!(
        matches!(reply, InputReply::Applied),
        "the old stream's end ended the new one's session"
    );
    s.zone.detach("ada", "c-1", new_stream).await;
    let reply = say(&s, "Ada", "c-1", 2, "look").await;
    assert!(
        matches!(reply, InputReply::Gone),
        "its own stream's end detaches it"
    );
    Ok(())
}
