//! `telos-soak`: the seeded chaos soak (docs/soak.md). Exit 0 when every
//! check passed, 1 when one failed, 2 when the run itself could not be made.

use std::process::ExitCode;

use clap::Parser;
use telos_testkit::soak::{self, config::SoakArgs};

/// The machine the soak is made for has 2 cores; the bots, sampler and
/// fault driver are light and share them with the cluster.
const WORKER_THREADS: usize = 2;

fn main() -> ExitCode {
    let args = SoakArgs::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKER_THREADS)
        .enable_all()
        .build();
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("telos-soak: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(soak::run(args)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("telos-soak: {e:#}");
            ExitCode::from(2)
        }
    }
}
