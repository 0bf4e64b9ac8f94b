//! Test support shared by unit, end-to-end tests and benchmarks.
