//! Arguments checked before they reach Redis: ids that can never hold a
//! lease or name a shard, and TTLs Redis would reject. A leaf every
//! operation of the directory may use.

use std::time::Duration;

use super::error::DirectoryError;

/// Refuses ids that can never hold a lease: empty, or instance-shaped
/// (`<zone>#<n>`, private to one shard, outside placement).
pub(super) fn check_zone(zone: &str) -> Result<(), DirectoryError> {
    if zone.is_empty() {
        return Err(DirectoryError::Invalid("empty zone id".into()));
    }
    if telos_proto::ids::is_instance_id(zone) {
        return Err(DirectoryError::InstanceZone(zone.to_owned()));
    }
    Ok(())
}

pub(super) fn check_shard(shard: &str) -> Result<(), DirectoryError> {
    if shard.is_empty() {
        return Err(DirectoryError::Invalid("empty shard id".into()));
    }
    Ok(())
}

/// A TTL as whole milliseconds for `PX`/`PEXPIRE`. Zero is refused: Redis
/// rejects it, and a lease that is born expired is a caller bug.
pub(super) fn ttl_ms(ttl: Duration) -> Result<u64, DirectoryError> {
    let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
    if ms == 0 {
        return Err(DirectoryError::Invalid(format!(
            "ttl {ttl:?} rounds to 0 ms"
        )));
    }
    Ok(ms)
}
