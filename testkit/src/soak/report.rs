//! What a run prints: the seed, the schedule as drawn and as carried out,
//! one line per check, the notes (allowed losses with their count and
//! reason, RSS), and every violation grouped by kind with its transcript
//! and the process log lines around it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::checker::{Verdict, Violation};
use super::clock::{log_line_unix_ms, secs};
use super::history::Evidence;

/// Violations shown in full per kind; the rest are counted.
const EXAMPLES_PER_KIND: usize = 3;
/// Log lines shown per violation.
const LOG_LINES: usize = 14;

/// The processes' logs of a run, read once.
pub struct Logs {
    files: Vec<(String, String)>,
}

impl Logs {
    /// Every `*.log` of `dir` except Redis's own (it has no RFC 3339 times).
    pub fn read(dir: &Path) -> Logs {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        paths.sort();
        let files = paths
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "log"))
            .filter(|p| p.file_name().is_none_or(|n| n != "redis.log"))
            .filter_map(|p| {
                let name = p.file_name()?.to_string_lossy().to_string();
                let text = crate::process::strip_ansi(&std::fs::read_to_string(&p).ok()?);
                Some((name, text))
            })
            .collect();
        Logs { files }
    }

    /// Lines in the violation's window that name its bot, then warnings
    /// and errors of anyone (each message once), up to [`LOG_LINES`].
    fn around(&self, v: &Violation, start_unix_ms: u64) -> Vec<String> {
        let Some((a, b)) = v.window else {
            return Vec::new();
        };
        let (a, b) = (start_unix_ms + a, start_unix_ms + b);
        let who = v.bot.as_ref().map(|b| b.to_ascii_lowercase());
        let (mut named, mut loud) = (Vec::new(), Vec::new());
        let mut said: Vec<String> = Vec::new();
        for (file, text) in &self.files {
            for line in text.lines() {
                let Some(t) = log_line_unix_ms(line) else {
                    continue;
                };
                if t < a || t > b {
                    continue;
                }
                let lower = line.to_ascii_lowercase();
                if who.as_ref().is_some_and(|w| lower.contains(w.as_str())) {
                    named.push(format!("{file}: {line}"));
                } else if line.contains(" WARN ") || line.contains(" ERROR ") {
                    // The message without its time and span fields.
                    let message = line.rsplit(": ").next().unwrap_or(line).to_string();
                    if !said.contains(&message) {
                        said.push(message);
                        loud.push(format!("{file}: {line}"));
                    }
                }
            }
        }
        let total = named.len() + loud.len();
        let mut out: Vec<String> = named.into_iter().chain(loud).take(LOG_LINES).collect();
        if total > LOG_LINES {
            out.push(format!("... {} more", total - LOG_LINES));
        }
        out
    }
}

/// The whole report.
pub fn render(e: &Evidence, verdict: &Verdict, logs: &Logs, minutes: f64) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "== telos soak, seed {}, mode {} ==",
        e.seed,
        e.mode.name()
    );
    let _ = writeln!(s, "schedule (drawn from the seed):");
    if e.plan.is_empty() {
        let _ = writeln!(s, "  (no fault fits in the run)");
    }
    for line in &e.plan {
        let _ = writeln!(s, "  {line}");
    }
    let _ = writeln!(s, "faults as carried out:");
    for f in &e.faults {
        let end = |t: Option<u64>| t.map_or("-".to_string(), secs);
        let _ = writeln!(
            s,
            "  {} at {}: restored {}, window to {}, healthy {}{}",
            f.label(),
            secs(f.start),
            end(f.restored),
            end(f.window_end),
            end(f.healthy),
            if f.notes.is_empty() {
                String::new()
            } else {
                format!("; {}", f.notes.join("; "))
            }
        );
    }
    let _ = writeln!(s, "checks:");
    for c in &verdict.checks {
        let mark = if c.violations.is_empty() {
            "PASS"
        } else {
            "FAIL"
        };
        let _ = writeln!(s, "  {:<10} {mark}  {}", c.name, c.summary);
    }
    let notes: Vec<&String> = verdict.checks.iter().flat_map(|c| c.notes.iter()).collect();
    if !notes.is_empty() {
        let _ = writeln!(s, "notes:");
        for n in notes {
            let _ = writeln!(s, "  {n}");
        }
    }
    let all: Vec<&Violation> = verdict.violations().collect();
    if !all.is_empty() {
        let _ = writeln!(s, "violations ({}):", all.len());
        let mut kinds: Vec<(&str, &str)> = all.iter().map(|v| (v.check, v.kind.as_str())).collect();
        kinds.dedup();
        let mut seen = Vec::new();
        for key in kinds {
            if seen.contains(&key) {
                continue;
            }
            seen.push(key);
            let group: Vec<&&Violation> = all
                .iter()
                .filter(|v| (v.check, v.kind.as_str()) == key)
                .collect();
            let _ = writeln!(s, "  [{}] {} x{}", key.0, key.1, group.len());
            for v in group.iter().take(EXAMPLES_PER_KIND) {
                let who = v.bot.as_deref().unwrap_or("-");
                let at = v.at.map_or("-".to_string(), secs);
                let _ = writeln!(s, "    {who} at {at}: {}", v.detail);
                if !v.excerpt.is_empty() {
                    let _ = writeln!(s, "      received:");
                    for l in &v.excerpt {
                        let _ = writeln!(s, "        {l}");
                    }
                }
                let lines = logs.around(v, e.start_unix_ms);
                if !lines.is_empty() {
                    let _ = writeln!(s, "      logs:");
                    for l in lines {
                        let _ = writeln!(s, "        {l}");
                    }
                }
            }
            if group.len() > EXAMPLES_PER_KIND {
                let _ = writeln!(
                    s,
                    "    ... and {} more (history.json has all)",
                    group.len() - EXAMPLES_PER_KIND
                );
            }
        }
    }
    let _ = writeln!(
        s,
        "result: {} (seed {}; reproduce with scripts/soak --mode {} --seed {} --minutes {minutes})",
        if verdict.passed() { "PASS" } else { "FAIL" },
        e.seed,
        e.mode.name(),
        e.seed
    );
    s
}
