//! Player-defined command aliases: one word expands to a command line.
//!
//! Aliases ride handoff snapshots and durable rows, so every bound here is
//! re-applied by [`sanitize_aliases`] on load and on arrival, not only when a
//! player sets one.

use std::collections::BTreeMap;

use super::command::is_command_word;
use super::text::{split_word, strip_control};

pub const MAX_ALIASES: usize = 20;
/// Longest expansion, bytes.
pub const MAX_ALIAS_LEN: usize = 200;
/// Longest alias name, bytes.
pub const MAX_ALIAS_NAME: usize = 16;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AliasError {
    #[error("'{0}' is a command and can't be an alias.")]
    Reserved(String),
    #[error("Alias names are 1-16 letters, digits or '_'.")]
    BadName,
    #[error("An alias needs an expansion of 1-200 characters.")]
    BadExpansion,
    #[error("You already have 20 aliases; remove one first.")]
    TooMany,
}

/// Alias names are ASCII letters, digits and '_', stored lower-case.
fn valid_name(name: &str) -> bool {
    (1..=MAX_ALIAS_NAME).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The stored form of an expansion, or `None` if nothing usable is left.
fn clean_expansion(expansion: &str) -> Option<String> {
    let clean = strip_control(expansion);
    let clean = clean.trim();
    (!clean.is_empty() && clean.len() <= MAX_ALIAS_LEN).then(|| clean.to_string())
}

/// Re-bounds a set of aliases from an untrusted source: bad or reserved
/// names and unusable expansions are dropped, control characters stripped,
/// at most [`MAX_ALIASES`] kept (the alphabetically first).
pub fn sanitize_aliases(aliases: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (name, expansion) in aliases {
        if out.len() == MAX_ALIASES {
            break;
        }
        let name = name.to_ascii_lowercase();
        if !valid_name(&name) || is_command_word(&name) || out.contains_key(&name) {
            continue;
        }
        if let Some(expansion) = clean_expansion(expansion) {
            out.insert(name, expansion);
        }
    }
    out
}

/// Sets (or replaces) one alias in a character's `aliases`.
pub fn set_alias(
    aliases: &mut BTreeMap<String, String>,
    name: &str,
    expansion: &str,
) -> Result<(), AliasError> {
    let name = name.to_ascii_lowercase();
    if !valid_name(&name) {
        return Err(AliasError::BadName);
    }
    if is_command_word(&name) {
        return Err(AliasError::Reserved(name));
    }
    let expansion = clean_expansion(expansion).ok_or(AliasError::BadExpansion)?;
    if !aliases.contains_key(&name) && aliases.len() >= MAX_ALIASES {
        return Err(AliasError::TooMany);
    }
    aliases.insert(name, expansion);
    Ok(())
}

/// Removes an alias; false if there was none.
pub fn remove_alias(aliases: &mut BTreeMap<String, String>, name: &str) -> bool {
    aliases.remove(&name.to_ascii_lowercase()).is_some()
}

/// Expands the first word if it is an alias, appending the rest of the line.
/// One level only: the result is never expanded again, so aliases can't loop.
pub fn expand(aliases: &BTreeMap<String, String>, line: &str) -> String {
    let (word, rest) = split_word(line);
    match aliases.get(&word.to_ascii_lowercase()) {
        Some(expansion) if rest.is_empty() => expansion.clone(),
        Some(expansion) => format!("{expansion} {rest}"),
        None => line.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none() -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    #[test]
    fn set_and_expand_one_level() {
        let mut c = none();
        set_alias(&mut c, "Gr", "say hello").unwrap();
        set_alias(&mut c, "loop", "gr again").unwrap();
        assert_eq!(expand(&c, "gr"), "say hello");
        assert_eq!(expand(&c, "GR  there"), "say hello there");
        assert_eq!(expand(&c, "loop"), "gr again");
        assert_eq!(expand(&c, "look"), "look");
        assert_eq!(expand(&c, ""), "");
    }

    #[test]
    fn reserved_and_bad_names_refused() {
        let mut c = none();
        for name in ["look", "l", "n", "quit", "alias", "sc", "journal"] {
            assert_eq!(
                set_alias(&mut c, name, "say x"),
                Err(AliasError::Reserved(name.to_lowercase()))
            );
        }
        assert_eq!(set_alias(&mut c, "bad name", "x"), Err(AliasError::BadName));
        assert_eq!(set_alias(&mut c, "", "x"), Err(AliasError::BadName));
        assert_eq!(set_alias(&mut c, "é", "x"), Err(AliasError::BadName));
        assert_eq!(
            set_alias(&mut c, &"a".repeat(17), "x"),
            Err(AliasError::BadName)
        );
        assert_eq!(
            set_alias(&mut c, "ok", "\x1b\r\n"),
            Err(AliasError::BadExpansion)
        );
        assert_eq!(
            set_alias(&mut c, "ok", &"x".repeat(201)),
            Err(AliasError::BadExpansion)
        );
        assert!(c.is_empty());
    }

    #[test]
    fn bounded_count() {
        let mut c = none();
        for i in 0..MAX_ALIASES {
            set_alias(&mut c, &format!("a{i}"), "look").unwrap();
        }
        assert_eq!(set_alias(&mut c, "extra", "look"), Err(AliasError::TooMany));
        // Replacing an existing one is still fine at the cap.
        set_alias(&mut c, "a0", "say hi").unwrap();
        assert!(remove_alias(&mut c, "A0"));
        assert!(!remove_alias(&mut c, "a0"));
    }

    #[test]
    fn control_characters_stripped_on_set() {
        let mut c = none();
        set_alias(&mut c, "x", " say \x1b[31mred\x07 ").unwrap();
        assert_eq!(c["x"], "say [31mred");
    }

    #[test]
    fn sanitize_rebounds_untrusted_maps() {
        let mut forged = BTreeMap::new();
        forged.insert("quit".to_string(), "say hijack".to_string());
        forged.insert("N".to_string(), "x".to_string());
        forged.insert("Ok".to_string(), "say \u{1b}hi\n".to_string());
        forged.insert("empty".to_string(), "\u{7}".to_string());
        forged.insert("long".to_string(), "y".repeat(MAX_ALIAS_LEN + 1));
        forged.insert("sp ace".to_string(), "look".to_string());
        for i in 0..40 {
            forged.insert(format!("z{i:02}"), "look".to_string());
        }
        let clean = sanitize_aliases(&forged);
        assert_eq!(clean.len(), MAX_ALIASES);
        assert_eq!(clean["ok"], "say hi");
        for gone in ["quit", "n", "empty", "long", "sp ace"] {
            assert!(!clean.contains_key(gone), "{gone}");
        }
        assert_eq!(sanitize_aliases(&clean), clean);
    }
}
