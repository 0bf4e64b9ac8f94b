//! The open-file limit of a process that serves sockets.

/// Raise the soft open-file limit to the hard one, so a storm of
/// connections meets the process's own caps (the gate's
/// `--max-connections`, a shard's TLS handshake timeout and stream caps)
/// instead of `EMFILE` on accept: at the limit tonic's and the gate's
/// accept loops retry at once, the process spins and cannot reach Redis or
/// its peers. Logged once.
pub fn raise_open_file_limit() {
    let before = rlimit::Resource::NOFILE.get().map(|(soft, _)| soft);
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(soft) => {
            tracing::info!(before = ?before.ok(), soft, "open file limit raised to the hard limit")
        }
        Err(e) => tracing::warn!(error = %e, "could not raise the open file limit"),
    }
}
