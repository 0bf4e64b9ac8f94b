//! Every tool a script or test runs is on a fresh machine or installed by
//! the script that runs it: the README's `scripts/cluster` and
//! `scripts/test` work on a fresh Debian machine with the Rust toolchain.
//!
//! What runs what:
//! - a shell script (`scripts/*`, `.ci/run`), parsed with a real bash parser:
//!   every simple command, also inside `$(...)`, `<(...)`, functions and
//!   `trap` strings. A script installs the tools it names to
//!   `scripts/ensure-tools` (or to `apt-get install`), and what the scripts
//!   it calls install.
//! - Rust code: each `Command::new("...")` literal and each `spawn <program>`
//!   line of an expect script it writes. Tests and `testkit` are run by
//!   `scripts/test`, benches (and `testkit`) by `scripts/bench`. A program
//!   given by a computed path (a workspace binary, an override from the
//!   environment) is not checked.
//!
//! A tool neither in [`PREINSTALLED`] nor installed fails the test, naming
//! the tool and the file that runs it. `TELOS_TOOLS_ROOT=<dir>` checks
//! another tree instead (`git archive <rev> | tar -x -C <dir>`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use shell::{ENSURE_TOOLS, Script};
use telos_testkit::process::repo_root;

mod shell;

/// What a fresh Debian machine with the Rust toolchain has, by package.
const PREINSTALLED: &[(&str, &[&str])] = &[
    ("bash", &["bash"]),
    (
        "coreutils",
        &[
            "basename", "cat", "chmod", "cp", "cut", "date", "dirname", "env", "head", "id", "ln",
            "ls", "mkdir", "mktemp", "mv", "nohup", "nproc", "paste", "readlink", "realpath", "rm",
            "seq", "sleep", "sort", "tail", "tee", "timeout", "touch", "tr", "uniq", "wc",
        ],
    ),
    ("grep", &["grep"]),
    ("sed", &["sed"]),
    ("mawk", &["awk"]),
    ("findutils", &["find", "xargs"]),
    ("util-linux", &["flock", "setsid"]),
    ("procps", &["ps"]),
    ("iproute2", &["ss"]),
    ("apt", &["apt-get", "apt-cache"]),
    ("git", &["git"]),
    ("the Rust toolchain", &["cargo", "rustc"]),
];

/// The programs a Rust file runs: `Command::new("...")` literals and the
/// `spawn <program>` lines of expect scripts it writes.
fn rust_tools(text: &str) -> BTreeSet<String> {
    let mut tools = BTreeSet::new();
    for (at, _) in text.match_indices("Command::new(") {
        let rest = text[at + "Command::new(".len()..].trim_start();
        if let Some(lit) = rest.strip_prefix('"')
            && let Some(end) = lit.find('"')
            && is_program_name(&lit[..end])
        {
            tools.insert(basename(&lit[..end]));
        }
    }
    for line in text.lines() {
        if let Some(program) = line
            .trim_start()
            .strip_prefix("spawn ")
            .and_then(|rest| rest.split_whitespace().next())
        {
            tools.insert(basename(program));
        }
    }
    tools
}

/// A program name or path: `docker-compose`, `/usr/bin/expect` (not the
/// text after a `Command::new(` that this file itself quotes).
fn is_program_name(text: &str) -> bool {
    text.chars().any(|c| c.is_ascii_alphabetic())
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._/+-".contains(c))
}

fn basename(program: &str) -> String {
    program.rsplit('/').next().unwrap_or(program).to_string()
}

/// Every `.rs` file under `dir`, skipping build output.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name == "target" || name == ".git" {
            continue;
        }
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The scripts that run a Rust file: benches by `scripts/bench`, the test
/// support crate by both, everything else (tests, sources) by `scripts/test`.
fn runners_of(relative: &Path) -> &'static [&'static str] {
    let first = relative.components().next().map(|c| c.as_os_str());
    if relative.components().any(|c| c.as_os_str() == "benches") {
        &["scripts/bench"]
    } else if first.is_some_and(|c| c == "testkit") {
        &["scripts/test", "scripts/bench"]
    } else {
        &["scripts/test"]
    }
}

