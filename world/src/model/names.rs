//! Character names: what a login may be called (3–16 ASCII letters,
//! the project contract), and how a name is shown. The lowercase name is the
//! character's key everywhere (rows, sessions, snapshots).

pub const MIN_NAME_LEN: usize = 3;
pub const MAX_NAME_LEN: usize = 16;

/// 3–16 ASCII letters.
pub fn valid_name(name: &str) -> bool {
    (MIN_NAME_LEN..=MAX_NAME_LEN).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphabetic())
}

/// "aLiCe" → "Alice".
pub fn display_name(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    let mut chars = lower.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The key of a character name: its lowercase form.
pub fn name_key(name: &str) -> String {
    name.to_ascii_lowercase()
}
