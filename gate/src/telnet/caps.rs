//! What one client negotiated: window, terminal, MTTS flags, GMCP
//! subscriptions, compression, end-of-record. Held by the gate for the life
//! of the connection (the socket never moves), so it survives every
//! handoff, drain, transfer and shard restart; the world learns it from the
//! [`ClientInfo`] every `Login`, `Resume` and `Attach` carries.

use std::collections::BTreeSet;

use telos_proto::v1::ClientInfo;

/// GMCP packages one client may subscribe to; more are ignored. A real
/// client names a dozen.
pub const MAX_GMCP_PACKAGES: usize = 64;
/// Longest GMCP package name kept.
pub const MAX_PACKAGE_NAME: usize = 64;
/// Longest client or terminal name kept (MTTS answers).
pub const MAX_TERMINAL_NAME: usize = 40;

/// MTTS bits (https://tintin.mudhalla.net/protocols/mtts/).
pub const MTTS_ANSI: u32 = 1;
pub const MTTS_UTF8: u32 = 4;
pub const MTTS_256: u32 = 8;
pub const MTTS_SCREEN_READER: u32 = 64;
pub const MTTS_TRUECOLOR: u32 = 256;

/// Colour depths a client may show ([`Capabilities::colours`]).
pub const COLOURS_NONE: u32 = 0;
pub const COLOURS_16: u32 = 16;
pub const COLOURS_256: u32 = 256;
pub const COLOURS_TRUE: u32 = 1 << 24;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// NAWS columns and rows (0: not told).
    pub width: u16,
    pub height: u16,
    /// MTTS: the first TTYPE answer (the client's name, e.g. `MUDLET`).
    pub client_name: String,
    /// The second TTYPE answer (terminal type, e.g. `XTERM-256COLOR`).
    pub terminal_type: String,
    /// The third (`MTTS <n>`), 0 when the client does not speak MTTS.
    pub mtts: u32,
    /// GMCP is enabled (the client said `DO GMCP`).
    pub gmcp: bool,
    /// Subscribed GMCP modules, lower case (`char`, `char.items`, `room`).
    pub gmcp_packages: BTreeSet<String>,
    /// The client accepted end-of-record marks after prompts (`DO EOR`).
    pub eor: bool,
    /// The client accepted UTF-8 through CHARSET.
    pub utf8: bool,
    /// The client showed it speaks telnet (it sent any negotiation).
    pub telnet: bool,
}

impl Capabilities {
    /// Whether a message of `package` (`Char.Items.List`) is wanted: GMCP
    /// on and the package or one of its parents (`Char.Items`, `Char`)
    /// subscribed. `Core` is always on.
    pub fn wants(&self, package: &str) -> bool {
        if !self.gmcp {
            return false;
        }
        let lower = package.to_ascii_lowercase();
        let mut name = lower.as_str();
        loop {
            if name == "core" || self.gmcp_packages.contains(name) {
                return true;
            }
            match name.rsplit_once('.') {
                Some((parent, _)) => name = parent,
                None => return false,
            }
        }
    }

    /// Add (`true`) or remove a GMCP module, as `Core.Supports.*` names
    /// it: `"Char 1"` or `"Char"`.
    pub fn subscribe(&mut self, entry: &str, on: bool) {
        let name = entry
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        if name.is_empty() || name.len() > MAX_PACKAGE_NAME {
            return;
        }
        if !on {
            self.gmcp_packages.remove(&name);
        } else if self.gmcp_packages.len() < MAX_GMCP_PACKAGES {
            self.gmcp_packages.insert(name);
        }
    }

    /// The colour depth to render: what MTTS said, else what the terminal
    /// name suggests; none for a client that never negotiated.
    pub fn colours(&self) -> u32 {
        if self.mtts & MTTS_TRUECOLOR != 0 {
            return COLOURS_TRUE;
        }
        if self.mtts & MTTS_256 != 0 {
            return COLOURS_256;
        }
        if self.mtts & MTTS_ANSI != 0 {
            return COLOURS_16;
        }
        let term = self.terminal_type.to_ascii_uppercase();
        if term.contains("TRUECOLOR") {
            COLOURS_TRUE
        } else if term.contains("256") {
            COLOURS_256
        } else if ["ANSI", "XTERM", "VT100", "LINUX", "SCREEN"]
            .iter()
            .any(|t| term.contains(t))
        {
            COLOURS_16
        } else {
            COLOURS_NONE
        }
    }

    pub fn screen_reader(&self) -> bool {
        self.mtts & MTTS_SCREEN_READER != 0
    }

    /// What the world is told of this client.
    pub fn client_info(&self) -> ClientInfo {
        ClientInfo {
            width: u32::from(self.width),
            height: u32::from(self.height),
            client_name: self.client_name.clone(),
            terminal_type: self.terminal_type.clone(),
            mtts: self.mtts,
            gmcp: self.gmcp,
            colours: self.colours(),
            screen_reader: self.screen_reader(),
        }
    }
}

/// A name from the client, kept printable and short.
pub fn clean_name(raw: &[u8]) -> String {
    String::from_utf8_lossy(raw)
        .chars()
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .take(MAX_TERMINAL_NAME)
        .collect::<String>()
        .trim()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscriptions_cover_sub_packages_and_are_bounded() {
        let mut c = Capabilities {
            gmcp: true,
            ..Capabilities::default()
        };
        assert!(c.wants("Core.Ping"));
        assert!(!c.wants("Room.Info"));
        c.subscribe("Room 1", true);
        c.subscribe("Char.Items 1", true);
        assert!(c.wants("Room.Info"));
        assert!(c.wants("char.items.list"));
        assert!(!c.wants("Char.Vitals"));
        c.subscribe("Room", false);
        assert!(!c.wants("Room.Info"));
        for i in 0..1000 {
            c.subscribe(&format!("P{i} 1"), true);
        }
        assert_eq!(c.gmcp_packages.len(), MAX_GMCP_PACKAGES);
        c.gmcp = false;
        assert!(!c.wants("Char.Items.List"), "nothing without GMCP on");
    }

    #[test]
    fn colour_depth_from_mtts_or_terminal_name() {
        let mut c = Capabilities::default();
        assert_eq!(c.colours(), COLOURS_NONE);
        c.terminal_type = "xterm-256color".into();
        assert_eq!(c.colours(), COLOURS_256);
        c.mtts = MTTS_ANSI | MTTS_UTF8;
        assert_eq!(c.colours(), COLOURS_16);
        c.mtts |= MTTS_TRUECOLOR | MTTS_SCREEN_READER;
        assert_eq!(c.colours(), COLOURS_TRUE);
        assert!(c.screen_reader());
    }
}
