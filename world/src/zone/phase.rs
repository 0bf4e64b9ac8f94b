//! Where a zone actor is in its life, and what a drain reports.

use tokio::sync::oneshot;
use tokio::time::Instant;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DrainReport {
    pub redirected: u64,
    pub reclaimed: u64,
    pub client_fault: u64,
}

impl std::ops::AddAssign for DrainReport {
    fn add_assign(&mut self, o: DrainReport) {
        self.redirected += o.redirected;
        self.reclaimed += o.reclaimed;
        self.client_fault += o.client_fault;
    }
}

pub(super) struct DrainState {
    pub(super) deadline: Instant,
    pub(super) reply: Option<oneshot::Sender<DrainReport>>,
    pub(super) report: DrainReport,
}
