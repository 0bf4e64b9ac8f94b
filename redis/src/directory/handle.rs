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
    /// Every earlier process of this shard id is proven gone (it held the
    /// shard's lock file, which this process took at once): their live
    /// leases are taken over at a new generation instead of waited out.
    predecessors_gone: bool,
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
            predecessors_gone: false,
        }
    }

    /// This handle, speaking for process incarnation `incarnation` (see
    /// [`Directory::mint_incarnation`]): every lease claim, renewal and
    /// release and every heartbeat it sends carries it.
    pub fn for_incarnation(&self, incarnation: u64) -> Directory {
        Directory {
            conn: self.conn.clone(),
            incarnation,
            predecessors_gone: false,
        }
    }

    /// This handle, for a process that proved every earlier process of its
    /// shard id gone (see `predecessors_gone`).
    pub fn with_predecessors_gone(&self) -> Directory {
        Directory {
            predecessors_gone: true,
            ..self.clone()
        }
    }

    /// Whether earlier processes of this shard id are proven gone.
    pub fn predecessors_gone(&self) -> bool {
        self.predecessors_gone
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
