//! The tools a bash script runs, read from its syntax tree (brush-parser):
//! every simple command, also inside `$(...)`, `<(...)`, functions and
//! `trap` strings; what it installs through `scripts/ensure-tools` or
//! `apt-get install`; the repository scripts it calls.

use std::collections::BTreeSet;

use brush_parser::ast::{
    AndOr, AndOrList, Command as Cmd, CommandPrefixOrSuffixItem, CompoundCommand, CompoundList,
    ExtendedTestExpr, IoFileRedirectTarget, IoRedirect, Pipeline, SimpleCommand, Word,
};
use brush_parser::word::{WordPiece, WordPieceWithSource};
use brush_parser::{Parser, ParserOptions};

/// The workspace's own binaries, which cargo builds, run from a computed
/// path (`"$BIN/telos-world"`) or from the target folder
/// (`target/release/telos-soak`).
const WORKSPACE_BINARIES: &[&str] = &["telos-world", "telos-gate", "telosctl", "telos-soak"];

/// Shell builtins and keywords: never an external tool.
const BUILTINS: &[&str] = &[
    ".",
    ":",
    "[",
    "alias",
    "break",
    "cd",
    "command",
    "continue",
    "declare",
    "disown",
    "echo",
    "eval",
    "exec",
    "exit",
    "export",
    "false",
    "getopts",
    "hash",
    "jobs",
    "kill",
    "let",
    "local",
    "mapfile",
    "printf",
    "pwd",
    "read",
    "readarray",
    "return",
    "set",
    "shift",
    "shopt",
    "source",
    "test",
    "trap",
    "true",
    "type",
    "ulimit",
    "umask",
    "unset",
    "wait",
];

/// Commands that run their first non-option argument as a command.
const WRAPPERS: &[&str] = &["exec", "nohup", "setsid", "sudo", "timeout"];

/// The installer every script calls with the tools it needs.
pub const ENSURE_TOOLS: &str = "scripts/ensure-tools";

/// What one shell script runs and installs.
#[derive(Debug, Default)]
pub struct Script {
    /// External tools it runs.
    pub tools: BTreeSet<String>,
    /// Functions it defines (calls to them are not tools).
    pub functions: BTreeSet<String>,
    /// Scripts of the repository it runs (`scripts/...`).
    pub scripts: BTreeSet<String>,
    /// Tools it asks `scripts/ensure-tools` (or `apt-get install`) for.
    pub installs: BTreeSet<String>,
    /// Commands whose program it cannot tell (a computed name).
    pub unknown: BTreeSet<String>,
}

impl Script {
    pub fn parse(text: &str) -> Result<Script, String> {
        let mut s = Script::default();
        s.program(text)?;
        let functions = s.functions.clone();
        s.tools.retain(|t| !functions.contains(t));
        Ok(s)
    }

    fn program(&mut self, text: &str) -> Result<(), String> {
        let options = ParserOptions::default();
        let program = Parser::new(std::io::BufReader::new(text.as_bytes()), &options)
            .parse_program()
            .map_err(|e| format!("{e}"))?;
        for list in &program.complete_commands {
            self.list(list)?;
        }
        Ok(())
    }

    fn list(&mut self, list: &CompoundList) -> Result<(), String> {
        for item in &list.0 {
            self.and_or(&item.0)?;
        }
        Ok(())
    }

    fn and_or(&mut self, list: &AndOrList) -> Result<(), String> {
        self.pipeline(&list.first)?;
        for next in &list.additional {
            match next {
                AndOr::And(p) | AndOr::Or(p) => self.pipeline(p)?,
            }
        }
        Ok(())
    }

    fn pipeline(&mut self, p: &Pipeline) -> Result<(), String> {
        for cmd in &p.seq {
            self.command(cmd)?;
        }
        Ok(())
    }

    fn command(&mut self, cmd: &Cmd) -> Result<(), String> {
        match cmd {
            Cmd::Simple(simple) => self.simple(simple),
            Cmd::Compound(compound, redirects) => {
                for r in redirects.iter().flat_map(|r| &r.0) {
                    self.redirect(r)?;
                }
                self.compound(compound)
            }
            Cmd::Function(f) => {
                self.functions.insert(f.fname.value.clone());
                for r in f.body.1.iter().flat_map(|r| &r.0) {
                    self.redirect(r)?;
                }
                self.compound(&f.body.0)
            }
            Cmd::ExtendedTest(test, _) => self.test_expr(&test.expr),
        }
    }

