//! The bot's shared state behind mutexes, read by its reader task and its
//! caller.

use std::sync::{Mutex, MutexGuard};

/// Lock `m`, past a poisoned lock: a panicked reader task must not hide
/// what it had received from the test that asserts on it.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
