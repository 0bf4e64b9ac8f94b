//! `scripts/cluster` says "Cluster up" only when the cluster it started is
//! up: with one of its ports already held it exits 1 with one line naming
//! the port and starts nothing; with a port it cannot bind after all (taken
//! between its check and the bind) it names the process that failed and
//! stops what it had started; a normal start comes up, serves a player,
//! refuses a second cluster in its folder, and Ctrl-C (SIGINT to its process
//! group, as a terminal sends it) stops every process it started.

use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use anyhow::{Context, ensure};
use telos_testkit::bot::Bot;
use telos_testkit::cli::run_to_exit;
use telos_testkit::process::{bin, blocking, repo_root};
use telos_testkit::redis::free_port;
use tokio::time::Instant;

const PASSWORD: &str = "correct horse";

/// How long the script may take to come up or to stop: it starts Redis,
/// two debug shards and the gate, each ready in well under a second.
const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(50);

/// The prefix of every line the script prints when it fails.
const FAILURE: &str = "scripts/cluster: ";

/// A private cluster folder, removed when the test passes.
struct ClusterDir(PathBuf);

impl ClusterDir {
    fn new() -> ClusterDir {
        ClusterDir(std::env::temp_dir().join(format!(
            "telos-cluster-script-{}-{}",
            std::process::id(),
            telos_testkit::unique()
        )))
    }
}

impl Drop for ClusterDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- cluster folder kept: {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// `scripts/cluster` on the debug binaries (no release build), in `dir`,
/// with no metrics listeners (fixed ports), players' TLS on any port and
/// the given ports.
fn cluster_command(dir: &Path, redis_port: u16, shard_ports: &str, gate: &str) -> Command {
    let bin_dir = bin("telos-world").parent().expect("bin dir").to_path_buf();
    let mut cmd = Command::new(repo_root().join("scripts/cluster"));
    cmd.env("TELOS_CLUSTER_DIR", dir)
        .env("TELOS_BIN_DIR", bin_dir)
        .env("TELOS_REDIS_PORT", redis_port.to_string())
        .env("TELOS_SHARD_PORTS", shard_ports)
        .env("TELOS_GATE_LISTEN", gate)
        // Players' TLS on any free port (its certificate made by openssl).
        .env("TELOS_GATE_TLS_LISTEN", "127.0.0.1:0")
        .env("TELOS_METRICS", "0")
        // The operator page on any free port (its default is fixed).
        .env("TELOS_CLUSTER_OPERATOR", "127.0.0.1:0");
    cmd
}

/// The lines the script printed as failures.
fn failure_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.starts_with(FAILURE)).collect()
}

/// Run the script to its exit (a failed start); stopped with SIGTERM,
/// which its trap turns into stopping what it started, if it runs on.
fn run_failing(cmd: Command, dir: &Path) -> anyhow::Result<(ExitStatus, String, String)> {
    let mut script = Running::start(cmd, dir)?;
    let until = std::time::Instant::now() + WAIT;
    loop {
        if let Some(status) = script.child.try_wait()? {
            return Ok((status, script.stdout(), script.stderr()));
        }
        ensure!(
            std::time::Instant::now() < until,
            "still running after {WAIT:?} (it started?):\n{}",
            script.stdout()
        );
        std::thread::sleep(POLL);
    }
}

/// Whether anything accepts connections on 127.0.0.1:`port`.
fn answers(port: u16) -> bool {
    TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok()
}

#[test]
fn a_port_already_in_use_fails_with_one_line_and_starts_nothing() -> anyhow::Result<()> {
    // Another cluster's Redis, shard or gate, holding the port.
    let held = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    let port = held.local_addr()?.port();
    for (what, redis_port, shards, gate) in [
        (
            "redis-server",
            port,
            "0,0".to_string(),
            "127.0.0.1:0".to_string(),
        ),
        (
            "shard-a",
            free_port(),
            format!("{port},0"),
            "127.0.0.1:0".into(),
        ),
        (
            "telos-gate",
            free_port(),
            "0,0".into(),
            format!("127.0.0.1:{port}"),
        ),
    ] {
        let dir = ClusterDir::new();
        let (status, stdout, stderr) =
            run_failing(cluster_command(&dir.0, redis_port, &shards, &gate), &dir.0)?;
        ensure!(!status.success(), "{what}: started anyway:\n{stdout}");
        ensure!(!stdout.contains("Cluster up"), "{what}:\n{stdout}");
        let lines = failure_lines(&stderr);
        ensure!(
            lines.len() == 1
                && lines[0].contains(&format!("port {port} ({what}) is already in use")),
            "{what}: want one line naming the port:\n{stderr}"
        );
        // Nothing was started: the Redis port of the other cases is free.
        if what != "redis-server" {
            ensure!(
                !answers(redis_port),
                "{what}: a redis-server was left running"
            );
        }
        ensure!(
            !dir.0.join("redis.pid").exists() && !dir.0.join("shards/shard-a.pid").exists(),
            "{what}: pid files written for processes never started"
        );
    }
    Ok(())
}

