//! The run's stop flags (`watch` channels that turn true once) and waiting
//! on them. A leaf: the bots, the sampler and the run itself wait here.

use tokio::sync::watch;

/// Wait until `flag` is true. Holds no borrow across an await, so the
/// future stays `Send` (unlike `watch::Receiver::wait_for` in a `select!`).
pub(crate) async fn until_set(flag: &mut watch::Receiver<bool>) {
    while !*flag.borrow_and_update() {
        if flag.changed().await.is_err() {
            // Nobody can set it any more.
            std::future::pending::<()>().await;
        }
    }
}
