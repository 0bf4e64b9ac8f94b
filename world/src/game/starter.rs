//! The starter world behind the game interface ([`crate::model`]): the
//! world definitions are a [`Game`], a [`Character`] a [`Player`], a live
//! [`ZoneState`] a [`ZoneModel`].

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::Arc;

use super::alias::sanitize_aliases;
use super::character::{
    Character, apply_tier_flags, from_state_json, sanitize_loaded, to_state_json,
};
use super::tier::WIZINVIS;
use super::who::format_who;
use super::world::WorldDef;
use super::zone::ZoneState;
use crate::model::ids::template_of;
use crate::model::{
    Ctx, Delivery, Direction, Game, Outcome, Player, PlayerBox, StateComponents, StateError,
    StatePart, Tier, WhoEntry, ZoneInfo, ZoneModel, downcast,
};

/// The starter game: the world of `config/world/*.json`.
pub struct StarterGame {
    world: Arc<WorldDef>,
}

impl StarterGame {
    pub fn new(world: WorldDef) -> Self {
        StarterGame {
            world: Arc::new(world),
        }
    }

    pub fn world(&self) -> &Arc<WorldDef> {
        &self.world
    }
}

impl Game for StarterGame {
    fn start_room(&self) -> &str {
        &self.world.start_room
    }

    fn zones(&self) -> Vec<ZoneInfo> {
        self.world
            .zones
            .values()
            .map(|z| ZoneInfo {
                id: z.id.clone(),
                instanced: z.instanced,
            })
            .collect()
    }

    fn zone(&self, zone_id: &str) -> Option<ZoneInfo> {
        self.world.zone(zone_id).map(|z| ZoneInfo {
            id: z.id.clone(),
            instanced: z.instanced,
        })
    }

    fn has_room(&self, room_id: &str) -> bool {
        self.world.room(room_id).is_some()
    }

    fn open_zone(&self, zone_id: &str) -> Option<Box<dyn ZoneModel>> {
        let def = self.world.zone(template_of(zone_id))?.clone();
        Some(Box::new(ZoneState::new(def, self.world.clone(), zone_id)))
    }

    fn new_player(&self, name: &str) -> PlayerBox {
        Box::new(Character::new(name, &self.world.start_room))
    }

    fn load_player(&self, state: &[u8], tier: Tier) -> Result<PlayerBox, StateError> {
        let mut ch = from_state_json(state).map_err(|e| StateError(e.to_string()))?;
        // The row's tier is the authority; flags, aliases and bounds are
        // re-derived on every load.
        ch.tier = tier;
        sanitize_loaded(&mut ch);
        Ok(Box::new(ch))
    }

    fn apply_state_components(&self, c: &StateComponents<'_>) -> Result<PlayerBox, StateError> {
        let mut ch = from_state_json(c.state).map_err(|e| StateError(format!("state: {e}")))?;
        if ch.key() != c.character {
            return Err(StateError("character name mismatch".into()));
        }
        // The tier rides the snapshot, signed; the reserved flags are never
        // trusted from the state: they are re-derived from the tier.
        ch.tier = c.tier;
        ch.account = c.account.to_string();
        ch.aliases = sanitize_aliases(c.aliases);
        sanitize_loaded(&mut ch);
        // wizinvis is a session concealment, never tier-granted: it clears
        // on arrival (a deliberate one-time flicker across the boundary).
        ch.flags.remove(WIZINVIS);
        ch.room = c.target_room.to_string();
        Ok(Box::new(ch))
    }

    fn render_who(&self, entries: &[WhoEntry], viewer_is_admin: bool) -> String {
        format_who(entries, viewer_is_admin)
    }
}

impl Player for Character {
    fn name(&self) -> &str {
        &self.name
    }

    fn room(&self) -> &str {
        &self.room
    }

    fn set_room(&mut self, room: String) {
        self.room = room;
    }

    fn tier(&self) -> Tier {
        self.tier
    }

    fn set_tier(&mut self, tier: Tier) {
        self.tier = tier;
        apply_tier_flags(self);
    }

    fn account(&self) -> &str {
        &self.account
    }

    fn aliases(&self) -> BTreeMap<String, String> {
        self.aliases.clone()
    }

    fn concealed(&self) -> bool {
        self.flags.contains(WIZINVIS)
    }

    fn instance_return(&self) -> Option<&str> {
        self.instance_return.as_deref()
    }

    fn set_instance_return(&mut self, room: Option<String>) {
        self.instance_return = room;
    }

    fn dump_state_json(&self) -> Vec<u8> {
        to_state_json(self)
    }

    fn clone_player(&self) -> PlayerBox {
        Box::new(self.clone())
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

impl ZoneModel for ZoneState {
    fn enter(&mut self, player: PlayerBox, arrived_from: Option<Direction>) -> Vec<Delivery> {
        ZoneState::enter(self, *downcast::<Character>(player), arrived_from)
    }

    fn leave(
        &mut self,
        key: &str,
        toward: Option<Direction>,
    ) -> Option<(PlayerBox, Vec<Delivery>)> {
        ZoneState::leave(self, key, toward).map(|(ch, out)| (Box::new(ch) as PlayerBox, out))
    }

    fn execute(&mut self, key: &str, line: &str, ctx: &Ctx<'_>) -> Outcome {
        ZoneState::execute(self, key, line, ctx)
    }

    fn tick(&mut self, roll: &mut dyn FnMut(u32) -> u32) -> Vec<Delivery> {
        ZoneState::tick(self, roll)
    }

    fn view(&self, key: &str) -> Vec<Delivery> {
        ZoneState::view(self, key)
    }

    fn player(&self, key: &str) -> Option<&dyn Player> {
        self.character(key).map(|c| c as &dyn Player)
    }

    fn player_mut(&mut self, key: &str) -> Option<&mut dyn Player> {
        self.character_mut(key).map(|c| c as &mut dyn Player)
    }

    fn dump_state_json(&self) -> Option<Vec<u8>> {
        Some(self.dump_zone_json())
    }

    fn load_state_json(&mut self, state: &[u8]) -> Result<(), StateError> {
        self.load_zone_json(state)
    }

    fn changed_parts(&mut self) -> Option<Vec<StatePart>> {
        Some(ZoneState::changed_parts(self))
    }

    fn load_state_parts(&mut self, parts: &[(String, Vec<u8>)]) -> Result<(), StateError> {
        self.load_zone_parts(parts)
    }

    fn report_all_parts(&mut self) {
        ZoneState::report_all_parts(self);
    }
}
