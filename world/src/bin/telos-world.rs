use clap::Parser;
use telos_world::config::{Cli, WorldConfig};

fn main() {
    let cfg = match WorldConfig::resolve(Cli::parse()) {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("telos-world: {e}");
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    if let Err(e) = runtime.block_on(telos_world::app::run(cfg)) {
        eprintln!("telos-world: {e:#}");
        std::process::exit(1);
    }
}
