//! The import graph of a crate's source files, read from the text of its
//! `use` declarations and `crate::…` / `super::…` / `self::…` paths, for the
//! test that keeps the layers of ARCHITECTURE.md honest (`tests/layers.rs`):
//! every crate's files import each other without a cycle, and a layered
//! crate's modules import only the layers below them.
//!
//! A file is a node; `a -> b` when a path written in `a` names an item of
//! `b`'s module (the deepest module the path reaches). Re-exports count: a
//! `pub use child::X` in a parent is an import of the child. Declaring a
//! module (`mod x;`) does not. Comments, string literals and `#[cfg(test)]`
//! modules written inline are left out: tests may reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One crate's files and what each imports.
#[derive(Debug, Default)]
pub struct Graph {
    /// Module path (`zone::actor`; the crate root is ``) → file.
    pub modules: BTreeMap<String, PathBuf>,
    /// File (module path) → the module paths it imports, with a path it
    /// wrote for each (for messages).
    pub edges: BTreeMap<String, BTreeMap<String, String>>,
}

impl Graph {
    /// Read every `.rs` file under `src` (the crate root `lib.rs` or
    /// `main.rs`), skipping `bin/` and files named `*tests.rs` (test
    /// modules in their own files).
    pub fn read(src: &Path) -> anyhow::Result<Graph> {
        let mut graph = Graph::default();
        let mut files = Vec::new();
        collect(src, &mut files)?;
        for file in &files {
            let rel = file.strip_prefix(src)?;
            if rel.starts_with("bin") || is_test_file(rel) {
                continue;
            }
            graph.modules.insert(module_path(rel), file.clone());
        }
        let modules: Vec<String> = graph.modules.keys().cloned().collect();
        for (module, file) in graph.modules.clone() {
            let text = strip_tests(&strip_comments_and_strings(&std::fs::read_to_string(
                &file,
            )?));
            let mut out = BTreeMap::new();
            let children: Vec<String> = modules
                .iter()
                .filter_map(|m| child_name(&module, m))
                .collect();
            for path in paths_in(&text, &children) {
                let Some(target) = resolve(&module, &path, &modules) else {
                    continue;
                };
                if target != module {
                    out.entry(target).or_insert_with(|| path.join("::"));
                }
            }
            graph.edges.insert(module, out);
        }
        Ok(graph)
    }

    /// Every cycle among the files (strongly connected components of more
    /// than one file), each with the imports that close it.
    pub fn cycles(&self) -> Vec<Vec<String>> {
        let mut index = 0;
        let mut stack = Vec::new();
        let mut on_stack = BTreeSet::new();
        let mut indices: BTreeMap<&str, usize> = BTreeMap::new();
        let mut low: BTreeMap<&str, usize> = BTreeMap::new();
        let mut out = Vec::new();
        for node in self.edges.keys() {
            if !indices.contains_key(node.as_str()) {
                self.strongconnect(
                    node,
                    &mut index,
                    &mut stack,
                    &mut on_stack,
                    &mut indices,
                    &mut low,
                    &mut out,
                );
            }
        }
        out
    }

    #[allow(clippy::too_many_arguments)]
    fn strongconnect<'a>(
        &'a self,
        v: &'a str,
        index: &mut usize,
        stack: &mut Vec<&'a str>,
        on_stack: &mut BTreeSet<&'a str>,
        indices: &mut BTreeMap<&'a str, usize>,
        low: &mut BTreeMap<&'a str, usize>,
        out: &mut Vec<Vec<String>>,
    ) {
        indices.insert(v, *index);
        low.insert(v, *index);
        *index += 1;
        stack.push(v);
        on_stack.insert(v);
        for w in self.edges.get(v).into_iter().flat_map(|e| e.keys()) {
            if !indices.contains_key(w.as_str()) {
                self.strongconnect(w, index, stack, on_stack, indices, low, out);
                let lw = low[w.as_str()];
                let lv = low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if on_stack.contains(w.as_str()) {
                let iw = indices[w.as_str()];
                let lv = low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if low[v] == indices[v] {
            let mut component = Vec::new();
            while let Some(w) = stack.pop() {
                on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                out.push(component);
            }
        }
    }

    /// `from -> to (as written)` for every import between two files of
    /// `component`, for a failure message.
    pub fn explain(&self, component: &[String]) -> Vec<String> {
        let mut lines = Vec::new();
        for from in component {
            for (to, written) in self.edges.get(from).into_iter().flatten() {
                if component.contains(to) {
                    lines.push(format!("{from} -> {to} ({written})"));
                }
            }
        }
        lines
    }
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect(&path, files)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    Ok(())
}

fn is_test_file(rel: &Path) -> bool {
    rel.file_stem()
        .and_then(|s| s.to_str())
        .is_some_and(|s| s == "tests" || s.ends_with("_tests"))
}

/// `zone/actor.rs` → `zone::actor`, `zone/mod.rs` → `zone`, `lib.rs` → ``.
fn module_path(rel: &Path) -> String {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts.join("::")
}

/// Resolve a written path (`crate::zone::roster::Roster`,
/// `super::ZoneHandle`) against the module it was written in; the deepest
/// module it reaches.
fn resolve(module: &str, path: &[String], modules: &[String]) -> Option<String> {
    let mut base: Vec<String> = if module.is_empty() {
        Vec::new()
    } else {
        module.split("::").map(str::to_string).collect()
    };
    let rest = match path.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            &path[1..]
        }
        Some("super") => {
            // `super` of `zone::actor` (zone/actor.rs) and of `zone`
            // (zone/mod.rs) alike: one module up.
            let mut r = path;
            while r.first().map(String::as_str) == Some("super") {
                base.pop();
                r = &r[1..];
            }
            r
        }
        Some("self") => &path[1..],
        _ => return None,
    };
    let mut best = None;
    let mut candidate = base.clone();
    if modules.contains(&candidate.join("::")) {
        best = Some(candidate.join("::"));
    }
    for seg in rest {
        candidate.push(seg.clone());
        let name = candidate.join("::");
        if modules.contains(&name) {
            best = Some(name);
        } else {
            break;
        }
    }
    best
}

