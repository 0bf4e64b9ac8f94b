//! Run a Telos binary to completion (`telosctl`, or a `telos-world` that is
//! expected to refuse to start) and capture what it printed.

use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::process::{bin, repo_root};

/// Signal numbers for [`crate::process::Proc::stop_with`], so tests need no
/// `libc` of their own.
pub use libc::{SIGINT, SIGKILL, SIGTERM};

/// How long a one-shot command may run: `telosctl` answers in milliseconds;
/// this only turns a hang into a failure with a message.
pub const EXIT_TIMEOUT: Duration = Duration::from_secs(30);
/// Poll period while waiting for the exit.
const EXIT_POLL: Duration = Duration::from_millis(20);

/// A finished process.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    pub fn success(&self) -> bool {
        self.status.success()
    }
}

/// Run `cmd` until it exits or `timeout` passes (then it is killed and this
/// fails). Output goes through temp files, so a chatty child never blocks on
/// a full pipe.
pub fn run_to_exit(name: &str, mut cmd: Command, timeout: Duration) -> anyhow::Result<Finished> {
    let stem = std::env::temp_dir().join(format!(
        "telos-cli-{name}-{}-{}",
        std::process::id(),
        crate::unique()
    ));
    let (out_path, err_path) = (stem.with_extension("out"), stem.with_extension("err"));
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path)?)
        .stderr(std::fs::File::create(&err_path)?)
        .spawn()
        .with_context(|| format!("spawning {name}"))?;
    let until = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
            let _ = std::fs::remove_file(&out_path);
            let _ = std::fs::remove_file(&err_path);
            bail!("{name} did not exit within {timeout:?}; stderr:\n{stderr}");
        }
        std::thread::sleep(EXIT_POLL);
    };
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let finished = Finished {
        status,
        stdout: read(&out_path),
        stderr: read(&err_path),
    };
    let _ = std::fs::remove_file(&out_path);
    let _ = std::fs::remove_file(&err_path);
    Ok(finished)
}

/// A command for a workspace binary with every `TELOS_*` variable of the
/// test's own environment removed, so only the given flags configure it.
pub fn clean_command(name: &str) -> Command {
    let mut cmd = Command::new(bin(name));
    cmd.current_dir(repo_root());
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("TELOS_") {
            cmd.env_remove(key);
        }
    }
    cmd
}

/// `telosctl --redis-url <redis_url> <args...>`, run to its exit.
pub fn telosctl(redis_url: &str, args: &[&str]) -> anyhow::Result<Finished> {
    let mut cmd = clean_command("telosctl");
    cmd.arg("--redis-url").arg(redis_url).args(args);
    run_to_exit("telosctl", cmd, EXIT_TIMEOUT)
}

/// Zone → owner, as `telosctl status --json` lists them.
pub fn zone_owners(redis_url: &str) -> anyhow::Result<std::collections::BTreeMap<String, String>> {
    let out = telosctl(redis_url, &["status", "--json"])?;
    let v: serde_json::Value = serde_json::from_str(&out.stdout)?;
    Ok(v["zones"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|z| {
            Some((
                z["id"].as_str()?.to_string(),
                z["owner"].as_str()?.to_string(),
            ))
        })
        .collect())
}

/// Wait up to `timeout` for a process that was already told to stop (no
/// signal sent here); killed and an error if it does not exit in time.
pub fn wait_exit(
    proc_: &mut crate::process::Proc,
    timeout: Duration,
) -> anyhow::Result<ExitStatus> {
    let until = Instant::now() + timeout;
    loop {
        if let Some(status) = proc_.child.try_wait()? {
            return Ok(status);
        }
        if Instant::now() > until {
            proc_.kill();
            bail!("process {} did not exit within {timeout:?}", proc_.pid());
        }
        std::thread::sleep(EXIT_POLL);
    }
}
