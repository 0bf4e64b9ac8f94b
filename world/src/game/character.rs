//! The durable character: everything that survives a logout or rides a
//! handoff snapshot, the one serializer for it, and what the tier grants a
//! character ([`apply_tier_flags`], [`is_admin`], [`can_see`]).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

pub use crate::model::names::{MAX_NAME_LEN, MIN_NAME_LEN, display_name, name_key, valid_name};
use serde::{Deserialize, Serialize};

use super::alias::sanitize_aliases;
use super::text::{strip_control, truncate_bytes};
use super::tier::{RESERVED_FLAGS, Tier, WIZINVIS};
use super::world::{Food, ItemDef, WearSlot};
use crate::model::style::ColourMode;

/// Journal entries kept; older ones fall off the front (the project contract).
pub const JOURNAL_LIMIT: usize = 1000;
/// Longest journal entry, bytes: bounds a character row at ~1 MB of journal.
pub const JOURNAL_ENTRY_MAX: usize = 1000;
/// Items carried (inventory, not counting equipment): bounds state size.
pub const MAX_INVENTORY: usize = 50;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    pub level: u32,
    pub xp: u64,
    pub str: u32,
    pub dex: u32,
    pub con: u32,
    pub int: u32,
    pub wis: u32,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            level: 1,
            xp: 0,
            str: 13,
            dex: 13,
            con: 13,
            int: 13,
            wis: 13,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vitals {
    pub hp: u32,
    pub max_hp: u32,
    pub mana: u32,
    pub max_mana: u32,
    pub moves: u32,
    pub max_moves: u32,
}

impl Default for Vitals {
    fn default() -> Self {
        Vitals {
            hp: 20,
            max_hp: 20,
            mana: 10,
            max_mana: 10,
            moves: 100,
            max_moves: 100,
        }
    }
}

impl Vitals {
    /// Pulls every current value into `0..=max` (a loaded or forged row may
    /// say otherwise).
    pub fn clamp(&mut self) {
        self.hp = self.hp.min(self.max_hp);
        self.mana = self.mana.min(self.max_mana);
        self.moves = self.moves.min(self.max_moves);
    }
}

/// A carried or floor item: a copy of its definition, so a character keeps
/// its items even if the zone that defined them is later edited.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    pub id: String,
    pub name: String,
    pub keywords: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<WearSlot>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub food: Option<Food>,
}

impl From<&ItemDef> for Item {
    fn from(def: &ItemDef) -> Self {
        Item {
            id: def.id.clone(),
            name: def.name.clone(),
            keywords: def.keywords.clone(),
            description: def.description.clone(),
            slot: def.slot,
            food: def.food.clone(),
        }
    }
}

impl Item {
    /// Keyword match as MUD players expect: any keyword starting with the
    /// (lower-cased) word the player typed.
    pub fn matches(&self, word: &str) -> bool {
        keywords_match(&self.keywords, word)
    }
}