/// The tools `scripts/ensure-tools` knows how to install.
fn ensure_tools_known(root: &Path) -> BTreeSet<String> {
    let out = Command::new(root.join(ENSURE_TOOLS))
        .arg("--list")
        .output()
        .expect("scripts/ensure-tools --list runs");
    assert!(out.status.success(), "scripts/ensure-tools --list failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// Every problem found in the repository at `root`, one line each.
fn missing_tools(root: &Path) -> Vec<String> {
    let preinstalled: BTreeSet<&str> = PREINSTALLED
        .iter()
        .flat_map(|(_, t)| t.iter().copied())
        .collect();
    let mut scripts: BTreeMap<String, Script> = BTreeMap::new();
    let mut problems = Vec::new();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(root.join("scripts"))
        .expect("scripts/")
        .flatten()
        .map(|e| e.path())
        .collect();
    paths.push(root.join(".ci/run"));
    for path in paths.iter().filter(|p| p.is_file()) {
        let name = path
            .strip_prefix(root)
            .expect("under root")
            .display()
            .to_string();
        let text = std::fs::read_to_string(path).expect("script text");
        match Script::parse(&text) {
            Ok(s) => {
                scripts.insert(name, s);
            }
            Err(e) => problems.push(format!("{name}: not parsable as bash: {e}")),
        }
    }
    // A script installs what it asks for and what the scripts it calls do.
    fn installs(
        name: &str,
        scripts: &BTreeMap<String, Script>,
        seen: &mut BTreeSet<String>,
    ) -> BTreeSet<String> {
        let mut all = BTreeSet::new();
        if !seen.insert(name.to_string()) {
            return all;
        }
        if let Some(s) = scripts.get(name) {
            all.extend(s.installs.iter().cloned());
            for called in &s.scripts {
                all.extend(installs(called, scripts, seen));
            }
        }
        all
    }
    let known = ensure_tools_known(root);
    for (name, s) in &scripts {
        let installed = installs(name, &scripts, &mut BTreeSet::new());
        for tool in &s.tools {
            if !preinstalled.contains(tool.as_str()) && !installed.contains(tool) {
                problems.push(format!(
                    "{name} runs `{tool}`, which a fresh machine lacks and {name} does not install (scripts/ensure-tools {tool})"
                ));
            }
        }
        for called in &s.scripts {
            if !scripts.contains_key(called) {
                problems.push(format!("{name} runs {called}, which does not exist"));
            }
        }
        for unknown in &s.unknown {
            problems.push(format!(
                "{name}: cannot tell which program `{unknown}` runs"
            ));
        }
        if s.scripts.contains(ENSURE_TOOLS) {
            for tool in s.installs.difference(&known) {
                if !s.tools.contains("apt-get") {
                    problems.push(format!(
                        "{name} asks {ENSURE_TOOLS} for `{tool}`, which it does not know"
                    ));
                }
            }
        }
    }
    let mut files = Vec::new();
    rust_files(root, &mut files);
    files.sort();
    for path in files {
        let relative = path.strip_prefix(root).expect("under root");
        let text = std::fs::read_to_string(&path).expect("source text");
        for tool in rust_tools(&text) {
            if preinstalled.contains(tool.as_str()) {
                continue;
            }
            for runner in runners_of(relative) {
                if !installs(runner, &scripts, &mut BTreeSet::new()).contains(&tool) {
                    problems.push(format!(
                        "{} runs `{tool}`, which a fresh machine lacks and {runner} (which runs it) does not install (scripts/ensure-tools {tool})",
                        relative.display()
                    ));
                }
            }
        }
    }
    problems
}

#[test]
fn every_tool_a_script_or_test_runs_is_preinstalled_or_installed_by_it() {
    // TELOS_TOOLS_ROOT checks another tree, e.g. an export of an older commit.
    let root = std::env::var_os("TELOS_TOOLS_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(repo_root);
    let problems = missing_tools(&root);
    assert!(
        problems.is_empty(),
        "tools that a fresh machine would not have:\n{}",
        problems.join("\n")
    );
}

/// The scanner itself: what counts as running a tool, and what does not.
#[test]
fn the_scanner_finds_the_programs_a_script_runs() {
    let s = Script::parse(
        r#"
set -euo pipefail
cleanup() { rm -f x; }
usage() { cat <<'TEXT'
not a command: redis-server
TEXT
}
trap 'cleanup; jq . x' EXIT
trap - EXIT
command -v docker-compose >/dev/null || $SUDO apt-get install -y -qq docker-compose
x=$(dirname "$0" | tr a b)
mapfile -t zones < <(for f in *.json; do basename "$f" .json; done)
case "$1" in
  zone) exec cargo bench ;;
  -h | help) usage ;;
esac
if [[ "$(uname)" = Linux ]]; then timeout 2 redis-cli ping; fi
"$BIN/telos-world" --id a &
setsid "$BIN/telos-gate" &
target/debug/telos-soak --seed 1
target/debug/not-ours
scripts/ensure-tools redis-server telnet
"#,
    )
    .expect("parses");
    let tools: Vec<&str> = s.tools.iter().map(String::as_str).collect();
    assert_eq!(
        tools,
        [
            "apt-get",
            "basename",
            "cargo",
            "cat",
            "dirname",
            "jq",
            "not-ours",
            "redis-cli",
            "rm",
            "setsid",
            "timeout",
            "tr",
            "uname"
        ]
    );
    assert!(
        s.functions.contains("usage") && s.functions.contains("cleanup"),
        "{s:?}"
    );
    assert!(s.unknown.is_empty(), "{s:?}");
    assert_eq!(
        s.installs.iter().map(String::as_str).collect::<Vec<_>>(),
        ["docker-compose", "redis-server", "telnet"]
    );
    let odd = Script::parse("\"$TOOL\" --version\n$PREFIX/bin/thing\n").expect("parses");
    assert!(odd.unknown.contains("$PREFIX/bin/thing"), "{odd:?}");
    let rust = rust_tools(
        "let c = Command::new(\"docker-compose\");\nstd::process::Command::new( \"/usr/bin/expect\" );\nCommand::new(bin(\"telosctl\"));\nlet s = r#\"\nspawn /usr/bin/telnet 127.0.0.1 4000\n\"#;",
    );
    assert_eq!(
        rust.iter().map(String::as_str).collect::<Vec<_>>(),
        ["docker-compose", "expect", "telnet"]
    );
}
