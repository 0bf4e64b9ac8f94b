//! `help` and `help <command>`: the list of commands, or the entry of the
//! one asked for (an abbreviation works as it does at the prompt).

use super::command::canonical;

pub const HELP: &str = "\
Commands:
  look (l) [thing|direction]   describe the room, or something in it
  north south east west up down (n s e w u d)
  exits                        where the exits lead
  say <text> ('<text>)         speak to the room
  emote <text> (:<text>)       act before the room: `emote waves.`
  tell <name> <text>           speak to one player, on any shard
  chat <text> (ooc)            speak to everyone online
  who                          everyone online
  where                        where you are, precisely
  inventory (i)                what you carry
  get <item|all>, drop <item|all>
  wear <item>, remove <item>, equipment (eq)
  eat <item>
  hit <creature>               wound a creature (it heals at the zone's reset)
  score                        your character sheet
  journal [text]               add to or read your journal
  alias [name [expansion]]     list, remove or set an alias
  colour [on|off|auto|16|256|truecolour] (color)
                               colour for room names, exits and speech
  wizinvis                     admins: toggle invisibility
  help [command]               this list, or one command's entry
  quit                         save and leave
";

/// The whole list for no topic; else the entry naming the command.
pub fn help(topic: &str) -> String {
    let topic = topic.trim().to_ascii_lowercase();
    if topic.is_empty() {
        return HELP.to_string();
    }
    let word = canonical(&topic).unwrap_or(&topic);
    // Other words for a command, documented under its own.
    let word = match word {
        "take" => "get",
        "wield" => "wear",
        "ooc" => "chat",
        "color" => "colour",
        w => w,
    };
    match entry(word) {
        Some(lines) => lines,
        None => format!("There is no help on `{topic}`. Type `help` for the list of commands.\n"),
    }
}

/// The entry (its line and the lines continuing it) whose head names `word`.
fn entry(word: &str) -> Option<String> {
    let mut found: Option<String> = None;
    for line in HELP.lines().skip(1) {
        let continues = line.starts_with("    ");
        match &mut found {
            Some(text) if continues => text.push_str(&format!("{line}\n")),
            Some(_) => break,
            None if !continues && names(line, word) => found = Some(format!("{line}\n")),
            None => {}
        }
    }
    found
}

/// Whether the words an entry documents (before its explanation, at the
/// first run of two spaces) include `word`, abbreviations in brackets too.
fn names(line: &str, word: &str) -> bool {
    let head = line.trim_start();
    let head = head.split("   ").next().unwrap_or(head);
    head.split(|c: char| !c.is_ascii_alphabetic())
        .any(|w| w == word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_topic_gets_its_entry_and_an_unknown_one_says_so() {
        let say = help("say");
        assert!(say.starts_with("  say <text>"), "{say}");
        assert_eq!(say.lines().count(), 1, "{say}");
        // An abbreviation, and a word in a shared entry.
        assert!(help("l").contains("describe the room"));
        assert!(help("drop").contains("get <item|all>"));
        assert!(help("n").contains("north south"));
        // An entry with a continuation line keeps it.
        assert_eq!(help("colour").lines().count(), 2, "{}", help("colour"));
        assert!(help("xyzzy").starts_with("There is no help on `xyzzy`"));
        assert!(help("take").contains("get <item|all>"));
        assert!(help("wield").contains("wear <item>"));
        assert_eq!(help(""), HELP);
    }
}