pub(crate) fn keywords_match(keywords: &[String], word: &str) -> bool {
    let word = word.to_lowercase();
    !word.is_empty() && keywords.iter().any(|k| k.to_lowercase().starts_with(&word))
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Affect {
    pub name: String,
    pub ticks_left: u32,
    /// Extra hit points regained per tick while the affect lasts.
    #[serde(default)]
    pub regen: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Character {
    pub name: String,
    pub room: String,
    #[serde(default)]
    pub stats: Stats,
    #[serde(default)]
    pub vitals: Vitals,
    #[serde(default)]
    pub inventory: Vec<Item>,
    #[serde(default)]
    pub equipment: BTreeMap<String, Item>,
    #[serde(default)]
    pub affects: Vec<Affect>,
    #[serde(default)]
    pub flags: BTreeSet<String>,
    #[serde(default)]
    pub aliases: BTreeMap<String, String>,
    #[serde(default)]
    pub journal: VecDeque<String>,
    #[serde(default)]
    pub tier: Tier,
    #[serde(default)]
    pub account: String,
    #[serde(default)]
    pub instance_return: Option<String>,
    /// How the player chose to see colour (`colour`); absent from the
    /// state of a player who never chose.
    #[serde(default, skip_serializing_if = "is_auto")]
    pub colour: ColourMode,
}

fn is_auto(mode: &ColourMode) -> bool {
    *mode == ColourMode::Auto
}

impl Character {
    /// A fresh level-1 character; `name` is stored in display form.
    pub fn new(name: &str, start_room: &str) -> Self {
        Character {
            name: display_name(name),
            room: start_room.to_string(),
            stats: Stats::default(),
            vitals: Vitals::default(),
            inventory: Vec::new(),
            equipment: BTreeMap::new(),
            affects: Vec::new(),
            flags: BTreeSet::new(),
            aliases: BTreeMap::new(),
            journal: VecDeque::new(),
            tier: Tier::Player,
            account: String::new(),
            instance_return: None,
            colour: ColourMode::Auto,
        }
    }

    /// The case-insensitive identity: player keys, store rows, presence.
    pub fn key(&self) -> String {
        name_key(&self.name)
    }

    /// Appends a journal entry (control characters stripped, trimmed, capped
    /// at [`JOURNAL_ENTRY_MAX`] bytes), dropping the oldest past
    /// [`JOURNAL_LIMIT`]. Returns false, storing nothing, if the entry is empty.
    pub fn add_journal(&mut self, text: &str) -> bool {
        let clean = strip_control(text);
        let entry = truncate_bytes(clean.trim(), JOURNAL_ENTRY_MAX).trim_end();
        if entry.is_empty() {
            return false;
        }
        self.journal.push_back(entry.to_string());
        while self.journal.len() > JOURNAL_LIMIT {
            self.journal.pop_front();
        }
        true
    }
}

/// THE serializer for durable state; the handoff snapshot reuses these bytes.
/// Deterministic: fixed field order, only ordered collections.
pub fn to_state_json(ch: &Character) -> Vec<u8> {
    // Serializing plain structs, strings and BTree maps with string keys
    // cannot fail.
    serde_json::to_vec(ch).expect("Character serializes")
}

/// Decodes durable state as stored. Nothing here is trusted: callers run
/// [`sanitize_loaded`] before the character plays.
pub fn from_state_json(bytes: &[u8]) -> Result<Character, serde_json::Error> {
    serde_json::from_slice(bytes)
}

/// Everything a loaded or handed-off character must pass through before it
/// plays: aliases re-bounded, reserved flags re-derived from the tier,
/// journal and inventory bounded, vitals clamped.
pub fn sanitize_loaded(ch: &mut Character) {
    ch.aliases = sanitize_aliases(&ch.aliases);
    apply_tier_flags(ch);
    let journal = std::mem::take(&mut ch.journal);
    for entry in journal {
        ch.add_journal(&entry);
    }
    ch.inventory.truncate(MAX_INVENTORY);
    ch.vitals.clamp();
}

/// Strips every reserved flag, then grants exactly the character's tier's;
/// removes `wizinvis` unless the character is an admin.
pub fn apply_tier_flags(ch: &mut Character) {
    ch.flags.retain(|f| !RESERVED_FLAGS.contains(&f.as_str()));
    ch.flags.extend(
        super::tier::granted_flags(ch.tier)
            .iter()
            .map(|f| f.to_string()),
    );
    if ch.tier != Tier::Admin {
        ch.flags.remove(WIZINVIS);
    }
}

/// Admin checks read the tier, never a flag, so a stray flag can't elevate.
pub fn is_admin(ch: &Character) -> bool {
    ch.tier == Tier::Admin
}

/// Whether `viewer` can see `target` in rooms and `who`.
pub fn can_see(viewer: &Character, target: &Character) -> bool {
    !target.flags.contains(WIZINVIS) || is_admin(viewer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::game::tier::CAP_ADMIN;

    fn rich() -> Character {
        let mut ch = Character::new("aLiCe", "city:square");
        ch.inventory.push(Item {
            id: "city:bread".into(),
            name: "a loaf of bread".into(),
            keywords: vec!["bread".into()],
            description: None,
            slot: None,
            food: Some(Food {
                affect: "well-fed".into(),
                ticks: 30,
                heal: 5,
                regen: 1,
            }),
        });
        ch.affects.push(Affect {
            name: "warm".into(),
            ticks_left: 3,
            regen: 0,
        });
        ch.flags.insert("zeta".into());
        ch.flags.insert("alpha".into());
        ch.aliases.insert("zz".into(), "say zz".into());
        ch.aliases.insert("aa".into(), "look".into());
        ch.add_journal("first");
        ch.instance_return = Some("hills:barrow".into());
        ch
    }

    #[test]
    fn names() {
        assert!(valid_name("Bob"));
        assert!(valid_name("abcdefghijklmnop"));
        assert!(!valid_name("ab"));
        assert!(!valid_name("abcdefghijklmnopq"));
        assert!(!valid_name("bob1"));
        assert!(!valid_name("bób"));
        assert_eq!(display_name("aLiCe"), "Alice");
        assert_eq!(Character::new("aLiCe", "x:y").key(), "alice");
    }

    #[test]
    fn state_json_round_trips_and_is_deterministic() {
        let ch = rich();
        let bytes = to_state_json(&ch);
        let back = from_state_json(&bytes).unwrap();
        assert_eq!(back, ch);
        assert_eq!(to_state_json(&back), bytes);
        // Insertion order of maps/sets doesn't leak into the bytes.
        let mut other = Character::new("alice", "city:square");
        other.inventory = ch.inventory.clone();
        other.affects = ch.affects.clone();
        other.flags.insert("alpha".into());
        other.flags.insert("zeta".into());
        other.aliases.insert("aa".into(), "look".into());
        other.aliases.insert("zz".into(), "say zz".into());
        other.journal = ch.journal.clone();
        other.instance_return = ch.instance_return.clone();
        assert_eq!(to_state_json(&other), bytes);
        let text = String::from_utf8(bytes).unwrap();
        assert!(
            text.starts_with("{\"name\":\"Alice\",\"room\":\"city:square\",\"stats\":"),
            "{text}"
        );
    }

    #[test]
    fn from_state_json_rejects_garbage() {
        assert!(from_state_json(b"not json").is_err());
        assert!(from_state_json(b"{}").is_err());
        // Minimal rows (only name and room) decode with defaults.
        let ch = from_state_json(br#"{"name":"Bob","room":"city:square"}"#).unwrap();
        assert_eq!(ch.vitals, Vitals::default());
        assert_eq!(ch.tier, Tier::Player);
    }

    #[test]
    fn journal_is_capped_in_count_and_size() {
        let mut ch = Character::new("bob", "x:y");
        for i in 0..(JOURNAL_LIMIT + 5) {
            assert!(ch.add_journal(&format!("entry {i}")));
        }
        assert_eq!(ch.journal.len(), JOURNAL_LIMIT);
        assert_eq!(ch.journal.front().unwrap(), "entry 5");
        assert!(ch.add_journal(&"é".repeat(JOURNAL_ENTRY_MAX)));
        assert_eq!(ch.journal.back().unwrap().len(), JOURNAL_ENTRY_MAX);
        assert!(!ch.add_journal(" \x07\r\n "));
        ch.add_journal("a\x1b[2Jb\nc");
        assert_eq!(ch.journal.back().unwrap(), "a[2Jbc");
    }

    #[test]
    fn sanitize_loaded_distrusts_the_row() {
        let mut ch = rich();
        ch.flags.insert(CAP_ADMIN.into());
        ch.aliases.insert("look".into(), "quit".into());
        ch.vitals.hp = 999;
        ch.journal.push_back("x\u{1b}y".into());
        sanitize_loaded(&mut ch);
        assert!(!ch.flags.contains(CAP_ADMIN));
        assert!(!ch.aliases.contains_key("look"));
        assert_eq!(ch.vitals.hp, ch.vitals.max_hp);
        assert_eq!(ch.journal.back().unwrap(), "xy");
    }

    #[test]
    fn player_loses_forged_caps_and_wizinvis() {
        let mut ch = Character::new("alice", "city:square");
        ch.flags
            .extend(["cap_admin", "cap_build", "wizinvis", "brave"].map(String::from));
        apply_tier_flags(&mut ch);
        assert_eq!(ch.flags.iter().collect::<Vec<_>>(), ["brave"]);
    }

    #[test]
    fn builder_gets_exactly_build() {
        let mut ch = Character::new("bob", "city:square");
        ch.tier = Tier::Builder;
        ch.flags.extend(["cap_admin", "wizinvis"].map(String::from));
        apply_tier_flags(&mut ch);
        assert_eq!(ch.flags.iter().collect::<Vec<_>>(), ["cap_build"]);
    }

    #[test]
    fn admin_gets_both_and_keeps_wizinvis() {
        let mut ch = Character::new("carol", "city:square");
        ch.tier = Tier::Admin;
        ch.flags.insert(WIZINVIS.to_string());
        apply_tier_flags(&mut ch);
        assert_eq!(
            ch.flags.iter().collect::<Vec<_>>(),
            ["cap_admin", "cap_build", "wizinvis"]
        );
        // A demoted admin loses everything on the next application.
        ch.tier = Tier::Player;
        apply_tier_flags(&mut ch);
        assert!(ch.flags.is_empty());
    }
}
