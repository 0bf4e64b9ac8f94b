//! The one error every setting answers with, naming the setting.

/// A setting that is missing or malformed; the message names it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(String);

pub(crate) fn bad(name: &str, why: impl std::fmt::Display) -> ConfigError {
    ConfigError(format!("invalid setting {name}: {why}"))
}
