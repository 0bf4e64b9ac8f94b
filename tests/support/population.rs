//! A population of characters written straight into the store, each with a
//! cheap password hash: a crowd test logs thousands of players in through
//! the gate, and the world's own hash (argon2id, 19 MiB, tens of ms of a
//! core) would make the setup minutes long. A login still verifies the
//! password, through the parameters the stored hash names.

use std::path::Path;

use anyhow::Context;
use argon2::{Algorithm, Argon2, Params, PasswordHasher, Version};
use telos_redis::store::Store;
use telos_world::game::{StarterGame, load_world};
use telos_world::model::Game;

/// argon2id with the smallest memory and time the crate accepts: a
/// microsecond hash, for test characters only.
fn cheap_hash(password: &str) -> anyhow::Result<String> {
    let params = Params::new(Params::MIN_M_COST, Params::MIN_T_COST, 1, None)
        .map_err(|e| anyhow::anyhow!("argon2 params: {e}"))?;
    let argon2 = Argon2::new(Algorithm::Argon2id, Version::V0x13, params);
    let hash = argon2
        .hash_password(password.as_bytes())
        .map_err(|e| anyhow::anyhow!("argon2: {e}"))?;
    Ok(hash.to_string())
}

/// Create every one of `names` (new characters of the starter world in
/// `world_dir`) with `password`, spread over the world's rooms (instance
/// templates left out) in turn, so that no room holds a crowd: what a test
/// measures is the crowd's traffic, not one room's quadratic chatter.
pub async fn seed_spread(
    store: &Store,
    world_dir: &Path,
    names: &[String],
    password: &str,
) -> anyhow::Result<()> {
    let world = load_world(world_dir)?;
    let rooms: Vec<String> = world
        .zones
        .values()
        .filter(|z| !z.instanced)
        .flat_map(|z| z.rooms.iter().map(|r| r.id.clone()))
        .collect();
    let game = StarterGame::new(world);
    let phc = cheap_hash(password)?;
    for (name, room) in names.iter().zip(rooms.iter().cycle()) {
        let mut player = game.new_player(name);
        player.set_room(room.clone());
        store
            .create_character_hashed(name, &phc, &player.dump_state_json())
            .await
            .with_context(|| format!("creating {name}"))?;
    }
    Ok(())
}

/// Create each `(name, room)` of `placed` (new characters of the starter
/// world in `world_dir`, standing in `room`) with `password`: a test that
/// needs players in particular zones places them there.
pub async fn seed_in_rooms(
    store: &Store,
    world_dir: &Path,
    placed: &[(String, String)],
    password: &str,
) -> anyhow::Result<()> {
    let game = StarterGame::new(load_world(world_dir)?);
    let phc = cheap_hash(password)?;
    for (name, room) in placed {
        let mut player = game.new_player(name);
        player.set_room(room.clone());
        store
            .create_character_hashed(name, &phc, &player.dump_state_json())
            .await
            .with_context(|| format!("creating {name}"))?;
    }
    Ok(())
}
