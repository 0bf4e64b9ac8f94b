//! The code's structure, checked: no crate's source files import each other
//! in a circle, and `telos-world`'s modules import only the layers below
//! them (docs/architecture.md, "Layers").

use std::path::Path;

use telos_testkit::imports::Graph;
use telos_testkit::process::repo_root;

/// Every crate's source folder.
const CRATES: &[&str] = &[
    "proto/src",
    "redis/src",
    "telemetry/src",
    "world/src",
    "gate/src",
    "testkit/src",
    "tls/src",
    "src",
];

#[test]
fn no_crate_has_an_import_cycle() {
    let mut report = Vec::new();
    for src in CRATES {
        let graph = Graph::read(&repo_root().join(src)).expect("read the crate");
        for cycle in graph.cycles() {
            report.push(format!(
                "{src}: {}\n  {}",
                cycle.join(", "),
                graph.explain(&cycle).join("\n  ")
            ));
        }
    }
    assert!(report.is_empty(), "import cycles:\n{}", report.join("\n"));
}

/// `telos-world`'s layers, bottom first (docs/architecture.md, "Layers"):
/// a module imports modules of its own layer and of the layers below,
/// never above. The crate root (`lib.rs`) only declares them. `config`
/// (the process's settings, defaulting to the handoff version) is read
/// from the runtime up.
const WORLD_LAYERS: &[&str] = &[
    "model", "game", "handoff", "zone", "config", "runtime", "play", "rpc", "app",
];

/// The layer of a module path (its first segment), as an index.
fn layer(module: &str) -> Option<usize> {
    let top = module.split("::").next().unwrap_or_default();
    WORLD_LAYERS.iter().position(|l| *l == top)
}

#[test]
fn world_modules_import_only_their_layer_and_those_below() {
    let graph = Graph::read(&repo_root().join("world/src")).expect("read the crate");
    let mut report = Vec::new();
    for module in graph.modules.keys().filter(|m| !m.is_empty()) {
        if layer(module).is_none() {
            report.push(format!(
                "{module}: in no layer (add its top-level module to WORLD_LAYERS and to docs/architecture.md)"
            ));
        }
    }
    for (from, imports) in &graph.edges {
        let Some(here) = layer(from) else { continue };
        for (to, path) in imports {
            if let Some(there) = layer(to).filter(|there| *there > here) {
                report.push(format!(
                    "{from} ({}) imports {to} ({}) upward: {path}",
                    WORLD_LAYERS[here], WORLD_LAYERS[there]
                ));
            }
        }
    }
    assert!(
        report.is_empty(),
        "layer violations:\n{}",
        report.join("\n")
    );
}

/// A source file reads in one sitting: at most this many lines before its
/// tests (an inline `#[cfg(test)] mod tests { … }` at its end, or a
/// `*tests.rs` file beside it). A `#[cfg(test)] mod tests;` declared at the
/// top hides nothing: the whole file counts.
const MAX_LINES_BEFORE_TESTS: usize = 500;

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir)
        .expect("read a source folder")
        .flatten()
    {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The lines of `text` before its inline test module (all of them when it
/// has none): a `#[cfg(test)]` attribute counts only when the module it
/// marks is written inline (`mod x {`), not declared (`mod x;`).
fn lines_before_tests(text: &str) -> usize {
    let lines: Vec<&str> = text.lines().collect();
    lines
        .windows(2)
        .position(|w| {
            let item = w[1].trim_start();
            w[0].starts_with("#[cfg(test)]")
                && item.starts_with("mod ")
                && item.trim_end().ends_with('{')
        })
        .unwrap_or(lines.len())
}

#[test]
fn a_test_module_declared_at_the_top_hides_nothing() {
    let declared = "#[cfg(test)]\nmod tests;\n".to_string() + &"fn f() {}\n".repeat(10);
    assert_eq!(lines_before_tests(&declared), 12);
    let inline = "fn f() {}\n".repeat(10) + "#[cfg(test)]\nmod tests {\n}\n";
    assert_eq!(lines_before_tests(&inline), 10);
}

#[test]
fn no_source_file_is_over_500_lines_before_its_tests() {
    let mut report = Vec::new();
    for src in CRATES {
        let mut files = Vec::new();
        rust_files(&repo_root().join(src), &mut files);
        for file in files {
            if file.to_string_lossy().ends_with("tests.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&file).expect("read a source file");
            let before = lines_before_tests(&text);
            if before > MAX_LINES_BEFORE_TESTS {
                report.push(format!("{}: {before} lines", file.display()));
            }
        }
    }
    assert!(
        report.is_empty(),
        "files over {MAX_LINES_BEFORE_TESTS} lines before their tests:\n{}",
        report.join("\n")
    );
}

/// The runtime drives the game only through the interface (`model`): no
/// module but the starter game's own imports it (the binary picks it).
#[test]
fn the_runtime_never_imports_the_starter_game() {
    let graph = Graph::read(&repo_root().join("world/src")).expect("read the crate");
    let mut report = Vec::new();
    for (from, imports) in &graph.edges {
        if from == "game" || from.starts_with("game::") {
            continue;
        }
        for (to, path) in imports {
            if to == "game" || to.starts_with("game::") {
                report.push(format!("{from} imports the starter game: {path}"));
            }
        }
    }
    assert!(
        report.is_empty(),
        "the game interface is bypassed:\n{}",
        report.join("\n")
    );
}

#[test]
fn the_checker_sees_the_imports_of_this_tree() {
    // The graph is read from text: prove on the real tree that it sees
    // imports at all (an empty graph would pass the tests above).
    let graph = Graph::read(Path::new(&repo_root().join("world/src"))).expect("read");
    let edges: usize = graph.edges.values().map(|e| e.len()).sum();
    assert!(
        graph.modules.len() > 30 && edges > 60,
        "{} modules, {edges} imports",
        graph.modules.len()
    );
}

/// The checker finds a cycle it is shown: a crate whose `a` imports
/// `b::c` while `b::c` imports `a`.
#[test]
fn the_checker_finds_a_cycle_it_is_shown() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let files = [
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        ("a.rs", "use crate::b::c::Leaf;\npub struct Other;\n"),
        ("b.rs", "pub mod c;\n"),
        ("b/c.rs", "use crate::a::Other;\npub struct Leaf;\n"),
    ];
    std::fs::create_dir(dir.path().join("b")).expect("b/");
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).expect("write");
    }
    let graph = Graph::read(dir.path()).expect("read");
    let cycles = graph.cycles();
    assert_eq!(cycles.len(), 1, "{cycles:?}");
    assert!(
        cycles[0].contains(&"a".to_string()) && cycles[0].contains(&"b::c".to_string()),
        "{cycles:?}"
    );
    // And a crate without one has none.
    std::fs::write(dir.path().join("b/c.rs"), "pub struct Leaf;\n").expect("write");
    assert!(Graph::read(dir.path()).expect("read").cycles().is_empty());
}
