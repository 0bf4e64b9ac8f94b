//! A zone actor's hold on its zone's durable state row (the store's
//! `zone_state`): which open it is, the generation it opened at, and what
//! the row holds as far as it knows.

use telos_redis::store::ClaimId;

/// This actor's hold on its zone's state row.
pub(crate) struct ZoneRow {
    /// This open's id in the row's `holder`.
    pub(crate) holder: ClaimId,
    /// The lease generation the row was opened at; `None` until opened (an
    /// adoption before its lease is ours, a private instance).
    pub(crate) opened_at: Option<u64>,
    /// What the row holds now, as far as this actor knows: a cadence with
    /// nothing changed writes nothing.
    pub(crate) last: Option<Vec<u8>>,
}

impl ZoneRow {
    pub(crate) fn new() -> ZoneRow {
        ZoneRow {
            holder: ClaimId::random(),
            opened_at: None,
            last: None,
        }
    }
}
