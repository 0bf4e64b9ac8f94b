//! Which keyed parts of a zone's durable state changed since the runtime
//! last took them (see `zone_parts`): a leaf, so the zone can mark its
//! changes without importing how parts are written.

use std::collections::BTreeSet;

/// Which parts changed since the runtime last took them.
#[derive(Debug, Default)]
pub(super) struct Changed {
    /// Every part (a fresh zone, or one loaded from the whole form).
    pub(super) all: bool,
    pub(super) floors: BTreeSet<String>,
    pub(super) mobs: BTreeSet<String>,
    pub(super) clock: bool,
}

impl Changed {
    pub(super) fn everything() -> Changed {
        Changed {
            all: true,
            ..Changed::default()
        }
    }
}
