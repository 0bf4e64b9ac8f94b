//! How names, item lists and descriptions read in output: the pieces a
//! room's view ([`super::zone::render_room`]) and the item commands share.
//! A leaf over the character's items and the text helpers.

use super::character::Item;
use super::text::capitalize;

/// A running-text name at the start of a sentence ("a red fox" → "A red fox").
pub fn name_cap(name: &str) -> String {
    capitalize(name)
}

/// Identical items grouped: "A red apple lies here. (x3)".
pub fn item_lines(items: &[Item], suffix: &str) -> String {
    let mut out = String::new();
    for (name, n) in group_items(items) {
        out.push_str(&format!("{} {suffix}{}\n", name_cap(name), count_suffix(n)));
    }
    out
}

/// Item names with their counts, in the order each name first appears.
pub fn group_items(items: &[Item]) -> Vec<(&str, usize)> {
    let mut grouped: Vec<(&str, usize)> = Vec::new();
    for item in items {
        match grouped.iter_mut().find(|(name, _)| *name == item.name) {
            Some((_, n)) => *n += 1,
            None => grouped.push((&item.name, 1)),
        }
    }
    grouped
}

pub fn count_suffix(n: usize) -> String {
    if n > 1 {
        format!(" (x{n})")
    } else {
        String::new()
    }
}