    fn compound(&mut self, c: &CompoundCommand) -> Result<(), String> {
        match c {
            CompoundCommand::Arithmetic(_) => Ok(()),
            CompoundCommand::ArithmeticForClause(f) => self.list(&f.body.list),
            CompoundCommand::BraceGroup(g) => self.list(&g.list),
            CompoundCommand::Subshell(s) => self.list(&s.list),
            CompoundCommand::ForClause(f) => {
                for w in f.values.iter().flatten() {
                    self.word(w)?;
                }
                self.list(&f.body.list)
            }
            CompoundCommand::CaseClause(c) => {
                self.word(&c.value)?;
                for item in &c.cases {
                    if let Some(list) = &item.cmd {
                        self.list(list)?;
                    }
                }
                Ok(())
            }
            CompoundCommand::IfClause(i) => {
                self.list(&i.condition)?;
                self.list(&i.then)?;
                for e in i.elses.iter().flatten() {
                    if let Some(cond) = &e.condition {
                        self.list(cond)?;
                    }
                    self.list(&e.body)?;
                }
                Ok(())
            }
            CompoundCommand::WhileClause(w) | CompoundCommand::UntilClause(w) => {
                self.list(&w.0)?;
                self.list(&w.1.list)
            }
            CompoundCommand::Coprocess(c) => self.command(&c.body),
        }
    }

    fn test_expr(&mut self, e: &ExtendedTestExpr) -> Result<(), String> {
        match e {
            ExtendedTestExpr::And(a, b) | ExtendedTestExpr::Or(a, b) => {
                self.test_expr(a)?;
                self.test_expr(b)
            }
            ExtendedTestExpr::Not(a) | ExtendedTestExpr::Parenthesized(a) => self.test_expr(a),
            ExtendedTestExpr::UnaryTest(_, w) => self.word(w),
            ExtendedTestExpr::BinaryTest(_, a, b) => {
                self.word(a)?;
                self.word(b)
            }
        }
    }

    fn redirect(&mut self, r: &IoRedirect) -> Result<(), String> {
        match r {
            IoRedirect::File(_, _, target) => match target {
                IoFileRedirectTarget::Filename(w) | IoFileRedirectTarget::Duplicate(w) => {
                    self.word(w)
                }
                IoFileRedirectTarget::ProcessSubstitution(_, sub) => self.list(&sub.list),
                IoFileRedirectTarget::Fd(_) => Ok(()),
            },
            IoRedirect::HereDocument(_, doc) if doc.requires_expansion => self.word(&doc.doc),
            IoRedirect::HereDocument(..) => Ok(()),
            IoRedirect::HereString(_, w) | IoRedirect::OutputAndError(w, _) => self.word(w),
        }
    }

    /// The command substitutions inside a word.
    fn word(&mut self, w: &Word) -> Result<(), String> {
        let pieces = brush_parser::word::parse(&w.value, &ParserOptions::default())
            .map_err(|e| format!("{e}"))?;
        self.pieces(&pieces)
    }

    fn pieces(&mut self, pieces: &[WordPieceWithSource]) -> Result<(), String> {
        for piece in pieces {
            match &piece.piece {
                WordPiece::CommandSubstitution(text)
                | WordPiece::BackquotedCommandSubstitution(text) => self.program(text)?,
                WordPiece::DoubleQuotedSequence(inner)
                | WordPiece::GettextDoubleQuotedSequence(inner) => self.pieces(inner)?,
                _ => {}
            }
        }
        Ok(())
    }

    fn simple(&mut self, cmd: &SimpleCommand) -> Result<(), String> {
        let mut words: Vec<&Word> = Vec::new();
        words.extend(&cmd.word_or_name);
        let items = cmd.prefix.iter().flat_map(|p| &p.0);
        for item in items.chain(cmd.suffix.iter().flat_map(|s| &s.0)) {
            match item {
                CommandPrefixOrSuffixItem::IoRedirect(r) => self.redirect(r)?,
                CommandPrefixOrSuffixItem::Word(w) => words.push(w),
                CommandPrefixOrSuffixItem::AssignmentWord(_, w) => self.word(w)?,
                CommandPrefixOrSuffixItem::ProcessSubstitution(_, sub) => self.list(&sub.list)?,
            }
        }
        for w in &words {
            self.word(w)?;
        }
        self.runs(&words)
    }

