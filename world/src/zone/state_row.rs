//! A zone actor's hold on its zone's durable state row (the store's
//! `zone_state`): which open it is, the generation it opened at, and what
//! the row holds as far as it knows.

use std::collections::BTreeMap;

use telos_redis::store::ClaimId;

/// This actor's hold on its zone's state row.
pub(crate) struct ZoneRow {
    /// This open's id in the row's `holder`.
    pub(crate) holder: ClaimId,
    /// The lease generation the row was opened at; `None` until opened (an
    /// adoption before its lease is ours, a private instance).
    pub(crate) opened_at: Option<u64>,
    /// What the row holds now, as far as this actor knows (a game that
    /// keeps its state whole): a commit with nothing changed writes
    /// nothing.
    pub(crate) last: Option<Vec<u8>>,
    /// Keyed parts the game reported changed that no commit has written
    /// yet (a failed commit sends them again with the next).
    pub(crate) unsent: BTreeMap<String, Option<Vec<u8>>>,
    /// The row's commit counter as this actor's last commit left it: a row
    /// behind it lost commits (Redis lost acknowledged writes).
    pub(crate) commits: u64,
}

impl ZoneRow {
    pub(crate) fn new() -> ZoneRow {
        ZoneRow {
            holder: ClaimId::random(),
            opened_at: None,
            last: None,
            unsent: BTreeMap::new(),
            commits: 0,
        }
    }

    /// The unsent parts as a commit carries them (none without a zone).
    pub(crate) fn unsent_parts(&self, zone: bool) -> Vec<(&str, Option<&[u8]>)> {
        if !zone {
            return Vec::new();
        }
        self.unsent
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_deref()))
            .collect()
    }

    /// A commit landed: it wrote `whole` (when the state went whole) and
    /// every unsent part.
    pub(crate) fn written(&mut self, whole: Option<Vec<u8>>) {
        if whole.is_some() {
            self.last = whole;
        }
        self.unsent.clear();
        self.commits += 1;
    }
}
