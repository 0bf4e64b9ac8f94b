//! telos-gate
