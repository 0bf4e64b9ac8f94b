//! Support for the root package's end-to-end tests that reads the world's
//! own types (the rest lives in `telos_testkit`, which the world does not
//! depend on).

#![allow(dead_code)]

pub mod gate_world;
pub mod handoff;
pub mod population;
pub mod rows;
pub mod two_shards;
