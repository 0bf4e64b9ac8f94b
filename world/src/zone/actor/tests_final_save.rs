//! A leaver's final save whose first try timed out is tried again: a
//! starved process reads a crowd's replies late, past the client's
//! timeout, though Redis wrote them; the retry adopts what the first try
//! wrote and the quit ends final (`Goodbye.`), not with a resume.

use std::time::Duration;

use telos_testkit::proxy::LinkMode;

use super::tests_quits::{login, say, setup, until_closed};
use crate::zone::handle::InputReply;
use crate::zone::persist::SAVE_TIMEOUT;

/// The old window was counted from the first try's start, shorter than its
/// timeout: a timed-out first try was never tried again, and the quit
/// closed not-final (a fresh CI machine's 2000-quitter run: one gate
/// resumed a quitter to be told `Goodbye.`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_final_save_that_timed_out_is_tried_again() -> anyhow::Result<()> {
    let s = setup().await?;
    let mut frames = login(&s, "Ada", "c-1").await?;
    say(&s, "Ada", "c-1", 1, "say one last thing").await;
    // Redis's replies are held: the save lands, its reply does not come
    // back within the save's timeout.
    s.proxy.set(LinkMode::DropDown);
    let reply = say(&s, "Ada", "c-1", 2, "quit").await;
    assert!(
        matches!(reply, InputReply::Gone),
        "the quit line left no session"
    );
    // Past the first try's timeout (it started as the quit was applied),
    // and well before its retry's own timeout: the retry's request, held
    // or not, is answered.
    tokio::time::sleep(SAVE_TIMEOUT + Duration::from_millis(100)).await;
    s.proxy.heal();
    let (closed, _) = until_closed(&mut frames, Vec::new()).await;
    assert!(
        closed.r#final && closed.reason == "Goodbye.",
        "a quit whose first save timed out closed {closed:?}"
    );
    let row = s.store.load("Ada").await?.expect("the row");
    assert!(row.quit_by("c-1"), "the quit is on the row");
    Ok(())
}
