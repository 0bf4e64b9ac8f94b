//! Item conservation: every world-file item the reset places and nobody
//! eats exists exactly once — on one floor or in one pack — whatever the
//! faults did (issue "One command, one commit": a crash between a `drop`
//! and the zone's save lost the item; between a `get` and it, minted a
//! second one).
//!
//! A census reads every zone's state row and every bot's character row in
//! one `MULTI` (one instant of the durable state) and counts each tracked
//! item: on the floors a zone's row holds (a zone never saved holds its
//! world-file placement), and in the packs and equipment of the rows.
//! Food is not tracked (eaten, a copy is gone and the reset puts one back),
//! nor the items of instanced zones (an instance's floor ends with it).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

/// The tracked items: id → the zone whose world file places it.
#[derive(Debug, Clone, Default)]
pub struct Tracked {
    items: BTreeMap<String, String>,
}

/// How many copies of each tracked item one census found.
pub type Counts = BTreeMap<String, u32>;

impl Tracked {
    /// The tracked items of the world in `dir` (its zone files).
    pub fn load(dir: &Path) -> anyhow::Result<Tracked> {
        let mut items = BTreeMap::new();
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let zone: Value = serde_json::from_slice(&std::fs::read(&path)?)?;
            if zone["instanced"].as_bool() == Some(true) {
                continue;
            }
            let id = zone["id"].as_str().unwrap_or_default().to_string();
            for item in zone["items"].as_array().into_iter().flatten() {
                if item["room"].is_string() && item.get("food").is_none_or(Value::is_null) {
                    let item_id = item["id"].as_str().unwrap_or_default();
                    items.insert(item_id.to_string(), id.clone());
                }
            }
        }
        Ok(Tracked { items })
    }

    /// The zones whose rows a census reads.
    pub fn zones(&self) -> Vec<String> {
        let mut zones: Vec<String> = self.items.values().cloned().collect();
        zones.dedup();
        zones.sort();
        zones.dedup();
        zones
    }

    /// Count every tracked item in `zones` (each zone's state row as its
    /// fields: the whole `state`, or its `part:<key>` parts; none when
    /// never saved) and `rows` (character states).
    pub fn count(
        &self,
        zones: &BTreeMap<String, Vec<(String, Vec<u8>)>>,
        rows: &[Vec<u8>],
    ) -> Counts {
        let mut counts: Counts = self.items.keys().map(|id| (id.clone(), 0)).collect();
        for (zone, fields) in zones {
            if fields.iter().any(|(k, _)| k.starts_with("part:")) {
                let floors = fields.iter().filter(|(k, _)| k.starts_with("part:floor:"));
                for (_, floor) in floors {
                    if let Ok(items) = serde_json::from_slice::<Value>(floor) {
                        self.tally(&items, &mut counts);
                    }
                }
                continue;
            }
            let whole = fields.iter().find(|(k, _)| k == "state").map(|(_, v)| v);
            match whole.and_then(|s| serde_json::from_slice::<Value>(s).ok()) {
                Some(saved) => self.tally(&saved["floors"], &mut counts),
                // Never saved: as the world file places it.
                None => {
                    for (id, home) in &self.items {
                        if home == zone {
                            *counts.entry(id.clone()).or_default() += 1;
                        }
                    }
                }
            }
        }
        for row in rows {
            if let Ok(state) = serde_json::from_slice::<Value>(row) {
                for part in ["inventory", "equipment"] {
                    self.tally(&state[part], &mut counts);
                }
            }
        }
        counts
    }

    /// Count the tracked items anywhere inside `v` (an item is an object
    /// with a tracked `id`).
    fn tally(&self, v: &Value, counts: &mut Counts) {
        match v {
            Value::Object(map) => {
                if let Some(Value::String(id)) = map.get("id")
                    && let Some(n) = counts.get_mut(id)
                {
                    *n += 1;
                    return;
                }
                map.values().for_each(|v| self.tally(v, counts));
            }
            Value::Array(items) => items.iter().for_each(|v| self.tally(v, counts)),
            _ => {}
        }
    }
}

/// What is wrong with one census: items in two places or more, and (when
/// `final_census`) items nowhere.
pub fn anomalies(counts: &Counts, final_census: bool) -> Vec<String> {
    counts
        .iter()
        .filter_map(|(id, n)| match n {
            0 if final_census => Some(format!("{id} exists nowhere")),
            2.. => Some(format!("{id} exists {n} times")),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracked() -> Tracked {
        Tracked::load(&crate::world::world_dir()).expect("the starter world")
    }

    #[test]
    fn the_starter_world_tracks_what_the_reset_places_but_food_and_instances() {
        let t = tracked();
        assert_eq!(t.items.get("city:helm").map(String::as_str), Some("city"));
        assert!(!t.items.contains_key("city:bread"), "food is not tracked");
        assert!(!t.items.contains_key("crypt:crown"), "nor an instance's");
        assert!(t.zones().contains(&"hills".to_string()));
    }

    #[test]
    fn a_census_counts_floors_packs_and_unsaved_zones_and_flags_two_or_none() {
        let t = tracked();
        let mut zones: BTreeMap<String, Vec<(String, Vec<u8>)>> =
            t.zones().into_iter().map(|z| (z, Vec::new())).collect();
        // The city saved with the helm in the square and no gloves, in
        // parts; the hills whole, with the pebble nowhere on its floors.
        let helm = br#"[{"id":"city:helm","name":"x","keywords":[]}]"#;
        zones.insert(
            "city".into(),
            vec![
                ("gen".into(), b"3".to_vec()),
                ("part:floor:city:square".into(), helm.to_vec()),
                ("part:clock".into(), b"{}".to_vec()),
            ],
        );
        zones.insert(
            "hills".into(),
            vec![("state".into(), br#"{"floors":{}}"#.to_vec())],
        );
        let pack = br#"{"inventory":[{"id":"city:helm","name":"x","keywords":[]}],"equipment":{"hands":{"id":"keep:sword","name":"y","keywords":[]}},"journal":["city:helm"]}"#;
        let counts = t.count(&zones, &[pack.to_vec()]);
        assert_eq!(
            counts["city:helm"], 2,
            "floor and pack; a journal string is no item"
        );
        assert_eq!(counts["city:gloves"], 0);
        assert_eq!(
            counts["keep:sword"], 2,
            "unsaved keep places it, and it is worn"
        );
        assert_eq!(counts["hills:pebble"], 0, "saved whole without it");
        assert_eq!(
            counts["forest:staff"], 1,
            "never saved: where the world puts it"
        );
        let found = anomalies(&counts, true);
        assert!(found.contains(&"city:helm exists 2 times".to_string()));
        assert!(found.contains(&"city:gloves exists nowhere".to_string()));
        assert!(
            !anomalies(&counts, false)
                .iter()
                .any(|a| a.contains("nowhere"))
        );
    }
}
