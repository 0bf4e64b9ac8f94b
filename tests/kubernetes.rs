//! The Kubernetes example (`deploy/kubernetes/`) checked as far as it can
//! be without a cluster: every YAML document parses and names its kind;
//! Redis is a primary and two replicas with three Sentinels; every flag and
//! `TELOS_*` variable a Telos container (or the start script it runs) uses
//! is one the built binary's `--help` lists, so a renamed flag fails here;
//! every `$(VAR)` an argument expands is defined; every Telos container has
//! a readiness probe; a shard's grace outlasts its drain deadline and a
//! preStop pause; every Service and PodDisruptionBudget selects pods of a
//! workload; every Secret mounted is one the README says how to make.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;

use telos_testkit::process::{bin, repo_root};
use yaml_rust2::{Yaml, YamlLoader};

const BINARIES: [&str; 3] = ["telos-world", "telos-gate", "telosctl"];

fn dir() -> PathBuf {
    repo_root().join("deploy/kubernetes")
}

/// Every document of every `.yaml` file, with the file it came from.
fn documents() -> Vec<(String, Yaml)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir())
        .expect("deploy/kubernetes")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no manifests in deploy/kubernetes");
    let mut docs = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        let parsed = YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        for doc in parsed.into_iter().filter(|d| !d.is_null()) {
            for field in ["apiVersion", "kind"] {
                assert!(
                    doc[field].as_str().is_some(),
                    "{name}: a document without {field}"
                );
            }
            assert!(
                doc["metadata"]["name"].as_str().is_some(),
                "{name}: a {} without a name",
                kind(&doc)
            );
            docs.push((name.clone(), doc));
        }
    }
    docs
}

fn kind(doc: &Yaml) -> &str {
    doc["kind"].as_str().unwrap_or("?")
}

fn name(doc: &Yaml) -> &str {
    doc["metadata"]["name"].as_str().unwrap_or("?")
}

fn find<'a>(docs: &'a [(String, Yaml)], k: &str, n: &str) -> &'a Yaml {
    docs.iter()
        .map(|(_, d)| d)
        .find(|d| kind(d) == k && name(d) == n)
        .unwrap_or_else(|| panic!("no {k} {n}"))
}

