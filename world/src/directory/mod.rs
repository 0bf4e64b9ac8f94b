//! directory
