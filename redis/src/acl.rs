//! The Redis commands Telos sends, in one list, and the ACL rules that
//! grant exactly them (issue 18, defect 1: a hand-written ACL line missed
//! two commands three scripts call, and every returning player's login
//! failed under it).
//!
//! - [`COMMANDS`] is the list. [`setuser_line`] makes docs/operations.md's
//!   `ACL SETUSER` line from it; a unit test keeps the two equal.
//! - Every command a Telos process sends through
//!   [`RedisConn`](crate::directory::connection::RedisConn) is checked
//!   against it before it is sent ([`unlisted`]): one missing from the list
//!   fails in every test that takes its path, whatever Redis's own ACL.
//! - The unit tests scan every `*.lua` script for `redis.call('X'` and
//!   every `cmd("X")` in the code, and fail on a command not in the list,
//!   and on a listed command nothing sends (least privilege).
//! - `tests/redis_auth.rs` runs every path (create, connect, resume,
//!   handoff, drain, transfer, status, tier) against a Redis whose only
//!   user has exactly the documented line, and checks every script ran.

use redis::Cmd;

/// Every command Telos sends, as ACL names (`container|subcommand`),
/// sorted. Keys and channels are limited to [`KEY_PATTERN`] and
/// [`CHANNEL_PATTERN`] besides.
pub const COMMANDS: &[&str] = &[
    "decr",
    "del",
    "evalsha",
    "exec",
    "exists",
    "get",
    "hdel",
    "hget",
    "hgetall",
    "hincrby",
    "hmget",
    "hset",
    "incr",
    "mget",
    "multi",
    "pexpire",
    "pexpireat",
    "ping",
    "pttl",
    "publish",
    "role",
    "sadd",
    "script|load",
    "select",
    "set",
    "sismember",
    "smembers",
    "srem",
    "subscribe",
    "time",
    "unsubscribe",
    "wait",
    "xadd",
    "xrange",
    "xrevrange",
];

/// Commands redis-rs sends on Telos's behalf, which no `cmd("X")` or
/// script names: `EVALSHA` and, after a Redis restart emptied its script
/// cache, `SCRIPT LOAD` (every `Script::invoke_async`); `MULTI`/`EXEC`
/// (an atomic pipeline); `SELECT` (a URL naming a database other than 0);
/// `SUBSCRIBE`/`UNSUBSCRIBE` (the transfer and comm channels' pub/sub
/// connections).
/// `AUTH` needs no grant.
pub const SENT_BY_THE_LIBRARY: &[&str] = &[
    "evalsha",
    "exec",
    "multi",
    "script|load",
    "select",
    "subscribe",
    "unsubscribe",
];

/// Every key Telos touches starts with `telos:`.
pub const KEY_PATTERN: &str = "~telos:*";

/// The pub/sub channels: `telos:transfers:changed` and `telos:comm`.
pub const CHANNEL_PATTERN: &str = "&telos:*";

/// The ACL rules after `on >PASSWORD`: the key and channel patterns, then
/// nothing but [`COMMANDS`].
pub fn rules() -> Vec<String> {
    let mut rules = vec![
        "resetkeys".to_string(),
        KEY_PATTERN.to_string(),
        "resetchannels".to_string(),
        CHANNEL_PATTERN.to_string(),
        "-@all".to_string(),
    ];
    rules.extend(COMMANDS.iter().map(|c| format!("+{c}")));
    rules
}

/// `ACL SETUSER <user> on ><password> <rules>`: the line
/// docs/operations.md gives operators.
pub fn setuser_line(user: &str, password: &str) -> String {
    format!("ACL SETUSER {user} on >{password} {}", rules().join(" "))
}

/// What Telos asks a Sentinel (redis-rs's lookup: `SENTINEL MASTERS`,
/// and `SENTINEL SLAVES` for replicas; `ROLE`, the check that the node
/// answering is what it was asked for), and nothing else: with these rules
/// the password every Telos process holds cannot reconfigure the
/// Sentinels (`SENTINEL SET`, `REMOVE`, `MONITOR`, `FAILOVER`,
/// `CONFIG`, `ACL`) — issue 30.
pub const SENTINEL_COMMANDS: &[&str] = &[
    "ping",
    "role",
    "sentinel|get-master-addr-by-name",
    "sentinel|masters",
    "sentinel|slaves",
];

/// `ACL SETUSER <user> on ><password> ...` for each Sentinel: the line
/// docs/operations.md gives operators.
pub fn sentinel_setuser_line(user: &str, password: &str) -> String {
    let grants: Vec<String> = SENTINEL_COMMANDS.iter().map(|c| format!("+{c}")).collect();
    format!(
        "ACL SETUSER {user} on >{password} -@all {}",
        grants.join(" ")
    )
}

/// The ACL name of `cmd` (`get`, `script|load`), if it has a name.
pub fn acl_name(cmd: &Cmd) -> Option<String> {
    let mut args = cmd.args_iter().filter_map(|a| match a {
        redis::Arg::Simple(bytes) => std::str::from_utf8(bytes).ok(),
        _ => None,
    });
    let name = args.next()?.to_ascii_lowercase();
    // The container commands Telos could send; the ACL grants their
    // subcommands one by one.
    if matches!(name.as_str(), "script" | "client" | "config" | "acl") {
        let sub = args.next().unwrap_or_default().to_ascii_lowercase();
        return Some(format!("{name}|{sub}"));
    }
    Some(name)
}

/// The error for a command Telos does not grant itself: it is not sent.
pub(crate) fn not_granted(name: String) -> redis::RedisError {
    redis::RedisError::from((
        redis::ErrorKind::Client,
        "command not in telos_redis::acl::COMMANDS (the documented ACL); not sent",
        name,
    ))
}

/// `Some(name)` when `cmd` is not in [`COMMANDS`]: it must not be sent.
pub fn unlisted(cmd: &Cmd) -> Option<String> {
    let name = acl_name(cmd).unwrap_or_default();
    (!COMMANDS.contains(&name.as_str())).then_some(name)
}

/// For this crate's tests: a private Redis whose Telos user has exactly
/// [`rules`] (what the docs grant), and the URL with its credentials. Every
/// script runs under it in the tests of its module, so a script calling a
/// command the rules lack fails there (`NOPERM`).
#[cfg(test)]
pub(crate) fn test_server() -> (telos_testkit::RedisServer, String) {
    let server = telos_testkit::RedisServer::start_with(telos_testkit::redis::RedisOptions {
        acl: Some(telos_testkit::redis::RedisAcl {
            user: "telos".into(),
            password: "telos-unit-tests".into(),
            rules: rules(),
        }),
        ..Default::default()
    })
    .expect("redis-server");
    let url = server.url_with_password();
    (server, url)
}

#[cfg(test)]
#[path = "acl_tests.rs"]
mod tests;
