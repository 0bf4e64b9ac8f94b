//! Output kept for a telnet client that is away ([`crate::grace`]): a copy
//! of what the session queued for it ([`crate::output::Output::keep_copy`])
//! from the moment it dropped (or a liveness probe of its connection
//! began), up to a bound; past the bound only the fact that some was
//! missed.

use std::sync::{Arc, Mutex, MutexGuard};

/// Logged when kept output first passes its bound.
pub const PAST_THE_BOUND: &str =
    "output kept for a telnet resume passed --web-replay-bytes; the resume gets a fresh look";

/// Kept output, shared by the output that copies into it and the session
/// that replays it.
#[derive(Debug, Clone)]
pub struct Kept(Arc<Mutex<Bytes>>);

#[derive(Debug, Default)]
struct Bytes {
    bytes: Vec<u8>,
    cap: usize,
    missed: bool,
}

/// More was queued than the bound keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Missed;

impl Kept {
    /// Keep at most `cap` bytes.
    pub fn new(cap: usize) -> Self {
        Self(Arc::new(Mutex::new(Bytes {
            cap,
            ..Bytes::default()
        })))
    }

    /// Keep `buf`, after what was kept before; past the bound, nothing
    /// more (and what was kept is freed).
    pub fn push(&self, buf: &[u8]) {
        let mut k = self.lock();
        if k.missed || k.bytes.len() + buf.len() > k.cap {
            if !k.missed {
                tracing::info!("{PAST_THE_BOUND}");
            }
            k.missed = true;
            k.bytes = Vec::new();
        } else {
            k.bytes.extend_from_slice(buf);
        }
    }

    /// Everything kept so far (and from now on, only what follows), or
    /// [`Missed`].
    pub fn take(&self) -> Result<Vec<u8>, Missed> {
        let mut k = self.lock();
        let missed = std::mem::take(&mut k.missed);
        let bytes = std::mem::take(&mut k.bytes);
        if missed { Err(Missed) } else { Ok(bytes) }
    }

    fn lock(&self) -> MutexGuard<'_, Bytes> {
        // A panic elsewhere while holding the lock leaves valid bytes.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_output_is_bounded_and_past_the_bound_only_missed() {
        let kept = Kept::new(10);
        kept.push(b"12345");
        kept.push(b"678");
        assert_eq!(kept.take(), Ok(b"12345678".to_vec()));
        kept.push(b"12345");
        kept.push(b"678901");
        kept.push(b"2");
        assert_eq!(kept.take(), Err(Missed), "nothing kept past the bound");
        kept.push(b"next");
        assert_eq!(kept.take(), Ok(b"next".to_vec()));
    }
}
