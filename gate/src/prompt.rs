//! The status prompt a telnet client gets after each command's output:
//! the game's vitals (the `Vitals` event the world sends with every change,
//! e.g. `hp`/`maxhp`, `mana`/`maxmana`, `moves`/`maxmoves`), as
//! `<hp 20/20 mana 10/10 moves 48/50> `, marked with EOR or GA by the
//! caller. The names are the game's, not the gate's: a stat `x` with a
//! `maxx` partner shows as `x v/max`, one without as `x v`. Pure.
//!
//! Only clients that asked for prompts get it (`Conn::show_prompt`): a raw
//! line client (a bot, the contract's test clients) sees exactly the
//! world's lines.

/// Stats shown at most; a game that sends more gets the first ones (a
/// prompt is one line).
pub const MAX_PROMPT_STATS: usize = 8;

/// Longest stat name shown.
pub const MAX_STAT_NAME: usize = 16;

/// A connection's prompt: the last vitals, and whether a prompt is on the
/// screen waiting for input (so output that arrives first starts on a
/// fresh line instead of after the prompt).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PromptState {
    vitals: Vec<(String, i64)>,
    pending: bool,
}

impl PromptState {
    /// The world's latest vitals.
    pub fn set_vitals(&mut self, stats: impl IntoIterator<Item = (String, i64)>) {
        self.vitals = stats
            .into_iter()
            .filter(|(name, _)| !name.is_empty())
            .collect();
    }

    /// The prompt to show now (none before the first vitals); it is then
    /// pending until input or output moves past it.
    /// For a screen reader, without the brackets ([`render_spoken`]).
    pub fn show(&mut self, screen_reader: bool) -> Option<String> {
        let text = if screen_reader {
            render_spoken(&self.vitals)?
        } else {
            render(&self.vitals)?
        };
        self.pending = true;
        Some(text)
    }

    /// Output is about to be shown: `true` if a prompt is on the line and
    /// the output must start on a new one.
    pub fn take_pending(&mut self) -> bool {
        std::mem::take(&mut self.pending)
    }

    /// The player typed a line (their client ended the prompt's line).
    pub fn answered(&mut self) {
        self.pending = false;
    }
}

/// `<a 1/2 b 3> ` from the stats, `None` if there are none to show.
pub fn render(stats: &[(String, i64)]) -> Option<String> {
    Some(format!("<{}> ", parts(stats, "/")?.join(" ")))
}

/// The prompt a screen reader reads aloud: no brackets or slashes to
/// spell out, `hp 17 of 20, mana 10 of 10: `.
pub fn render_spoken(stats: &[(String, i64)]) -> Option<String> {
    Some(format!("{}: ", parts(stats, " of ")?.join(", ")))
}

/// Each stat as `name v` or `name v<of>max`; `None` if none.
fn parts(stats: &[(String, i64)], of: &str) -> Option<Vec<String>> {
    let max_of = |name: &str| {
        stats
            .iter()
            .find(|(n, _)| n.strip_prefix("max") == Some(name))
            .map(|(_, v)| *v)
    };
    let parts: Vec<String> = stats
        .iter()
        .filter(|(n, _)| !(n.starts_with("max") && stats.iter().any(|(o, _)| n[3..] == **o)))
        .take(MAX_PROMPT_STATS)
        .map(|(name, v)| {
            let name: String = name
                .chars()
                .filter(|c| !c.is_control())
                .take(MAX_STAT_NAME)
                .collect();
            match max_of(&name) {
                Some(max) => format!("{name} {v}{of}{max}"),
                None => format!("{name} {v}"),
            }
        })
        .collect();
    if parts.is_empty() {
        return None;
    }
    Some(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(pairs: &[(&str, i64)]) -> Vec<(String, i64)> {
        pairs.iter().map(|(n, v)| (n.to_string(), *v)).collect()
    }

    #[test]
    fn pairs_each_stat_with_its_maximum_in_the_games_order() {
        let v = stats(&[
            ("hp", 17),
            ("maxhp", 20),
            ("mana", 10),
            ("maxmana", 10),
            ("moves", 48),
            ("maxmoves", 50),
        ]);
        assert_eq!(render(&v).unwrap(), "<hp 17/20 mana 10/10 moves 48/50> ");
        // A stat without a partner, and a max without its stat.
        let v = stats(&[("gold", 5), ("maxrage", 9)]);
        assert_eq!(render(&v).unwrap(), "<gold 5 maxrage 9> ");
        assert_eq!(render(&[]), None);
        assert_eq!(
            render_spoken(&stats(&[("hp", 17), ("maxhp", 20), ("gold", 5)])).unwrap(),
            "hp 17 of 20, gold 5: "
        );
        assert_eq!(render_spoken(&[]), None);
        // Control characters from a game never reach the terminal.
        let v = stats(&[("h\x1b[2Jp", 1)]);
        assert_eq!(render(&v).unwrap(), "<h[2Jp 1> ");
    }

    #[test]
    fn a_shown_prompt_is_pending_until_output_or_input() {
        let mut p = PromptState::default();
        assert_eq!(p.show(false), None, "nothing before the first vitals");
        assert!(!p.take_pending());
        p.set_vitals(stats(&[("hp", 1)]));
        assert_eq!(p.show(false).as_deref(), Some("<hp 1> "));
        assert!(p.take_pending());
        assert!(!p.take_pending());
        p.show(false);
        p.answered();
        assert!(!p.take_pending());
    }
}