/// `m`'s last segment when it is a direct child module of `module`.
fn child_name(module: &str, m: &str) -> Option<String> {
    let rest = if module.is_empty() {
        m
    } else {
        m.strip_prefix(module)?.strip_prefix("::")?
    };
    (!rest.is_empty() && !rest.contains("::")).then(|| rest.to_string())
}

/// Every `crate|super|self::…` path written in `text`, with `use` trees
/// (`use crate::zone::{Hosted, roster::Roster}`) expanded, and every path
/// that starts at one of the file's own child modules (`use actor::spawn`,
/// `lease::LeaseState`), read as `self::…`.
fn paths_in(text: &str, children: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let at_word = i == 0 || !is_ident(bytes[i - 1]) && bytes[i - 1] != b':';
        let rest = &text[i..];
        let head = ["crate::", "super::", "self::"]
            .into_iter()
            .find(|h| rest.starts_with(h));
        let child = children
            .iter()
            .find(|c| rest.starts_with(c.as_str()) && rest[c.len()..].starts_with("::"));
        if let (true, Some(_)) = (at_word, head) {
            let (tree, used) = read_tree(rest);
            out.extend(tree);
            i += used.max(1);
        } else if let (true, Some(_)) = (at_word, child) {
            let (tree, used) = read_tree(rest);
            out.extend(tree.into_iter().map(|p| {
                let mut p2 = vec!["self".to_string()];
                p2.extend(p);
                p2
            }));
            i += used.max(1);
        } else {
            i += 1;
        }
    }
    out
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Read one path or use tree at the start of `s`: its expanded paths and
/// the bytes consumed.
fn read_tree(s: &str) -> (Vec<Vec<String>>, usize) {
    let bytes = s.as_bytes();
    let mut prefix: Vec<String> = Vec::new();
    let mut i = 0;
    loop {
        let start = i;
        while i < bytes.len() && is_ident(bytes[i]) {
            i += 1;
        }
        if i == start {
            break;
        }
        prefix.push(s[start..i].to_string());
        if s[i..].starts_with("::") {
            i += 2;
            if s[i..].starts_with('{') {
                // A group: split at top-level commas.
                let (inner, used) = group(&s[i..]);
                i += used;
                let mut out = Vec::new();
                for part in inner {
                    let part = part.trim();
                    if part.is_empty() || part == "self" {
                        out.push(prefix.clone());
                        continue;
                    }
                    let (subs, _) = read_tree(part);
                    for sub in subs {
                        let mut p = prefix.clone();
                        p.extend(sub);
                        out.push(p);
                    }
                }
                return (out, i);
            }
            continue;
        }
        break;
    }
    (vec![prefix], i)
}

/// The comma-separated parts of a `{...}` group at the start of `s`.
fn group(s: &str) -> (Vec<String>, usize) {
    let mut depth = 0;
    let mut parts = Vec::new();
    let mut current = String::new();
    for (i, c) in s.char_indices() {
        match c {
            '{' => {
                if depth > 0 {
                    current.push(c);
                }
                depth += 1;
            }
            '}' => {
                depth -= 1;
                if depth == 0 {
                    parts.push(std::mem::take(&mut current));
                    return (parts, i + 1);
                }
                current.push(c);
            }
            ',' if depth == 1 => parts.push(std::mem::take(&mut current)),
            _ => current.push(c),
        }
    }
    (parts, s.len())
}

