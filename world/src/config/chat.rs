//! The chat limit's flags (docs/operations.md, "Chat and command limits").
//! Flags and environment only, like the login limits.

use clap::Args;

use super::error::{ConfigError, bad};
use crate::model::chat::ChatLimit;

#[derive(Debug, Args, Default)]
pub struct ChatLimitFlags {
    /// Bytes a player may say to others at once; each line costs its
    /// length plus 256 [default: 16384].
    #[arg(long, env = "TELOS_CHAT_BURST_BYTES")]
    pub chat_burst_bytes: Option<u32>,
    /// Bytes refilled each second [default: 1024].
    #[arg(long, env = "TELOS_CHAT_BYTES_PER_SEC")]
    pub chat_bytes_per_sec: Option<u32>,
}

impl ChatLimitFlags {
    pub fn resolve(&self) -> Result<ChatLimit, ConfigError> {
        let d = ChatLimit::DEFAULT;
        let positive = |name: &str, v: Option<u32>, default: f64| match v {
            Some(0) => Err(bad(name, "must be positive")),
            Some(v) => Ok(f64::from(v)),
            None => Ok(default),
        };
        Ok(ChatLimit {
            burst_bytes: positive(
                "--chat-burst-bytes (TELOS_CHAT_BURST_BYTES)",
                self.chat_burst_bytes,
                d.burst_bytes,
            )?,
            bytes_per_sec: positive(
                "--chat-bytes-per-sec (TELOS_CHAT_BYTES_PER_SEC)",
                self.chat_bytes_per_sec,
                d.bytes_per_sec,
            )?,
        })
    }
}
