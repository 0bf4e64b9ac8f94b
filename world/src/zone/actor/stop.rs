//! How the zone stops: a shutdown (planned, the lease still ours) and a
//! fence (the lease lost). Either settles the final saves of players who
//! left before it (see [`super::quits`]), then saves and closes everyone
//! still here not-final, so their gates resume them where the zone is
//! served next.

use tracing::warn;

use super::ZoneActor;

impl ZoneActor {
    /// `Msg::Shutdown`: take no more players, save everyone, close them.
    pub(super) async fn shutdown(&mut self, reason: &str) {
        let sealed = self.phase.is_sealed();
        self.stop();
        self.settle_quits().await;
        self.settle_frozen_for_stop(reason).await;
        // One commit of the zone and everyone still here (a sealed zone
        // committed at the seal; its lease may have moved on since). What
        // it cannot commit was never answered: the gates replay it.
        if !sealed {
            self.commit().await;
        }
        for key in self.sessions.keys().cloned().collect::<Vec<_>>() {
            self.close(&key, reason, false);
        }
    }

    /// Lease lost: stop at once, without a drain. Players get a line and a
    /// clean close (not final: their gate resumes them where the zone is
    /// served next).
    pub(super) async fn fence(&mut self) {
        warn!(zone = %self.id, players = self.sessions.len(), "zone fenced: lease lost");
        self.stop();
        self.settle_quits().await;
        self.settle_frozen_for_stop("zone lease lost").await;
        // Nothing is saved here: what is committed is one cut of the zone
        // and its players; what is not was never answered (its output is
        // held), and the gates replay those lines where the zone is served
        // next. A player row saved alone now would hold a `drop` whose
        // zone side is lost (the crash dupe's other half).
        let keys: Vec<String> = self.sessions.keys().cloned().collect();
        for key in &keys {
            if let Some(m) = self.sessions.get_mut(key) {
                m.stream.drop_uncommitted();
                m.stream.output("The world fades around you...\n".into());
                m.stream.release();
            }
        }
        for key in keys {
            self.close(&key, "zone lease lost", false);
        }
    }
}