/// A socket bound to a free port and never listening: a connect to it is
/// refused, as if the port were free, but a bind to it fails. The script's
/// check passes and the shard's bind does not, as when a port is taken
/// between the two.
struct BoundNotListening {
    fd: libc::c_int,
    port: u16,
}

impl BoundNotListening {
    fn new() -> anyhow::Result<BoundNotListening> {
        let port = free_port();
        // SAFETY: a plain socket(2); the fd is owned here and closed on drop.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
        ensure!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let held = BoundNotListening { fd, port };
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(Ipv4Addr::LOCALHOST).to_be(),
            },
            sin_zero: [0; 8],
        };
        // SAFETY: bind(2) with a valid sockaddr_in and its exact size.
        let rc = unsafe {
            libc::bind(
                fd,
                (&addr as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        ensure!(
            rc == 0,
            "bind {}: {}",
            SocketAddrV4::new(Ipv4Addr::LOCALHOST, port),
            std::io::Error::last_os_error()
        );
        Ok(held)
    }
}

impl Drop for BoundNotListening {
    fn drop(&mut self) {
        // SAFETY: closing the fd this value owns, once.
        unsafe { libc::close(self.fd) };
    }
}

#[test]
fn a_shard_that_cannot_bind_fails_the_start_and_what_started_is_stopped() -> anyhow::Result<()> {
    let held = BoundNotListening::new()?;
    ensure!(
        !answers(held.port),
        "the held port must look free to a connect"
    );
    let dir = ClusterDir::new();
    let redis_port = free_port();
    let (status, stdout, stderr) = run_failing(
        cluster_command(
            &dir.0,
            redis_port,
            &format!("{},0", held.port),
            "127.0.0.1:0",
        ),
        &dir.0,
    )?;
    ensure!(!status.success(), "started anyway:\n{stdout}");
    ensure!(!stdout.contains("Cluster up"), "{stdout}");
    let lines = failure_lines(&stderr);
    ensure!(
        lines.len() == 1 && lines[0].contains("shard-a exited before it was ready"),
        "want one line naming shard-a:\n{stderr}"
    );
    ensure!(
        lines[0].contains(&held.port.to_string()),
        "the line says why (the bind): {}",
        lines[0]
    );
    // The Redis it had started is stopped, and no pid file names a dead process.
    ensure!(!answers(redis_port), "redis-server left running");
    ensure!(
        !dir.0.join("redis.pid").exists() && !dir.0.join("shards/shard-a.pid").exists(),
        "pid files left behind"
    );
    Ok(())
}

/// A running `scripts/cluster` in its own process group, as a terminal
/// runs a job; stopped with SIGTERM if the test ends first.
struct Running {
    child: Child,
    out: PathBuf,
    err: PathBuf,
}

impl Running {
    fn start(mut cmd: Command, dir: &Path) -> anyhow::Result<Running> {
        std::fs::create_dir_all(dir)?;
        let (out, err) = (dir.join("script.out"), dir.join("script.err"));
        // A terminal's Ctrl-C finds SIGINT at its default disposition. A
        // test run started in the background of a non-interactive shell
        // (`.ci/run &`) inherits it ignored, and bash can never trap a
        // signal ignored when it started: the script's Ctrl-C trap would
        // not run and the cluster would not stop (seen on a fresh-clone CI
        // run started that way).
        // SAFETY: signal(2) between fork and exec touches only the child.
        unsafe {
            cmd.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                Ok(())
            });
        }
        let child = cmd
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out)?)
            .stderr(std::fs::File::create(&err)?)
            .spawn()
            .context("spawning scripts/cluster")?;
        Ok(Running { child, out, err })
    }

    fn stdout(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    /// Ctrl-C: SIGINT to the script's whole process group.
    fn ctrl_c(&self) {
        // SAFETY: killpg(2) on the group this test created for its child.
        unsafe { libc::killpg(self.child.id() as libc::pid_t, libc::SIGINT) };
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: kill(2) on our own, unreaped child.
            unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
            let _ = self.child.wait();
        }
    }
}

/// The restart's last word: every one of its home zones served by it
/// again (`shard-b: N of its N home zones served here`).
fn home_zones_back(stdout: &str) -> bool {
    stdout.lines().any(|l| {
        let Some(counts) = l
            .strip_prefix("shard-b: ")
            .and_then(|r| r.split(" home zones served here").next())
        else {
            return false;
        };
        let mut n = counts.split(" of its ");
        matches!((n.next(), n.next()), (Some(a), Some(b)) if a == b && a != "0")
    })
}

