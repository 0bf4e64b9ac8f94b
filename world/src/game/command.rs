//! Parsing a (sanitized, alias-expanded) input line into a [`Command`].
//!
//! Verbs match by prefix in table order, so the table is also the
//! abbreviation policy: `n` is north, `s` south, `l` look, `i` inventory.
//! The same table decides which alias names are reserved.

use super::text::split_word;
use super::world::Direction;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// A blank line: no reply.
    Empty,
    /// `look [thing|direction]`; the argument may be empty.
    Look(String),
    Move(Direction),
    Say(String),
    /// `emote <text>` (`:<text>`): the room reads `<Name> <text>`.
    Emote(String),
    /// `tell <name> <text>`: one player, on any shard; either may be empty.
    Tell(String, String),
    /// `chat <text>` (`ooc`): everyone online, on every shard.
    Chat(String),
    Who,
    Where,
    /// `journal [text]`: empty lists, text appends.
    Journal(String),
    Score,
    Wizinvis,
    Inventory,
    Equipment,
    Get(String),
    Drop(String),
    Wear(String),
    Remove(String),
    Eat(String),
    /// `hit <mob>`: wound a mob (it heals, or comes back, at the zone's reset).
    Hit(String),
    /// `alias [name [expansion]]`, raw arguments.
    Alias(String),
    /// `colour [auto|off|on|16|256|truecolour]` (`color`): how text's
    /// styles show; empty shows the choice.
    Colour(String),
    Exits,
    Help(String),
    Quit,
    Unknown,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verb {
    Go(Direction),
    Look,
    Inventory,
    Get,
    Drop,
    Say,
    Emote,
    Tell,
    Chat,
    Score,
    Who,
    Where,
    Wear,
    Wizinvis,
    Journal,
    Eat,
    Hit,
    Equipment,
    Remove,
    Alias,
    Colour,
    Exits,
    Help,
    Quit,
}

/// (word, shortest accepted prefix, verb), first match wins. Directions come
/// first because one-letter movement is what players type most.
const VERBS: &[(&str, usize, Verb)] = &[
    ("north", 1, Verb::Go(Direction::North)),
    ("south", 1, Verb::Go(Direction::South)),
    ("east", 1, Verb::Go(Direction::East)),
    ("west", 1, Verb::Go(Direction::West)),
    ("up", 1, Verb::Go(Direction::Up)),
    ("down", 1, Verb::Go(Direction::Down)),
    ("look", 1, Verb::Look),
    ("inventory", 1, Verb::Inventory),
    ("get", 1, Verb::Get),
    ("take", 2, Verb::Get),
    ("drop", 2, Verb::Drop),
    ("say", 2, Verb::Say),
    ("tell", 2, Verb::Tell),
    ("chat", 2, Verb::Chat),
    ("ooc", 3, Verb::Chat),
    ("emote", 2, Verb::Emote),
    ("score", 2, Verb::Score),
    ("who", 2, Verb::Who),
    ("where", 3, Verb::Where),
    ("wear", 3, Verb::Wear),
    ("wield", 3, Verb::Wear),
    ("wizinvis", 3, Verb::Wizinvis),
    ("journal", 1, Verb::Journal),
    ("eat", 3, Verb::Eat),
    ("hit", 3, Verb::Hit),
    ("equipment", 2, Verb::Equipment),
    ("remove", 3, Verb::Remove),
    ("alias", 2, Verb::Alias),
    ("exits", 2, Verb::Exits),
    ("colour", 3, Verb::Colour),
    ("color", 5, Verb::Colour),
    ("help", 1, Verb::Help),
    // Full word only: an abbreviation typo should not end a session.
    ("quit", 4, Verb::Quit),
];

fn lookup(word: &str) -> Option<Verb> {
    VERBS
        .iter()
        .find(|(full, min, _)| word.len() >= *min && full.starts_with(word))
        .map(|(_, _, verb)| *verb)
}

/// Whether `word` (any case) is a command word or one of its abbreviations;
/// such words can never be alias names, so an alias can't hijack `quit`.
pub fn is_command_word(word: &str) -> bool {
    lookup(&word.to_lowercase()).is_some()
}

/// The full command word `word` (any abbreviation) stands for.
pub fn canonical(word: &str) -> Option<&'static str> {
    VERBS
        .iter()
        .find(|(full, min, _)| word.len() >= *min && full.starts_with(word))
        .map(|(full, _, _)| *full)
}

/// Every full command word, for `help`.
pub fn command_words() -> impl Iterator<Item = &'static str> {
    VERBS.iter().map(|(w, _, _)| *w)
}

