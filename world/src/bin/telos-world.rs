use std::sync::Arc;

use clap::Parser;
use telos_world::config::{Cli, WorldConfig};
use telos_world::game::{StarterGame, load_world};

fn main() {
    let cfg = match WorldConfig::resolve(Cli::parse()) {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("telos-world: {e}");
            std::process::exit(2);
        }
    };
    // The starter world of `--world`: the one game this binary runs (the
    // runtime runs any `telos_world::model::Game`; see world/examples).
    let game = match load_world(&cfg.world) {
        Ok(world) => Arc::new(StarterGame::new(world)),
        Err(e) => {
            eprintln!("telos-world: {:#}", anyhow::Error::from(e));
            std::process::exit(1);
        }
    };
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    if let Err(e) = runtime.block_on(telos_world::app::run(cfg, game)) {
        eprintln!("telos-world: {e:#}");
        std::process::exit(1);
    }
}