fn strings(y: &Yaml) -> Vec<String> {
    y.as_vec()
        .map(|v| {
            v.iter()
                .map(|s| match s {
                    Yaml::String(s) => s.clone(),
                    Yaml::Integer(i) => i.to_string(),
                    other => panic!("not a string: {other:?}"),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The text of every ConfigMap key, by key.
fn scripts(docs: &[(String, Yaml)]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (_, d) in docs.iter().filter(|(_, d)| kind(d) == "ConfigMap") {
        if let Some(data) = d["data"].as_hash() {
            for (k, v) in data {
                out.insert(
                    k.as_str().unwrap().to_string(),
                    v.as_str().unwrap_or_default().to_string(),
                );
            }
        }
    }
    out
}

/// A command as run: `sh /path/x.sh` is the ConfigMap key `x.sh`'s text;
/// anything else its own words.
fn command_text(command: &[String], scripts: &BTreeMap<String, String>) -> String {
    match command {
        [sh, path, ..] if sh == "sh" && path.ends_with(".sh") => {
            let key = path.rsplit('/').next().unwrap();
            scripts
                .get(key)
                .unwrap_or_else(|| panic!("no ConfigMap holds {key}"))
                .clone()
        }
        words => words.join(" "),
    }
}

fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| c.is_whitespace() || "\"'();|".contains(c))
        .filter(|w| !w.is_empty())
}

/// The Telos binary a command runs, if any.
fn binary_of(text: &str) -> Option<&'static str> {
    BINARIES.into_iter().find(|b| words(text).any(|w| w == *b))
}

/// Every word of `binary`'s help, with its subcommands' when `text` names
/// them (`telosctl ... status --json`).
fn help_words(binary: &str, text: &str) -> BTreeSet<String> {
    let help = |args: &[&str]| {
        let out = Command::new(bin(binary))
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{binary} --help: {e} (build the binaries first)"));
        assert!(out.status.success(), "{binary} {args:?} failed");
        String::from_utf8(out.stdout).unwrap()
    };
    let mut all = help(&["--help"]);
    if binary == "telosctl" {
        let top = all.clone();
        let commands: Vec<&str> = top
            .lines()
            .skip_while(|l| !l.starts_with("Commands:"))
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        for c in commands
            .into_iter()
            .filter(|c| words(text).any(|w| w == *c))
        {
            all.push_str(&help(&[c, "--help"]));
        }
    }
    all.split(|c: char| c.is_whitespace() || ",[]=".contains(c))
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

fn flags(text: &str) -> BTreeSet<String> {
    words(text)
        .filter(|w| w.len() > 2 && w.starts_with("--"))
        .map(|w| w.split('=').next().unwrap().to_string())
        .collect()
}

/// Pod templates: (workload kind/name, pod spec, pod labels).
fn pods(docs: &[(String, Yaml)]) -> Vec<(String, &Yaml, &Yaml)> {
    docs.iter()
        .filter(|(_, d)| ["StatefulSet", "Deployment"].contains(&kind(d)))
        .map(|(_, d)| {
            let t = &d["spec"]["template"];
            (
                format!("{} {}", kind(d), name(d)),
                &t["spec"],
                &t["metadata"]["labels"],
            )
        })
        .collect()
}

fn selects(selector: &Yaml, labels: &Yaml) -> bool {
    selector
        .as_hash()
        .is_some_and(|s| !s.is_empty() && s.iter().all(|(k, v)| &labels[k.as_str().unwrap()] == v))
}

#[test]
fn redis_is_a_primary_two_replicas_and_three_sentinels() {
    let docs = documents();
    // Two replicas: one lost (or promoted) leaves one for `WAIT 1`.
    assert_eq!(
        find(&docs, "StatefulSet", "redis")["spec"]["replicas"].as_i64(),
        Some(3)
    );
    assert_eq!(
        find(&docs, "StatefulSet", "sentinel")["spec"]["replicas"].as_i64(),
        Some(3)
    );
    let scripts = scripts(&docs);
    let sentinel = &scripts["sentinel.sh"];
    assert!(
        sentinel.contains("sentinel monitor telos redis-0.redis 6379 2"),
        "{sentinel}"
    );
    let redis = &scripts["redis.sh"];
    assert!(redis.contains("--replicaof") && redis.contains("get-master-addr-by-name telos"));
    // Every Telos process finds the primary through all three Sentinels.
    let url = find(&docs, "ConfigMap", "telos")["data"]["redis-url"]
        .as_str()
        .unwrap();
    assert_eq!(
        url,
        "redis+sentinel://sentinel-0.sentinel:26379,sentinel-1.sentinel:26379,sentinel-2.sentinel:26379/telos"
    );
    for (_, d) in &docs {
        if kind(d) == "PodDisruptionBudget" {
            assert_eq!(d["spec"]["maxUnavailable"].as_i64(), Some(1), "{}", name(d));
        }
    }
    find(&docs, "PodDisruptionBudget", "sentinel");
    find(&docs, "PodDisruptionBudget", "telos-world");
}

#[test]
fn every_flag_and_variable_is_one_the_binaries_know() {
    let docs = documents();
    let scripts = scripts(&docs);
    let mut checked = 0;
    for (workload, spec, _) in pods(&docs) {
        let containers = spec["containers"]
            .as_vec()
            .into_iter()
            .chain(spec["initContainers"].as_vec())
            .flatten();
        for c in containers {
            let cname = c["name"].as_str().unwrap();
            let command = strings(&c["command"]);
            let args = strings(&c["args"]);
            let env: BTreeMap<String, String> = c["env"]
                .as_vec()
                .into_iter()
                .flatten()
                .map(|e| {
                    let v = e["value"].as_str().unwrap_or_default().to_string();
                    (e["name"].as_str().unwrap().to_string(), v)
                })
                .collect();
            // Kubernetes leaves an undefined $(VAR) as it is: a typo would
            // reach the binary as a literal.
            for a in command.iter().chain(&args) {
                for var in a.split("$(").skip(1).filter_map(|r| r.split(')').next()) {
                    assert!(
                        env.contains_key(var),
                        "{workload}/{cname}: $({var}) is not defined"
                    );
                }
            }
            let mut runs = vec![command_text(&command, &scripts) + " " + &args.join(" ")];
            for probe in ["readinessProbe", "livenessProbe", "startupProbe"] {
                let cmd = strings(&c[probe]["exec"]["command"]);
                if !cmd.is_empty() {
                    runs.push(command_text(&cmd, &scripts));
                }
            }
            for text in runs {
                let Some(binary) = binary_of(&text) else {
                    continue;
                };
                let known = help_words(binary, &text);
                for flag in flags(&text) {
                    assert!(
                        known.contains(&flag),
                        "{workload}/{cname}: {binary} has no {flag}"
                    );
                    checked += 1;
                }
                for var in env.keys().filter(|v| v.starts_with("TELOS_")) {
                    assert!(
                        known.contains(var),
                        "{workload}/{cname}: {binary} reads no {var}"
                    );
                }
            }
            if binary_of(&command_text(&command, &scripts)).is_some() {
                assert!(
                    c["readinessProbe"].as_hash().is_some(),
                    "{workload}/{cname}: no readiness probe"
                );
            }
        }
    }
    // The shards' and the gate's flags and the start script's --zones at
    // least.
    assert!(checked >= 13, "only {checked} flags checked");
}

/// Every Telos container is probed on its own health endpoints (issue 29):
/// readiness `GET /readyz`, liveness `GET /livez`, on the port named
/// `metrics`, which is the one its `--metrics-listen` binds — no shell
/// grepping `telosctl status`.
#[test]
fn telos_containers_are_probed_on_readyz_and_livez_of_their_metrics_port() {
    let docs = documents();
    let scripts = scripts(&docs);
    let mut probed = 0;
    for (workload, spec, _) in pods(&docs) {
        for c in spec["containers"].as_vec().into_iter().flatten() {
            let command = strings(&c["command"]);
            if binary_of(&command_text(&command, &scripts)).is_none() {
                continue;
            }
            let cname = c["name"].as_str().unwrap();
            for (probe, path) in [("readinessProbe", "/readyz"), ("livenessProbe", "/livez")] {
                let get = &c[probe]["httpGet"];
                assert_eq!(
                    get["path"].as_str(),
                    Some(path),
                    "{workload}/{cname} {probe}"
                );
                assert_eq!(
                    get["port"].as_str(),
                    Some("metrics"),
                    "{workload}/{cname} {probe}"
                );
            }
            let port = c["ports"]
                .as_vec()
                .into_iter()
                .flatten()
                .find(|p| p["name"].as_str() == Some("metrics"))
                .and_then(|p| p["containerPort"].as_i64())
                .expect("a port named metrics");
            let listen = arg_after(c, "--metrics-listen").expect("--metrics-listen");
            assert!(
                listen.ends_with(&format!(":{port}")),
                "{workload}/{cname}: metrics on {listen}, probed on {port}"
            );
            probed += 1;
        }
    }
    assert!(probed >= 2, "the world and the gate: {probed} probed");
}

/// The value after `flag` in a container's arguments.
fn arg_after(c: &Yaml, flag: &str) -> Option<String> {
    let args = strings(&c["args"]);
    let at = args.iter().position(|a| a == flag)?;
    args.get(at + 1).cloned()
}

#[test]
fn a_shard_is_given_longer_than_its_drain_and_the_gate_leaves_before_it_stops() {
    let docs = documents();
    for (workload, spec, _) in pods(&docs) {
        let grace = spec["terminationGracePeriodSeconds"].as_i64().unwrap_or(30);
        for c in spec["containers"].as_vec().into_iter().flatten() {
            let pre_stop: i64 = strings(&c["lifecycle"]["preStop"]["exec"]["command"])
                .iter()
                .skip_while(|w| *w != "sleep")
                .nth(1)
                .map_or(0, |s| s.parse().unwrap());
            let drain: i64 = arg_after(c, "--drain-deadline").map_or(0, |s| s.parse().unwrap());
            if workload == "StatefulSet telos-world" {
                assert!(drain > 0, "the shards name their drain deadline");
            }
            // Margin for the drain's last saves and the exit.
            assert!(
                grace >= pre_stop + drain + 5,
                "{workload}: grace {grace}s, preStop {pre_stop}s, drain {drain}s"
            );
            if workload == "Deployment telos-gate" {
                assert!(pre_stop > 0, "the gate leaves the Service before it stops");
            }
        }
    }
}

#[test]
fn selectors_match_pods_and_secrets_are_documented() {
    let docs = documents();
    let pods = pods(&docs);
    for (file, d) in &docs {
        let selector = match kind(d) {
            "Service" => &d["spec"]["selector"],
            "PodDisruptionBudget" => &d["spec"]["selector"]["matchLabels"],
            "StatefulSet" | "Deployment" => &d["spec"]["selector"]["matchLabels"],
            _ => continue,
        };
        assert!(
            pods.iter().any(|(_, _, labels)| selects(selector, labels)),
            "{file}: {} {} selects no pods",
            kind(d),
            name(d)
        );
    }
    let readme = std::fs::read_to_string(dir().join("README.md")).unwrap();
    for (workload, spec, _) in &pods {
        for v in spec["volumes"].as_vec().into_iter().flatten() {
            if let Some(secret) = v["secret"]["secretName"].as_str() {
                assert!(
                    readme.contains(&format!("kubectl create secret generic {secret}")),
                    "{workload}: README.md does not say how to make Secret {secret}"
                );
            }
        }
    }
}
