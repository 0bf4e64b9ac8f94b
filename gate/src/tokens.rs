//! Resume tokens: which session (a web page's, [`crate::web`], or a
//! telnet client's, [`crate::grace`]) a token resumes. A token is issued to
//! one session, taken at most once (taking it removes it: two tabs racing
//! with one token, one wins), and revoked when its session ends (quit,
//! the grace period over, the gate stopping). Each resume issues the
//! session a fresh token.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::mpsc;

/// 128 random bits, hex.
pub fn new_token() -> String {
    hex::encode(rand::random::<u128>().to_be_bytes())
}

/// Live tokens, each to its session's door (`T`: what a resuming page
/// hands over).
#[derive(Debug)]
pub struct Tokens<T> {
    map: Mutex<HashMap<String, mpsc::Sender<T>>>,
}

impl<T> Default for Tokens<T> {
    fn default() -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
        }
    }
}

impl<T> Tokens<T> {
    /// A fresh token for the session behind `door`.
    pub fn issue(&self, door: mpsc::Sender<T>) -> String {
        let token = new_token();
        self.lock().insert(token.clone(), door);
        token
    }

    /// The session `token` resumes, once: the token is spent. `None` for a
    /// token never issued, spent, or revoked.
    pub fn take(&self, token: &str) -> Option<mpsc::Sender<T>> {
        self.lock().remove(token)
    }

    /// The session ended: its token resumes nothing.
    pub fn revoke(&self, token: &str) {
        self.lock().remove(token);
    }

    /// Tokens live (one per resumable session).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, mpsc::Sender<T>>> {
        // A panic elsewhere while holding the lock leaves a valid map.
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn a_token_is_taken_once_and_never_after_its_session_ended() {
        let tokens = Tokens::<u32>::default();
        let (door, _rx) = mpsc::channel(1);
        let t = tokens.issue(door.clone());
        assert_eq!(t.len(), 32);
        assert!(tokens.take(&t).is_some());
        assert!(tokens.take(&t).is_none(), "a token is single-use");
        // The session's next token; then the session quits (or its grace
        // ends): revoked, refused.
        let next = tokens.issue(door);
        assert_ne!(next, t);
        tokens.revoke(&next);
        assert!(tokens.take(&next).is_none());
        assert!(tokens.take("not-a-token").is_none());
        assert!(tokens.is_empty());
    }

    #[test]
    fn two_tabs_racing_for_one_token_one_wins() {
        for _ in 0..100 {
            let tokens = Arc::new(Tokens::<u32>::default());
            let (door, _rx) = mpsc::channel(1);
            let t = tokens.issue(door);
            let racers: Vec<_> = (0..2)
                .map(|_| {
                    let (tokens, t) = (tokens.clone(), t.clone());
                    std::thread::spawn(move || tokens.take(&t).is_some())
                })
                .collect();
            let won = racers
                .into_iter()
                .map(|r| r.join().unwrap())
                .filter(|w| *w)
                .count();
            assert_eq!(won, 1);
        }
    }
}
