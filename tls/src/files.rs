//! The file names of a key folder, and owner-only reads and writes.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::role::Role;

/// The certificates a process trusts: the cluster CA, or during a CA roll
/// the old and the new one, concatenated (every certificate in the file is
/// trusted).
pub const CA_CRT: &str = "ca.crt";
/// The CA's private key: needed only to issue certificates. Keep it off the
/// machines that run Telos.
pub const CA_KEY: &str = "ca.key";

pub fn cert_file(dir: &Path, role: Role) -> PathBuf {
    dir.join(format!("{role}.crt"))
}

pub fn key_file(dir: &Path, role: Role) -> PathBuf {
    dir.join(format!("{role}.key"))
}

#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: already exists; refusing to overwrite a key or certificate")]
    Exists { path: String },
    #[error("{path}: private key is readable by group or others (chmod 600)")]
    TooOpen { path: String },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> FileError + '_ {
    move |source| FileError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Private keys and certificates alike are written readable by the owner
/// only (the project contract); a key is never overwritten.
pub fn write_new(path: &Path, text: &str) -> Result<(), FileError> {
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => FileError::Exists {
                path: path.display().to_string(),
            },
            _ => io(path)(e),
        })?;
    f.write_all(text.as_bytes()).map_err(io(path))
}

pub fn read(path: &Path) -> Result<String, FileError> {
    fs::read_to_string(path).map_err(io(path))
}

/// Read a private key, refusing one that others can read.
pub fn read_secret(path: &Path) -> Result<String, FileError> {
    let meta = fs::metadata(path).map_err(io(path))?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(FileError::TooOpen {
            path: path.display().to_string(),
        });
    }
    read(path)
}
