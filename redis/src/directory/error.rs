//! Directory errors: *refused* (the request is not allowed; retrying the same
//! request will not help) versus *failed* (Redis could not be asked or
//! answered nonsense; the operation may or may not have happened).

/// Why a directory call did not produce an answer.
#[derive(Debug, thiserror::Error)]
pub enum DirectoryError {
    /// Refused: instance zones (`<zone>#<n>`) take no lease and are never a
    /// routing or handoff destination.
    #[error("zone {0:?} is an instance; instances take no lease")]
    InstanceZone(String),
    /// Refused: a malformed argument (empty id, zero TTL).
    #[error("invalid directory request: {0}")]
    Invalid(String),
    /// Failed: Redis unreachable, timed out, or errored. A write may or may
    /// not have been applied (indeterminate); fences make a retry safe.
    #[error("directory redis call failed: {0}")]
    Redis(#[from] redis::RedisError),
    /// Failed: the first connection could not be made (bad settings,
    /// refused credentials, Redis unreachable); the message says which.
    #[error(transparent)]
    Connect(#[from] crate::directory::connection::ConnectError),
    /// Refused: a newer process of this shard id owns the registry entry;
    /// this one has been superseded (it was paused, or started twice) and
    /// must stop writing.
    #[error("a newer process of shard {shard} is running (this one is incarnation {incarnation})")]
    Superseded { shard: String, incarnation: u64 },
    /// Failed: a key held data this code did not write.
    #[error("directory data at {key} is malformed: {reason}")]
    Corrupt { key: String, reason: String },
}

impl DirectoryError {
    /// True when the directory answered "no" to this request; false when it
    /// could not answer at all.
    pub fn is_refused(&self) -> bool {
        matches!(
            self,
            Self::InstanceZone(_) | Self::Invalid(_) | Self::Superseded { .. }
        )
    }

    /// True when Redis refused this process's credentials (see
    /// [`ConnectError::is_refusal`](crate::directory::connection::ConnectError::is_refusal)).
    pub fn is_credentials_refused(&self) -> bool {
        matches!(self, Self::Connect(e) if e.is_refusal())
    }
}
