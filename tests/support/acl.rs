//! The ACL rules docs/operations.md grants Telos's Redis user: the tests
//! that run a Redis with exactly these read them from the doc, so the
//! documented line is the one tested.

use telos_testkit::process::repo_root;

/// The ACL user docs/operations.md names.
pub const ACL_USER: &str = "telos";

/// The words after the password in docs/operations.md's
/// `ACL SETUSER telos on >… RULES…` line (the data user's, not the
/// Sentinel user's).
pub fn documented_acl_rules() -> Vec<String> {
    let doc = std::fs::read_to_string(repo_root().join("docs/operations.md"))
        .expect("docs/operations.md");
    let line = doc
        .lines()
        .find(|l| {
            l.starts_with(&format!("ACL SETUSER {ACL_USER} on >")) && !l.contains("+sentinel|")
        })
        .expect("docs/operations.md has an `ACL SETUSER telos on >…` line");
    line.split_whitespace()
        .skip(4) // ACL SETUSER telos on
        .filter(|word| !word.starts_with('>'))
        .map(String::from)
        .collect()
}
