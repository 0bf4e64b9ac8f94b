//! Store errors: *refused* (the store answered no) versus *failed* (the store
//! could not be read or written; callers fail closed).

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Refused: a character with this name (case-insensitive) exists.
    #[error("name is taken")]
    NameTaken,
    /// Refused: no character with this name.
    #[error("no such character")]
    NotFound,
    /// Refused: the name cannot be stored (empty, whitespace, control, `:`).
    #[error("invalid character name {0:?}")]
    InvalidName(String),
    /// Refused: a later attempt of the same gate connection has claimed
    /// the character; this one was given up by its gate.
    #[error("a later attempt of this connection claimed the character")]
    OlderAttempt,
    /// Refused: a malformed argument (zero TTL).
    #[error("invalid store request: {0}")]
    Invalid(String),
    /// Refused: not one of `player`, `builder`, `admin`.
    #[error("invalid tier {0:?}")]
    InvalidTier(String),
    /// Failed: Redis unreachable, timed out, or errored. A write may or may
    /// not have been applied (indeterminate); the CAS fences make a retry safe.
    #[error("store redis call failed: {0}")]
    Redis(#[from] redis::RedisError),
    /// Failed: the first connection could not be made (bad settings,
    /// refused credentials, Redis unreachable); the message says which.
    #[error(transparent)]
    Connect(#[from] crate::directory::connection::ConnectError),
    /// Failed: a row held data this code did not write.
    #[error("store data at {key} is malformed: {reason}")]
    Corrupt { key: String, reason: String },
    /// Failed: password hashing errored or its worker thread died.
    #[error("password hashing failed: {0}")]
    Hash(String),
    /// Refused for now: every password-hashing worker is busy and the
    /// queue behind them is full. Nothing was read or written; try later.
    #[error("password hashing is at capacity; try again shortly")]
    Busy,
}

impl StoreError {
    /// A failure that may not recur: Redis unreachable, restarting
    /// (`LOADING`) or timing out — not an answer it will give again (a
    /// malformed row, a script error, a refusal).
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Redis(e) => !matches!(e.retry_method(), redis::RetryMethod::NoRetry),
            _ => false,
        }
    }

    /// True when the store answered "no"; false when it could not answer.
    pub fn is_refused(&self) -> bool {
        matches!(
            self,
            Self::NameTaken
                | Self::NotFound
                | Self::OlderAttempt
                | Self::InvalidName(_)
                | Self::InvalidTier(_)
                | Self::Invalid(_)
        )
    }
}