pub fn parse(line: &str) -> Command {
    let line = line.trim();
    if let Some(text) = line.strip_prefix('\'') {
        return Command::Say(text.trim().to_string());
    }
    if let Some(text) = line.strip_prefix(':') {
        return Command::Emote(text.trim().to_string());
    }
    let (word, rest) = split_word(line);
    if word.is_empty() {
        return Command::Empty;
    }
    let Some(verb) = lookup(&word.to_lowercase()) else {
        return Command::Unknown;
    };
    let arg = rest.trim_end().to_string();
    match verb {
        Verb::Go(d) => Command::Move(d),
        Verb::Look => Command::Look(arg),
        Verb::Inventory => Command::Inventory,
        Verb::Get => Command::Get(arg),
        Verb::Drop => Command::Drop(arg),
        Verb::Say => Command::Say(arg),
        Verb::Emote => Command::Emote(arg),
        Verb::Tell => {
            let (name, text) = split_word(&arg);
            Command::Tell(name.to_string(), text.trim().to_string())
        }
        Verb::Chat => Command::Chat(arg),
        Verb::Score => Command::Score,
        Verb::Who => Command::Who,
        Verb::Where => Command::Where,
        Verb::Wear => Command::Wear(arg),
        Verb::Wizinvis => Command::Wizinvis,
        Verb::Journal => Command::Journal(arg),
        Verb::Eat => Command::Eat(arg),
        Verb::Hit => Command::Hit(arg),
        Verb::Equipment => Command::Equipment,
        Verb::Remove => Command::Remove(arg),
        Verb::Alias => Command::Alias(arg),
        Verb::Colour => Command::Colour(arg.to_ascii_lowercase()),
        Verb::Exits => Command::Exits,
        Verb::Help => Command::Help(arg),
        Verb::Quit => Command::Quit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directions_and_abbreviations() {
        for (w, d) in [
            ("n", Direction::North),
            ("north", Direction::North),
            ("S", Direction::South),
            ("e", Direction::East),
            ("w", Direction::West),
            ("we", Direction::West),
            ("u", Direction::Up),
            ("d", Direction::Down),
            ("DOWN", Direction::Down),
        ] {
            assert_eq!(parse(w), Command::Move(d), "{w}");
        }
    }

    #[test]
    fn verbs() {
        assert_eq!(parse("l"), Command::Look(String::new()));
        assert_eq!(parse("look  fox "), Command::Look("fox".into()));
        assert_eq!(parse("i"), Command::Inventory);
        assert_eq!(
            parse("say  Hello   World "),
            Command::Say("Hello   World".into())
        );
        assert_eq!(parse("'hi there"), Command::Say("hi there".into()));
        assert_eq!(parse("sa"), Command::Say(String::new()));
        assert_eq!(parse("emote waves."), Command::Emote("waves.".into()));
        assert_eq!(parse(":grins"), Command::Emote("grins".into()));
        assert_eq!(
            parse("tell Bob  hello  there "),
            Command::Tell("Bob".into(), "hello  there".into())
        );
        assert_eq!(parse("te"), Command::Tell(String::new(), String::new()));
        assert_eq!(parse("chat hi all"), Command::Chat("hi all".into()));
        assert_eq!(parse("ooc hi"), Command::Chat("hi".into()));
        assert_eq!(parse("who"), Command::Who);
        assert_eq!(parse("wh"), Command::Who);
        assert_eq!(parse("where"), Command::Where);
        assert_eq!(parse("journal"), Command::Journal(String::new()));
        assert_eq!(parse("journal a b"), Command::Journal("a b".into()));
        assert_eq!(parse("score"), Command::Score);
        assert_eq!(parse("wizinvis"), Command::Wizinvis);
        assert_eq!(parse("take apple"), Command::Get("apple".into()));
        assert_eq!(parse("quit"), Command::Quit);
        assert_eq!(parse("qui"), Command::Unknown);
        assert_eq!(parse("xyzzy"), Command::Unknown);
        assert_eq!(parse("   "), Command::Empty);
        assert_eq!(parse("日本語 テスト"), Command::Unknown);
    }

    #[test]
    fn reserved_words() {
        for w in [
            "n", "look", "l", "QUIT", "alias", "al", "sc", "journal", "j", "wiz",
        ] {
            assert!(is_command_word(w), "{w}");
        }
        for w in ["qu", "foo", "x", "lookk"] {
            assert!(!is_command_word(w), "{w}");
        }
    }
}
