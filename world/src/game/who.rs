//! The `who` list. The zone actor gathers entries from every shard; this
//! only decides what a given viewer may see and how it reads.

pub use crate::model::WhoEntry;

/// One line per player the viewer may see (sorted by name), then exactly
/// `<N> players online` (`1 player online`) where N counts only those
/// lines: a hidden admin must not be inferable from the total. Which shard
/// hosts a player is the operators' business: only an admin sees it.
pub fn format_who(entries: &[WhoEntry], viewer_is_admin: bool) -> String {
    let mut visible: Vec<&WhoEntry> = entries
        .iter()
        .filter(|e| viewer_is_admin || !e.wizinvis)
        .collect();
    visible.sort_by_key(|e| e.name.to_ascii_lowercase());
    let mut out = String::new();
    for e in &visible {
        let invis = if e.wizinvis { " (wizinvis)" } else { "" };
        if viewer_is_admin {
            out.push_str(&format!("{:<16} [{}] {}{invis}\n", e.name, e.tier, e.shard));
        } else {
            out.push_str(&format!("{:<16} [{}]\n", e.name, e.tier));
        }
    }
    let n = visible.len();
    let players = if n == 1 { "player" } else { "players" };
    out.push_str(&format!("{n} {players} online\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Tier;

    fn entry(name: &str, tier: Tier, wizinvis: bool) -> WhoEntry {
        WhoEntry {
            name: name.into(),
            tier,
            wizinvis,
            shard: "w1".into(),
        }
    }

    #[test]
    fn hides_wizinvis_from_players_and_counts_only_visible() {
        let list = [
            entry("Carol", Tier::Admin, true),
            entry("Alice", Tier::Player, false),
            entry("bob", Tier::Builder, false),
        ];
        assert_eq!(
            format_who(&list, false),
            "Alice            [player]\nbob              [builder]\n2 players online\n"
        );
        let admin = format_who(&list, true);
        assert!(
            admin.contains("Carol            [admin] w1 (wizinvis)\n"),
            "{admin}"
        );
        assert!(admin.ends_with("\n3 players online\n"), "{admin}");
    }

    #[test]
    fn empty_list() {
        assert_eq!(format_who(&[], false), "0 players online\n");
        let one = [entry("Alice", Tier::Player, false)];
        assert_eq!(
            format_who(&one, false),
            "Alice            [player]\n1 player online\n"
        );
    }
}
