//! Support for the root package's end-to-end tests that reads the world's
//! own types, or runs what only `scripts/test` installs (the browser
//! driver's `npm`); the rest lives in `telos_testkit`, which the world and
//! the benchmarks depend on.

#![allow(dead_code)]

pub mod acl;
pub mod browser;
pub mod gate_world;
pub mod handoff;
pub mod population;
pub mod rows;
pub mod two_shards;
