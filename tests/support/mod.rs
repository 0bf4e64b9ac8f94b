//! Shared support for the root package's end-to-end tests.

#![allow(dead_code)]

pub mod driver;
pub mod keys;
pub mod metrics;
pub mod rows;
