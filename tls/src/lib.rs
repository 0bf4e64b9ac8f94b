//! Mutual TLS between Telos processes (the project contract: `telosctl
//! keygen` writes a cluster CA and one certificate per role; with
//! `--keys DIR` every gRPC connection is TLS with a client certificate).
//!
//! - [`role`]: the three roles and how a certificate says which it is;
//! - [`issue`]: writing the CA and issuing role certificates (`telosctl
//!   keygen`, `telosctl cert`);
//! - [`grpc`]: a process's certificate loaded from its key folder, as
//!   tonic server and client configurations, and the per-service role check;
//! - [`holder`]: whom a certificate was issued to (its common name), and
//!   the check that a caller speaks only for itself;
//! - [`shard`]: which certificate a shard presents (the one issued to its
//!   id).

pub mod files;
pub mod grpc;
pub mod holder;
pub mod issue;
pub mod role;
pub mod shard;

pub use grpc::{RoleCheck, TlsError, TlsKeys};
pub use role::Role;

#[cfg(test)]
mod tests;
