//! The [`Directory`] handle. Each operation file (lease, registry, drain,
//! online, transfer) adds its methods to it; the module root connects it.

use super::connection::RedisConn;

/// A handle on the directory. Cheap to clone: every clone shares one
/// multiplexed, self-reconnecting connection ([`RedisConn`]).
#[derive(Clone)]
pub struct Directory {
    conn: RedisConn,
    /// This process's incarnation: the fencing token that tells two
    /// processes of one shard id apart (0 for a process that holds no
    /// lease: a gate, telosctl, a test).
    incarnation: u64,
}

impl std::fmt::Debug for Directory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Directory").finish_non_exhaustive()
    }
}

impl Directory {
    pub(super) fn new(conn: RedisConn) -> Directory {
        Directory {
            conn,
            incarnation: 0,
        }
    }

    /// This handle, speaking for process incarnation `incarnation` (see
    /// [`Directory::mint_incarnation`]): every lease claim, renewal and
    /// release and every heartbeat it sends carries it.
    pub fn for_incarnation(&self, incarnation: u64) -> Directory {
        Directory {
            conn: self.conn.clone(),
            incarnation,
        }
    }

    /// The incarnation this handle speaks for (0: none).
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// The number of Redis primary changes (Sentinel failovers) this
    /// handle has followed, as a watch (see [`RedisConn::primary_changes`]).
    pub fn primary_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.conn.primary_changes()
    }

    /// A connection to run one command or script on (clones share the pipe).
    pub(super) fn conn(&self) -> RedisConn {
        self.conn.clone()
    }
}
