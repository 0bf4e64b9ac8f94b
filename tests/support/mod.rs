//! Shared support for the root package's end-to-end tests.

#![allow(dead_code)]

pub mod driver;
pub mod metrics;
