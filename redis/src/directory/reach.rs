//! Reachability is part of the lease (issue 30). A shard cut off from the
//! gates but not from Redis would otherwise renew its leases for the whole
//! cut, and nobody could serve its players. The gates say what they see:
//! a gate that reaches other shards but not this one, while this one still
//! heartbeats, marks it ([`Directory::mark_unreachable`]) and takes the
//! mark back once it reaches it again ([`Directory::clear_unreachable`]).
//!
//! The mark is read where the lease is decided, in the same atomic step
//! (`reach_check.lua`, prepended to the scripts that renew, claim and
//! publish): once one gate has said so at every probe for [`REACH_BOUND`]
//! (and said it again within [`REACH_STALE`]), the shard's renewals are
//! refused — each
//! zone fences as on any refusal and gives its lease back, and peers claim
//! it — it claims no zone, and its registry entry says `cut_off`, so no
//! login, handoff, drain or transfer picks it. A shard reachable by some
//! gates and not others is cut off too: it serves every gate or none, and
//! the players of the gates that still reach it resume where its zones
//! went.

use std::sync::LazyLock;
use std::time::Duration;

use redis::Script;

use super::args::{check_shard, ttl_ms};
use super::error::DirectoryError;
use super::handle::Directory;
use super::key_names;

/// How long a gate must have found a shard unreachable, at every probe,
/// before the shard gives its zones up (`REACH_BOUND_MS` in
/// `reach_check.lua`): at least three probes in a row with no answer in
/// 1.5 s each — a shard that answers nothing that long holds its players
/// hostage whatever the cause.
pub const REACH_BOUND: Duration = Duration::from_millis(3000);

/// A gate's mark counts while the gate said it this recently
/// (`REACH_STALE_MS` in `reach_check.lua`): a gate that died, or no longer
/// looks, stops counting on its own.
pub const REACH_STALE: Duration = Duration::from_millis(4000);

/// The mark key outlives its last report by this much (it is only read
/// within [`REACH_STALE`]).
const MARK_TTL: Duration = Duration::from_secs(30);

/// `reach_check.lua`, the one place the rule is written, followed by `body`.
pub(crate) fn reach_script(body: &str) -> Script {
    Script::new(&[include_str!("reach_check.lua"), body].concat())
}

static MARK: LazyLock<Script> = LazyLock::new(|| reach_script(include_str!("reach_mark.lua")));

impl Directory {
    /// Gate `gate` cannot reach `shard`: say so (again). Returns how long
    /// this gate has said so without a break.
    pub async fn mark_unreachable(
        &self,
        shard: &str,
        gate: &str,
    ) -> Result<Duration, DirectoryError> {
        check_shard(shard)?;
        let held_ms: u64 = MARK
            .key(key_names::shard_unreachable(shard))
            .arg(gate)
            .arg(ttl_ms(MARK_TTL)?)
            .invoke_async(&mut self.conn())
            .await?;
        Ok(Duration::from_millis(held_ms))
    }

    /// Gate `gate` reaches `shard` again: its mark no longer counts.
    pub async fn clear_unreachable(&self, shard: &str, gate: &str) -> Result<(), DirectoryError> {
        check_shard(shard)?;
        let _: i64 = redis::cmd("HDEL")
            .arg(key_names::shard_unreachable(shard))
            .arg(gate)
            .query_async(&mut self.conn())
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bounds are written twice, here and in the script: they agree.
    #[test]
    fn the_scripts_bounds_are_these() {
        let lua = include_str!("reach_check.lua");
        let bound = format!("local REACH_BOUND_MS = {}\n", REACH_BOUND.as_millis());
        let stale = format!("local REACH_STALE_MS = {}\n", REACH_STALE.as_millis());
        assert!(lua.contains(&bound) && lua.contains(&stale), "{lua}");
    }
}