fn alive(pid: i32) -> bool {
    // SAFETY: kill(2) with signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

fn read_pid(path: &Path) -> anyhow::Result<i32> {
    std::fs::read_to_string(path)
        .with_context(|| format!("reading {}", path.display()))?
        .trim()
        .parse()
        .with_context(|| format!("pid in {}", path.display()))
}

/// The last lines of every process's log in the cluster folder: what a
/// failure shows (the folder goes with the test).
fn log_tails(dir: &Path) -> String {
    const TAIL: usize = 20;
    ["shard-a.log", "shard-b.log", "gate.log", "redis.log"]
        .iter()
        .map(|name| {
            let text = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(TAIL)..].join("\n");
            format!("--- {name} (last {TAIL} lines)\n{tail}")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_comes_up_serves_a_player_and_ctrl_c_stops_all_it_started() -> anyhow::Result<()>
{
    let dir = ClusterDir::new();
    let redis_port = free_port();
    let script = Running::start(
        cluster_command(&dir.0, redis_port, "0,0", "127.0.0.1:0"),
        &dir.0,
    )?;
    let until = Instant::now() + WAIT;
    while !script.stdout().contains("Cluster up") {
        ensure!(
            Instant::now() < until,
            "no 'Cluster up' within {WAIT:?}:\n{}\n{}",
            script.stdout(),
            script.stderr()
        );
        tokio::time::sleep(POLL).await;
    }
    let pids: Vec<(String, i32)> = [
        "redis.pid",
        "gate.pid",
        "shards/shard-a.pid",
        "shards/shard-b.pid",
    ]
    .iter()
    .map(|f| Ok((f.to_string(), read_pid(&dir.0.join(f))?)))
    .collect::<anyhow::Result<_>>()?;
    for (what, pid) in &pids {
        ensure!(alive(*pid), "{what} names pid {pid}, which is not running");
    }
    // A second cluster in the same folder would overwrite these pid files.
    let second = dir.0.join("second");
    let (status, _, stderr) = run_failing(
        cluster_command(&dir.0, free_port(), "0,0", "127.0.0.1:0"),
        &second,
    )?;
    let lines = failure_lines(&stderr);
    ensure!(
        !status.success() && lines.len() == 1 && lines[0].contains("is in use by another"),
        "a second cluster in the folder: {status:?}\n{stderr}"
    );
    for (what, pid) in &pids {
        ensure!(
            read_pid(&dir.0.join(what))? == *pid,
            "{what} was overwritten"
        );
    }

    let gate = std::fs::read_to_string(dir.0.join("gate.out"))?;
    let gate = gate
        .split("listening on ")
        .nth(1)
        .context("the gate's listening line")?
        .trim()
        .to_string();
    let mut bot = Bot::create_at(&gate, "Clusterer", PASSWORD).await?;
    let (zone, _, shard) = bot.where_().await?;
    ensure!(zone == "city" && shard == "shard-a", "{zone} on {shard}");
    drop(bot);
    // Everyone here comes from loopback: more than a public gate's five
    // creations an hour are let in, and the script says why.
    ensure!(
        script.stdout().contains("limits per address are relaxed"),
        "{}",
        script.stdout()
    );
    for name in ["Loopa", "Loopb", "Loopc", "Loopd", "Loope"] {
        Bot::create_at(&gate, name, PASSWORD).await?.quit().await?;
    }

    // One shard restarted as the docs say: drained, started again with
    // its own settings, live, its zones home; Ctrl-C stops the new one.
    let restart = |args: &[&str]| {
        let mut cmd = cluster_command(&dir.0, redis_port, "0,0", "127.0.0.1:0");
        cmd.args(args);
        blocking(|| run_to_exit("cluster-restart", cmd, WAIT))
    };
    let old_b = read_pid(&dir.0.join("shards/shard-b.pid"))?;
    let done = restart(&["restart", "shard-b"])?;
    ensure!(
        done.success()
            && done.stdout.contains("shard-b: stopped (drain summary:")
            && done.stdout.contains("and live")
            && home_zones_back(&done.stdout),
        "restart: {}\n{}",
        done.stdout,
        done.stderr
    );
    let new_b = read_pid(&dir.0.join("shards/shard-b.pid"))?;
    ensure!(
        new_b != old_b && alive(new_b) && !alive(old_b),
        "shard-b pids: {old_b} -> {new_b}"
    );
    let unknown = restart(&["restart", "shard-z"])?;
    ensure!(
        !unknown.success() && unknown.stderr.contains("no shard shard-z"),
        "{}",
        unknown.stderr
    );

    script.ctrl_c();
    let mut script = script;
    let until = Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = script.child.try_wait()? {
            break status;
        }
        ensure!(
            Instant::now() < until,
            "Ctrl-C did not stop it within {WAIT:?}:\n{}\n{}",
            script.stderr(),
            log_tails(&dir.0)
        );
        tokio::time::sleep(POLL).await;
    };
    ensure!(!alive(new_b), "the restarted shard-b outlived Ctrl-C");
    ensure!(
        status.success() && script.stdout().contains("Cluster stopped."),
        "{status:?}\n{}\n{}",
        script.stdout(),
        script.stderr()
    );
    for (what, pid) in &pids {
        ensure!(
            !alive(*pid),
            "{what} (pid {pid}) still running after Ctrl-C"
        );
    }
    ensure!(!answers(redis_port), "Redis still answers");
    let shard_log = std::fs::read_to_string(dir.0.join("shard-a.log"))?;
    ensure!(
        shard_log.contains("SIGINT: stopping"),
        "shard-a stopped cleanly:\n{shard_log}"
    );
    Ok(())
}
