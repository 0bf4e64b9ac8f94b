//! Parsers for the player protocol's fixed output shapes (CONTRACT.md).

use anyhow::{Context, bail};

/// `Welcome, <Name>.` → `<Name>`.
pub fn welcome_name(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("Welcome, ")?;
    let name = rest.trim_end_matches(['.', '!', ' ']);
    (!name.is_empty()).then_some(name)
}

/// Gate and world lines that end a login attempt without a welcome.
pub fn is_login_refusal(line: &str) -> bool {
    const REFUSALS: &[&str] = &[
        "Login failed",
        "Names are",
        "Passwords must",
        "Too many failed logins",
        "The world is not reachable",
        "The world could not be reached",
        "The world cannot be reached",
        telos_proto::LOGIN_BUSY,
        "The gate is full",
        "Too many connections from your address",
        "Character creation refused",
        "You did not log in within",
        "The gate is shutting down",
        "Type `connect <name> <password>` or",
    ];
    REFUSALS.iter().any(|p| line.starts_with(p))
}

/// `where: zone=<z> room=<r> shard=<s>` → `(z, r, s)`.
pub fn parse_where(line: &str) -> Option<(String, String, String)> {
    let rest = line.strip_prefix("where: ")?;
    let mut parts = rest.split(' ');
    let zone = parts.next()?.strip_prefix("zone=")?;
    let room = parts.next()?.strip_prefix("room=")?;
    let shard = parts.next()?.strip_prefix("shard=")?;
    if parts.next().is_some() {
        return None;
    }
    Some((zone.into(), room.into(), shard.into()))
}

/// The last complete `journal <n>: <text>` … `journal end <count>` listing
/// in `text` (a replay after an outage may have printed one twice). Lines
/// of other kinds in between (other players talking) are ignored.
pub fn parse_journal(text: &str) -> anyhow::Result<Vec<String>> {
    let mut entries: Vec<String> = Vec::new();
    let mut done: Option<Vec<String>> = None;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("journal ") else {
            continue;
        };
        if let Some(count) = rest.strip_prefix("end ") {
            let count: usize = count.trim().parse().context("journal end count")?;
            if count != entries.len() {
                bail!("`journal end {count}` after {} entries", entries.len());
            }
            done = Some(std::mem::take(&mut entries));
            continue;
        }
        let Some((n, entry)) = rest.split_once(": ") else {
            continue;
        };
        let Ok(n) = n.parse::<usize>() else {
            continue;
        };
        if n == 1 {
            entries.clear();
        }
        if n != entries.len() + 1 {
            bail!("journal entry {n} after {} entries", entries.len());
        }
        entries.push(entry.to_string());
    }
    done.context("no `journal end` line")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn where_and_journal_parse() {
        assert_eq!(
            parse_where("where: zone=city room=city:square shard=shard-a"),
            Some(("city".into(), "city:square".into(), "shard-a".into()))
        );
        assert_eq!(parse_where("where: zone=city"), None);
        let text = "Bob says, 'journal 1: no'\njournal 1: a\njournal 2: b: c\njournal end 2\n";
        assert_eq!(parse_journal(text).unwrap(), ["a", "b: c"]);
        // A listing printed twice (a replay): the last one counts.
        let twice = "journal 1: a\njournal end 1\njournal 1: a\njournal end 1\n";
        assert_eq!(parse_journal(twice).unwrap(), ["a"]);
        assert_eq!(
            parse_journal("journal end 0\n").unwrap(),
            Vec::<String>::new()
        );
        assert!(parse_journal("journal 1: a\njournal end 2\n").is_err());
        assert!(parse_journal("journal 1: a\n").is_err());
    }

    #[test]
    fn welcome_and_refusals() {
        assert_eq!(welcome_name("Welcome, Alice."), Some("Alice"));
        assert_eq!(welcome_name("Welcome back"), None);
        assert!(is_login_refusal("Login failed."));
        assert!(!is_login_refusal("Alice says, 'Login failed'"));
    }
}
