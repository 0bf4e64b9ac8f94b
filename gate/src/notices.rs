//! What the gate tells a player about their own session (never the
//! world's words): a reconnect, input or output held back, commands over
//! their rate.

pub const SHIMMER: &str = "The world shimmers; reconnecting...";

/// Told once when the input buffer reaches its bound (`--input-buffer-bytes`
/// or `--input-buffer-lines`): nothing typed is lost, the gate just stops
/// reading until the world has saved what it has.
pub const INPUT_PAUSED: &str = "*** Too much input is waiting for the world; the rest of what you typed is read once it catches up.";

/// Told (with the count) once the queue has room again after chatter was
/// dropped.
pub fn chatter_dropped(lines: u64) -> String {
    format!(
        "*** {lines} lines of room chatter were dropped: you are reading slower than the room talks."
    )
}

/// Told once when a player's commands start waiting for their turn
/// ([`crate::command_rate`]).
pub fn command_throttled(per_sec: u32) -> String {
    format!(
        "*** You are sending commands faster than {per_sec} a second; the rest follow in turn, none is lost."
    )
}
