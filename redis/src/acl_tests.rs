//! The list against the code that sends commands and the docs that grant
//! them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::*;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

/// Every file under `dir` whose name ends in `suffix`.
fn files(dir: &Path, suffix: &str, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            files(&path, suffix, out);
        } else if path.to_string_lossy().ends_with(suffix) {
            out.push(path);
        }
    }
}

/// Every `<opening>NAME<closing>` in `text`: the names after `opening`
/// made of letters only (a computed command name would not match and is
/// caught by the runtime check instead).
fn names_after(text: &str, opening: &str, closing: char) -> Vec<String> {
    text.match_indices(opening)
        .filter_map(|(at, _)| {
            let rest = &text[at + opening.len()..];
            let end = rest.find(|c: char| !c.is_ascii_alphabetic())?;
            (end > 0 && rest[end..].starts_with(closing)).then(|| rest[..end].to_ascii_lowercase())
        })
        .collect()
}

/// (file, command) for every `redis.call('X'` / `redis.pcall("X"` in every
/// script.
fn script_commands() -> Vec<(PathBuf, String)> {
    let mut scripts = Vec::new();
    files(&repo().join("redis/src"), ".lua", &mut scripts);
    assert!(scripts.len() >= 30, "only {} scripts found", scripts.len());
    let mut out = Vec::new();
    for path in scripts {
        let text = std::fs::read_to_string(&path).expect("a script");
        for call in ["redis.call(", "redis.pcall("] {
            for quote in ['\'', '"'] {
                for name in names_after(&text, &format!("{call}{quote}"), quote) {
                    out.push((path.clone(), name));
                }
            }
        }
    }
    out
}

/// (file, command) for every `cmd("X")` in the code of every crate that
/// talks to Redis (tests excluded: they may inspect with anything).
fn code_commands() -> Vec<(PathBuf, String)> {
    let mut sources = Vec::new();
    for dir in ["redis/src", "world/src", "gate/src", "src"] {
        files(&repo().join(dir), ".rs", &mut sources);
    }
    let mut out = Vec::new();
    for path in sources {
        let file = path.file_name().unwrap().to_string_lossy();
        if file == "tests.rs" || file.ends_with("_tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("a source file");
        let text = text
            .split("#[cfg(test)]\nmod tests {")
            .next()
            .unwrap_or(&text);
        // Code only: a comment may show the pattern itself.
        let code: String = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        for name in names_after(&code, "cmd(\"", '"') {
            out.push((path.clone(), name));
        }
    }
    out
}

#[test]
fn the_list_is_sorted_and_has_no_duplicates() {
    let mut sorted = COMMANDS.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted, COMMANDS);
    for c in SENT_BY_THE_LIBRARY {
        assert!(COMMANDS.contains(c), "{c}");
    }
}

#[test]
fn every_command_a_script_calls_is_listed() {
    let found = script_commands();
    // The two the hand-written line missed (login_admit, login_succeeded,
    // login_unchecked): the scan sees them.
    for needed in ["pttl", "decr"] {
        assert!(found.iter().any(|(_, c)| c == needed), "{needed}");
    }
    let missing: Vec<_> = found
        .iter()
        .filter(|(_, c)| !COMMANDS.contains(&c.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "scripts call commands telos_redis::acl::COMMANDS lacks: {missing:?}"
    );
}

#[test]
fn every_command_the_code_sends_is_listed() {
    let found = code_commands();
    assert!(found.iter().any(|(_, c)| c == "ping"), "{found:?}");
    let missing: Vec<_> = found
        .iter()
        .filter(|(_, c)| !COMMANDS.contains(&c.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "the code sends commands telos_redis::acl::COMMANDS lacks: {missing:?}"
    );
}

#[test]
fn every_listed_command_is_sent() {
    let sent: BTreeSet<String> = script_commands()
        .into_iter()
        .chain(code_commands())
        .map(|(_, c)| c)
        .chain(SENT_BY_THE_LIBRARY.iter().map(|c| c.to_string()))
        .collect();
    let unused: Vec<_> = COMMANDS.iter().filter(|c| !sent.contains(**c)).collect();
    assert!(
        unused.is_empty(),
        "listed but never sent (grant no more than needed): {unused:?}"
    );
}

#[test]
fn the_documented_line_is_the_generated_one() {
    let doc = std::fs::read_to_string(repo().join("docs/operations.md")).expect("the docs");
    let lines: Vec<_> = doc
        .lines()
        .filter(|l| l.starts_with("ACL SETUSER telos on >") && !l.contains("+sentinel|"))
        .collect();
    assert_eq!(
        lines,
        [setuser_line("telos", "CHANGE-ME").as_str()],
        "docs/operations.md's ACL line is not telos_redis::acl::setuser_line"
    );
}

#[test]
fn the_documented_sentinel_line_is_the_generated_one() {
    let doc = std::fs::read_to_string(repo().join("docs/operations.md")).expect("the docs");
    let line = sentinel_setuser_line("telos", "CHANGE-ME");
    assert!(
        doc.contains(&line),
        "docs/operations.md's Sentinel ACL line is not telos_redis::acl::sentinel_setuser_line:\n{line}"
    );
}

#[test]
fn commands_are_named_as_the_acl_names_them() {
    assert_eq!(acl_name(&redis::cmd("GET")).as_deref(), Some("get"));
    assert_eq!(
        acl_name(redis::cmd("SCRIPT").arg("LOAD")).as_deref(),
        Some("script|load")
    );
    assert_eq!(unlisted(redis::cmd("PTTL").arg("k")), None);
    assert_eq!(unlisted(redis::cmd("SCRIPT").arg("LOAD")), None);
    assert_eq!(
        unlisted(redis::cmd("SCRIPT").arg("FLUSH")).as_deref(),
        Some("script|flush")
    );
    assert_eq!(
        unlisted(redis::cmd("KEYS").arg("*")).as_deref(),
        Some("keys")
    );
    assert_eq!(
        rules()[..5],
        [
            "resetkeys",
            "~telos:*",
            "resetchannels",
            "&telos:*",
            "-@all"
        ]
    );
}