/// The text with comments and string/char literals blanked out (lengths
/// kept), so a path in a doc comment or a message is not an import.
fn strip_comments_and_strings(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut chars = src.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut prev = ' ';
                for c in chars.by_ref() {
                    if prev == '*' && c == '/' {
                        break;
                    }
                    if c == '\n' {
                        out.push('\n');
                    }
                    prev = c;
                }
            }
            '"' => {
                let mut escaped = false;
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                    }
                    if escaped {
                        escaped = false;
                    } else if c == '\\' {
                        escaped = true;
                    } else if c == '"' {
                        break;
                    }
                }
                out.push_str("\"\"");
            }
            '\'' => {
                // A char literal ('x', '\n') or a lifetime ('a): skip a
                // literal only when it closes within a few characters.
                let ahead: String = chars.clone().take(4).collect();
                if let Some(end) = ahead.find('\'').filter(|&e| e > 0) {
                    for _ in 0..=end {
                        chars.next();
                    }
                    out.push_str("' '");
                } else {
                    out.push('\'');
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// The text without inline `#[cfg(test)] mod … { … }` blocks.
fn strip_tests(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut rest = src;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        let Some(open) = after.find('{') else {
            rest = "";
            break;
        };
        // Only a module (or any item) body: skip to its matching brace.
        let mut depth = 0;
        let mut end = after.len();
        for (i, c) in after[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        // `#[cfg(test)] mod tests;` has no body: only the attribute line.
        let semi = after.find(';').unwrap_or(after.len());
        if semi < open {
            rest = &after[semi + 1..];
        } else {
            rest = &after[end..];
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn use_trees_expand_and_comments_and_strings_do_not_count() {
        let text = strip_comments_and_strings(
            "use crate::zone::{Hosted, roster::Roster, self};\n\
             // use crate::commented::Out;\n\
             let s = \"crate::in_a::string\";\n\
             let x = super::sibling::thing(crate::game::zone_of(a));\n",
        );
        let paths: Vec<String> = paths_in(&text, &[]).iter().map(|p| p.join("::")).collect();
        assert_eq!(
            paths,
            [
                "crate::zone::Hosted",
                "crate::zone::roster::Roster",
                "crate::zone",
                "super::sibling::thing",
                "crate::game::zone_of",
            ]
        );
    }

    #[test]
    fn a_path_from_a_child_module_is_an_import_of_it() {
        let text = "pub use actor::{spawn, Leaving};
let r = roster::Roster::default();
let t = telos_redis::actor::X;
";
        let children = ["actor".to_string(), "roster".to_string()];
        let paths: Vec<String> = paths_in(text, &children)
            .iter()
            .map(|p| p.join("::"))
            .collect();
        assert_eq!(
            paths,
            [
                "self::actor::spawn",
                "self::actor::Leaving",
                "self::roster::Roster::default"
            ]
        );
        assert_eq!(child_name("zone", "zone::actor"), Some("actor".into()));
        assert_eq!(child_name("zone", "zone::actor::input"), None);
        assert_eq!(child_name("", "zone"), Some("zone".into()));
    }

    #[test]
    fn paths_resolve_to_the_deepest_module_they_reach() {
        let modules: Vec<String> = ["", "zone", "zone::roster", "zone::actor", "game"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let p = |s: &str| s.split("::").map(str::to_string).collect::<Vec<_>>();
        assert_eq!(
            resolve("zone::actor", &p("crate::zone::roster::Roster"), &modules),
            Some("zone::roster".into())
        );
        assert_eq!(
            resolve("zone::actor", &p("super::Msg"), &modules),
            Some("zone".into())
        );
        assert_eq!(
            resolve("zone", &p("self::actor::spawn"), &modules),
            Some("zone::actor".into())
        );
        assert_eq!(
            resolve("zone::actor", &p("crate::game::zone_of"), &modules),
            Some("game".into())
        );
    }

    #[test]
    fn inline_test_modules_are_left_out() {
        let src = "use crate::a::X;\n#[cfg(test)]\nmod tests {\n use crate::b::Y;\n fn f() { {} }\n}\nuse crate::c::Z;\n";
        let paths: Vec<String> = paths_in(&strip_tests(src), &[])
            .iter()
            .map(|p| p.join("::"))
            .collect();
        assert_eq!(paths, ["crate::a::X", "crate::c::Z"]);
    }

    #[test]
    fn a_cycle_is_found_and_explained() {
        let mut g = Graph::default();
        for m in ["a", "b", "c"] {
            g.modules.insert(m.into(), PathBuf::from(m));
        }
        let edge = |to: &str| BTreeMap::from([(to.to_string(), format!("crate::{to}::X"))]);
        g.edges.insert("a".into(), edge("b"));
        g.edges.insert("b".into(), edge("a"));
        g.edges.insert("c".into(), edge("a"));
        assert_eq!(g.cycles(), vec![vec!["a".to_string(), "b".to_string()]]);
        assert_eq!(
            g.explain(&["a".into(), "b".into()]),
            ["a -> b (crate::b::X)", "b -> a (crate::a::X)"]
        );
    }
}
