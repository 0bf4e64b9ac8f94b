//! Item conservation (see [`super::super::census`]): no census taken while
//! the cluster was healthy found an item in two places, and the census
//! after every bot quit found each tracked item exactly once.

use super::super::history::{Answer, Evidence, Kind};
use super::findings::{CheckResult, Violation};

pub fn check(e: &Evidence) -> CheckResult {
    let mut violations = Vec::new();
    for (at, found) in &e.samples.census_anomalies {
        for detail in found {
            violations.push(violation("duplicated", Some(*at), detail.clone()));
        }
    }
    let last = match &e.end.census {
        Some(Ok(found)) => {
            for detail in found {
                let kind = if detail.ends_with("nowhere") {
                    "lost"
                } else {
                    "duplicated"
                };
                violations.push(violation(kind, Some(e.end.stopped), detail.clone()));
            }
            "the final census taken"
        }
        Some(Err(why)) => {
            violations.push(violation(
                "no census",
                None,
                format!("the final census failed: {why}"),
            ));
            "no final census"
        }
        None => "no final census",
    };
    let carried = e
        .bots
        .iter()
        .flat_map(|b| &b.commands)
        .filter(|c| matches!(c.kind, Kind::Carry { .. }))
        .filter(|c| c.outcome.answer() == Some(&Answer::Carried))
        .count();
    CheckResult {
        name: "items",
        summary: format!(
            "{carried} `get all`/`drop all` answered, {} censuses while healthy, {last}; {} violations",
            e.samples.censuses,
            violations.len()
        ),
        notes: Vec::new(),
        violations,
    }
}

fn violation(kind: &str, at: Option<super::super::clock::Ms>, detail: String) -> Violation {
    Violation {
        check: "items",
        kind: kind.to_string(),
        bot: None,
        at,
        window: None,
        detail,
        excerpt: Vec::new(),
    }
}