    /// Classify the program a simple command's words run.
    fn runs(&mut self, words: &[&Word]) -> Result<(), String> {
        let mut i = 0;
        while let Some(w) = words.get(i) {
            let Some(name) = literal(w)? else {
                // `$SUDO apt-get ...`: an empty or `sudo` prefix before a
                // named program.
                let next = words.get(i + 1).map(|n| literal(n)).transpose()?.flatten();
                if is_bare_parameter(w)? && next.is_some_and(|n| !n.starts_with('-')) {
                    i += 1;
                    continue;
                }
                // `"$BIN/telos-world"`: a workspace binary at a computed path.
                let path = w.value.replace('"', "");
                let tail = path.rsplit('/').next().unwrap_or_default();
                if !path.contains('/') || !WORKSPACE_BINARIES.contains(&tail) {
                    self.unknown.insert(w.value.clone());
                }
                return Ok(());
            };
            if name == "command" || name == "type" || name == "hash" {
                // `command -v tool`: asks whether it exists; runs nothing.
                return Ok(());
            }
            if name == "trap" {
                // `trap 'commands' SIGNAL...`; `trap - SIGNAL...` resets.
                let body = words.get(1).map(|w| literal(w)).transpose()?.flatten();
                return match body {
                    Some(body) if !body.starts_with('-') => self.program(&body),
                    _ => Ok(()),
                };
            }
            if WRAPPERS.contains(&name.as_str()) {
                if name != "exec" {
                    self.tools.insert(name.clone());
                }
                i += 1;
                // Options, and timeout's duration, come before the program.
                while let Some(next) = words.get(i) {
                    let skip = next.value.starts_with('-')
                        || (name == "timeout" && next.value.chars().all(|c| c.is_ascii_digit()));
                    if !skip {
                        break;
                    }
                    i += 1;
                }
                continue;
            }
            if BUILTINS.contains(&name.as_str()) {
                return Ok(());
            }
            let args: Vec<String> = words[i + 1..]
                .iter()
                .filter_map(|w| literal(w).ok().flatten())
                .collect();
            let tail = name.rsplit('/').next().unwrap_or(&name);
            if name.starts_with("target/") && WORKSPACE_BINARIES.contains(&tail) {
                // A workspace binary that cargo built (`target/debug/telos-soak`).
                return Ok(());
            }
            if name.starts_with("scripts/") {
                if name == ENSURE_TOOLS {
                    self.installs.extend(args.iter().cloned());
                }
                self.scripts.insert(name);
            } else {
                if name == "apt-get" && args.first().is_some_and(|a| a == "install") {
                    self.installs
                        .extend(args.iter().skip(1).filter(|a| !a.starts_with('-')).cloned());
                }
                let tool = name.rsplit('/').next().unwrap_or(&name).to_string();
                self.tools.insert(tool);
            }
            return Ok(());
        }
        Ok(())
    }
}

/// The word's text when it holds no expansion (quotes removed).
fn literal(w: &Word) -> Result<Option<String>, String> {
    fn flat(pieces: &[WordPieceWithSource], out: &mut String) -> bool {
        for piece in pieces {
            match &piece.piece {
                WordPiece::Text(t) | WordPiece::SingleQuotedText(t) => out.push_str(t),
                WordPiece::EscapeSequence(e) => out.push_str(e.trim_start_matches('\\')),
                WordPiece::DoubleQuotedSequence(inner) => {
                    if !flat(inner, out) {
                        return false;
                    }
                }
                _ => return false,
            }
        }
        true
    }
    let pieces = brush_parser::word::parse(&w.value, &ParserOptions::default())
        .map_err(|e| format!("{e}"))?;
    let mut out = String::new();
    Ok(flat(&pieces, &mut out).then_some(out))
}

/// `$X` or `"$X"`: one parameter expansion and nothing else.
fn is_bare_parameter(w: &Word) -> Result<bool, String> {
    let pieces = brush_parser::word::parse(&w.value, &ParserOptions::default())
        .map_err(|e| format!("{e}"))?;
    Ok(match pieces.as_slice() {
        [p] => match &p.piece {
            WordPiece::ParameterExpansion(_) => true,
            WordPiece::DoubleQuotedSequence(inner) => {
                matches!(inner.as_slice(), [q] if matches!(q.piece, WordPiece::ParameterExpansion(_)))
            }
            _ => false,
        },
        _ => false,
    })
}
