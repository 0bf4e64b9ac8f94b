//! `telos-soak`: the seeded chaos soak (docs/soak.md). Exit 0 when every
//! check passed, 1 when one failed, 2 when the run itself could not be made,
//! 130 when interrupted (the cluster it started is stopped first).

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
    let outcome = runtime.block_on(async {
        // Interrupted: dropping the run kills every process it started
        // (each is killed by pid when its handle drops).
        tokio::select! {
            r = soak::run(args) => Some(r),
            _ = interrupted() => None,
        }
    });
    match outcome {
        Some(Ok(true)) => ExitCode::SUCCESS,
        Some(Ok(false)) => ExitCode::from(1),
        Some(Err(e)) => {
            eprintln!("telos-soak: {e:#}");
            ExitCode::from(2)
        }
        None => {
            eprintln!("telos-soak: interrupted; the cluster is stopped");
            ExitCode::from(INTERRUPTED)
        }
    }
}

/// The exit code of a run stopped by SIGINT or SIGTERM (the shell's 128+2).
const INTERRUPTED: u8 = 130;

/// SIGINT (Ctrl-C) or SIGTERM.
async fn interrupted() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
