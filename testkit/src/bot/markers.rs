//! Marker lines: how the bot knows where a command's output ends (see
//! the [`super`] module docs).

/// Command words used as markers, in rotation. Each is a command word the
/// world refuses as an alias name (the full words of the player protocol
/// and their accepted abbreviations), so `alias <word> x` changes nothing.
/// The rotation length bounds how far back a replayed marker answer can be
/// told apart from the current one.
pub const MARKER_WORDS: &[&str] = &[
    "look",
    "loo",
    "lo",
    "l",
    "north",
    "nort",
    "nor",
    "no",
    "n",
    "south",
    "sout",
    "sou",
    "so",
    "s",
    "east",
    "eas",
    "ea",
    "e",
    "west",
    "wes",
    "we",
    "w",
    "up",
    "u",
    "down",
    "dow",
    "do",
    "d",
    "inventory",
    "inventor",
    "invento",
    "invent",
    "inven",
    "inve",
    "inv",
    "in",
    "i",
    "journal",
    "journa",
    "journ",
    "jour",
    "jou",
    "jo",
    "j",
    "wizinvis",
    "wizinvi",
    "wizinv",
    "wizin",
    "wizi",
    "wiz",
    "where",
    "wher",
    "whe",
    "who",
    "wh",
    "say",
    "sa",
    "score",
    "scor",
    "sco",
    "sc",
    "get",
    "ge",
    "g",
    "drop",
    "dro",
    "dr",
    "alias",
    "alia",
    "ali",
    "al",
    "help",
    "hel",
    "he",
    "h",
    "quit",
];

/// The line the world answers a marker with.
pub fn marker_answer(word: &str) -> String {
    format!("'{word}' is a command and can't be an alias.")
}

/// Whether `line` is the world's answer to some marker (current or old).
pub fn is_marker_answer(line: &str) -> bool {
    line.strip_prefix('\'')
        .and_then(|rest| rest.strip_suffix("' is a command and can't be an alias."))
        .is_some_and(|word| MARKER_WORDS.contains(&word))
}

/// Whether `line` is a marker line as the bot sends it (for filtering
/// [`Bot::sent`]).
pub fn is_marker_line(line: &str) -> bool {
    line.strip_prefix("alias ")
        .and_then(|rest| rest.strip_suffix(" x"))
        .is_some_and(|word| MARKER_WORDS.contains(&word))
}

/// The marker word whose answer `line` is, if it is one.
pub fn answered_marker(line: &str) -> Option<&'static str> {
    let word = line
        .strip_prefix('\'')?
        .strip_suffix("' is a command and can't be an alias.")?;
    MARKER_WORDS.iter().copied().find(|w| *w == word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_words_are_distinct_and_recognised() {
        let mut words = MARKER_WORDS.to_vec();
        words.sort_unstable();
        words.dedup();
        assert_eq!(words.len(), MARKER_WORDS.len());
        for w in MARKER_WORDS {
            assert!(is_marker_answer(&marker_answer(w)));
            assert!(is_marker_line(&format!("alias {w} x")));
        }
        assert!(!is_marker_answer(
            "Alice says, ''look' is a command and can't be an alias.'"
        ));
        assert!(!is_marker_line("alias foo x"));
        assert_eq!(answered_marker(&marker_answer("wher")), Some("wher"));
        assert_eq!(
            answered_marker("'foo' is a command and can't be an alias."),
            None
        );
    }
}
