//! MSSP (option 70, https://tintin.mudhalla.net/protocols/mssp/): what a
//! MUD listing's crawler reads, answered before login so it needs no
//! account. `NAME`, `PLAYERS` (online on every shard), `UPTIME` (the gate's
//! start: a rolling shard restart never resets it), `CODEBASE`, `PORT`,
//! and whatever the operator adds in the `[mssp]` config section.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use super::parser::{IAC, SB, SE};

pub const OPT_MSSP: u8 = 70;
const MSSP_VAR: u8 = 1;
const MSSP_VAL: u8 = 2;

/// Longest variable name or value sent; an operator's longer value is cut.
pub const MAX_MSSP_FIELD: usize = 512;

/// What the gate says about the game. Shared by every connection; the
/// player count is refreshed from the directory in the background, so a
/// crawler's answer never waits on Redis.
#[derive(Debug)]
pub struct MsspStatus {
    /// Operator variables (`NAME` among them), in the config file's order.
    vars: Vec<(String, String)>,
    /// The gate's start, seconds since the epoch.
    started: u64,
    /// The player port crawlers are told (the telnet listener's).
    port: u16,
    players: AtomicUsize,
}

/// The name a game is listed by when the operator sets none.
pub const DEFAULT_NAME: &str = "Telos";

impl MsspStatus {
    /// `vars` come from the `[mssp]` config section.
    pub fn new(vars: Vec<(String, String)>, port: u16) -> Self {
        let started = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Self {
            vars,
            started,
            port,
            players: AtomicUsize::new(0),
        }
    }

    pub fn set_players(&self, n: usize) {
        self.players.store(n, Ordering::Relaxed);
    }

    pub fn players(&self) -> usize {
        self.players.load(Ordering::Relaxed)
    }

    /// Every variable, ours first; an operator's `NAME` replaces the default,
    /// and an operator variable never repeats one the gate computes.
    pub fn vars(&self) -> Vec<(String, String)> {
        let own = |k: &str| {
            self.vars
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.clone())
        };
        let mut out = vec![
            (
                "NAME".into(),
                own("NAME").unwrap_or_else(|| DEFAULT_NAME.into()),
            ),
            ("PLAYERS".into(), self.players().to_string()),
            ("UPTIME".into(), self.started.to_string()),
            (
                "CODEBASE".into(),
                format!("Telos {}", env!("CARGO_PKG_VERSION")),
            ),
            ("PORT".into(), self.port.to_string()),
            ("GMCP".into(), "1".into()),
            ("MCCP".into(), "1".into()),
            ("MSDP".into(), "0".into()),
            ("UTF-8".into(), "1".into()),
            ("ANSI".into(), "1".into()),
        ];
        for (k, v) in &self.vars {
            if !out.iter().any(|(n, _)| n == k) {
                out.push((k.clone(), v.clone()));
            }
        }
        out
    }

    /// The whole answer: `IAC SB MSSP (VAR name VAL value)* IAC SE`.
    pub fn frame(&self) -> Vec<u8> {
        frame(&self.vars())
    }
}

pub fn frame(vars: &[(String, String)]) -> Vec<u8> {
    let mut out = vec![IAC, SB, OPT_MSSP];
    for (name, value) in vars {
        out.push(MSSP_VAR);
        out.extend(field(name));
        out.push(MSSP_VAL);
        out.extend(field(value));
    }
    out.extend_from_slice(&[IAC, SE]);
    out
}

/// A name or value without the bytes that frame MSSP (NUL, VAR, VAL, IAC).
fn field(s: &str) -> impl Iterator<Item = u8> + '_ {
    s.bytes()
        .filter(|b| !matches!(*b, 0 | MSSP_VAR | MSSP_VAL | IAC))
        .take(MAX_MSSP_FIELD)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vars_in_order_with_the_operators_name_and_extras() {
        let s = MsspStatus::new(
            vec![
                ("NAME".into(), "Aurora".into()),
                ("CONTACT".into(), "ops@example.org".into()),
                ("PLAYERS".into(), "9999".into()),
            ],
            4000,
        );
        s.set_players(3);
        let vars = s.vars();
        let get = |k: &str| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("NAME"), Some("Aurora"));
        assert_eq!(
            get("PLAYERS"),
            Some("3"),
            "the count is the gate's, never the file's"
        );
        assert_eq!(get("PORT"), Some("4000"));
        assert_eq!(get("CONTACT"), Some("ops@example.org"));
        assert_eq!(vars.iter().filter(|(n, _)| n == "PLAYERS").count(), 1);
        let f = frame(&[("A".into(), "x\u{1}y".into())]);
        assert_eq!(f, vec![IAC, SB, OPT_MSSP, 1, b'A', 2, b'x', b'y', IAC, SE]);
    }
}
