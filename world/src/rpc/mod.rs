//! Thin tonic service impls: parse, call into the modules that own the
//! rules, map errors. No game or coordination logic lives here.

pub mod admin;
pub mod handoff;
pub mod play;
