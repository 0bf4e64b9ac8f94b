//! Telos against a Redis that wants credentials, and one that speaks TLS
//! only: a real `redis-server` whose only user has exactly the ACL rules
//! docs/operations.md grants Telos, a real keyed `telos-world`, a real
//! `telos-gate` a player logs in through, and `telosctl status`.
//!
//! - the password in the URL, and from `--redis-password-file`;
//! - `rediss://` with `--redis-ca`, and without it (refused: the system's
//!   roots do not know the test CA);
//! - a wrong password: every binary stops at start with a line that says
//!   so and does not contain the password.

mod support;

use std::path::{Path, PathBuf};

use support::acl::{ACL_USER, documented_acl_rules};
use telos_testkit::RedisServer;
use telos_testkit::bot::Bot;
use telos_testkit::cli::{EXIT_TIMEOUT, Finished, clean_command, run_to_exit};
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{start_keyed_gate, start_keyed_world};
use telos_testkit::redis::{RedisAcl, RedisOptions};
use telos_testkit::world::starter_zones;

/// The ACL user's password: distinctive, so a leak into any output is found.
const REDIS_PASSWORD: &str = "pw-7f3a9c-never-printed";
const WRONG_PASSWORD: &str = "pw-wrong-5d1e-never-printed";
const PLAYER_PASSWORD: &str = "correct horse";

fn acl() -> Option<RedisAcl> {
    Some(RedisAcl {
        user: ACL_USER.into(),
        password: REDIS_PASSWORD.into(),
        rules: documented_acl_rules(),
    })
}

fn acl_server(tls: bool) -> anyhow::Result<RedisServer> {
    RedisServer::start_with(RedisOptions {
        acl: acl(),
        tls,
        ..RedisOptions::default()
    })
}

/// A file holding `password` and a newline, as `echo` writes it.
fn password_file(dir: &Path, password: &str) -> anyhow::Result<PathBuf> {
    let path = dir.join("redis-password");
    std::fs::write(&path, format!("{password}\n"))?;
    Ok(path)
}

/// `url` with the ACL user (and no password) in it.
fn with_user(url: &str) -> String {
    url.replacen("://", &format!("://{ACL_USER}@"), 1)
}

/// A world and a gate on `url` with `flags`, a player created through the
/// gate, and `telosctl status` listing the shard; no output of any of them
/// contains the password.
async fn cluster_serves_a_player(url: &str, flags: &[String]) -> anyhow::Result<()> {
    let keys = TempKeys::generate()?;
    let world = start_keyed_world("shard-a", url, &starter_zones(), keys.path(), None, flags)?;
    let gate_flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let gate = start_keyed_gate(url, keys.path(), &gate_flags)?;
    let mut bot = Bot::create_at(&gate.addr, "Alfa", PLAYER_PASSWORD).await?;
    bot.command("look").await?;
    let status = telosctl(url, flags, &["status", "--json"])?;
    assert!(status.success(), "telosctl status: {status:?}");
    assert!(status.stdout.contains("\"shard-a\""), "{}", status.stdout);
    bot.quit().await?;
    let logs = [world.log_text(), gate.log_text()];
    for log in &logs {
        // The documented ACL grants every command Telos sends.
        assert!(
            !log.contains("NOPERM") && !log.contains("no permissions"),
            "{log}"
        );
    }
    assert_never_printed(&[&logs[0], &logs[1], &status.stdout, &status.stderr]);
    Ok(())
}

fn telosctl(url: &str, flags: &[String], args: &[&str]) -> anyhow::Result<Finished> {
    let mut cmd = clean_command("telosctl");
    cmd.arg("--redis-url").arg(url).args(flags).args(args);
    run_to_exit("telosctl", cmd, EXIT_TIMEOUT)
}

fn assert_never_printed(outputs: &[&str]) {
    for out in outputs {
        for secret in [REDIS_PASSWORD, WRONG_PASSWORD] {
            assert!(
                !out.contains(secret),
                "the Redis password was printed:\n{out}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acl_user_with_the_password_in_the_url() -> anyhow::Result<()> {
    let redis = acl_server(false)?;
    cluster_serves_a_player(&redis.url_with_password(), &[]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acl_user_with_the_password_from_a_file() -> anyhow::Result<()> {
    let redis = acl_server(false)?;
    let dir = tempfile::tempdir()?;
    let file = password_file(dir.path(), REDIS_PASSWORD)?;
    let flags = [
        "--redis-password-file".to_string(),
        file.display().to_string(),
    ];
    cluster_serves_a_player(&with_user(&redis.url), &flags).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_only_redis_with_the_ca() -> anyhow::Result<()> {
    let redis = acl_server(true)?;
    assert!(redis.url.starts_with("rediss://"), "{}", redis.url);
    let ca = redis.tls.as_ref().expect("a TLS server").ca.clone();
    let dir = tempfile::tempdir()?;
    let file = password_file(dir.path(), REDIS_PASSWORD)?;
    let flags = [
        "--redis-ca".to_string(),
        ca.display().to_string(),
        "--redis-password-file".to_string(),
        file.display().to_string(),
    ];
    cluster_serves_a_player(&with_user(&redis.url), &flags).await
}

/// Run `program` (a world, a gate or `telosctl status`) on `url` with
/// `flags`, expecting it to stop at once, non-zero; returns its stderr.
fn refused_start(program: &str, url: &str, flags: &[String]) -> anyhow::Result<String> {
    let mut cmd = clean_command(program);
    match program {
        "telos-world" => {
            cmd.args([
                "--shard-id",
                "a",
                "--grpc-listen",
                "127.0.0.1:0",
                "--zones",
                "city",
            ]);
        }
        "telos-gate" => {
            cmd.args(["--listen", "127.0.0.1:0"]);
        }
        _ => {}
    }
    cmd.arg("--redis-url").arg(url).args(flags);
    if program == "telosctl" {
        cmd.arg("status");
    }
    let out = run_to_exit(program, cmd, EXIT_TIMEOUT)?;
    assert!(!out.success(), "{program} ran: {out:?}");
    assert_never_printed(&[&out.stdout, &out.stderr]);
    Ok(out.stderr)
}

#[test]
fn a_wrong_password_stops_every_binary_with_a_line_that_hides_it() -> anyhow::Result<()> {
    let redis = acl_server(false)?;
    let dir = tempfile::tempdir()?;
    let wrong_url = redis
        .url
        .replacen("://", &format!("://{ACL_USER}:{WRONG_PASSWORD}@"), 1);
    let file = password_file(dir.path(), WRONG_PASSWORD)?;
    let file_flags = [
        "--redis-password-file".to_string(),
        file.display().to_string(),
    ];
    for program in ["telos-world", "telos-gate", "telosctl"] {
        for (url, flags) in [
            (&wrong_url, &[][..]),
            (&with_user(&redis.url), &file_flags[..]),
        ] {
            let stderr = refused_start(program, url, flags)?;
            assert!(
                stderr.contains("refused the credentials"),
                "{program}: {stderr}"
            );
            if flags.is_empty() {
                // The URL is shown, its password replaced.
                assert!(stderr.contains(":***@"), "{program}: {stderr}");
            }
        }
    }
    Ok(())
}

#[test]
fn rediss_without_the_ca_stops_with_the_tls_error() -> anyhow::Result<()> {
    let redis = RedisServer::start_with(RedisOptions {
        tls: true,
        ..RedisOptions::default()
    })?;
    for program in ["telos-world", "telosctl"] {
        let stderr = refused_start(program, &redis.url, &[])?;
        assert!(stderr.contains("certificate"), "{program}: {stderr}");
    }
    Ok(())
}

#[test]
fn an_unreadable_password_file_is_named_at_start() -> anyhow::Result<()> {
    let redis = acl_server(false)?;
    let missing = "/nonexistent/telos-redis-password";
    let flags = ["--redis-password-file".to_string(), missing.to_string()];
    for program in ["telos-world", "telos-gate", "telosctl"] {
        let stderr = refused_start(program, &with_user(&redis.url), &flags)?;
        assert!(stderr.contains(missing), "{program}: {stderr}");
    }
    Ok(())
}

/// Issue 18: a password typed without its colon (`redis://SECRET@host`,
/// which reads as a user name) or as `?password=` was printed by every
/// binary; so was `TELOS_REDIS_URL` in `--help`.
#[test]
fn a_mistyped_url_never_prints_the_secret() -> anyhow::Result<()> {
    let redis = acl_server(false)?;
    let host = redis
        .url
        .strip_prefix("redis://")
        .expect("a redis:// URL")
        .to_string();
    let urls = [
        format!("redis://{WRONG_PASSWORD}@{host}"),
        format!("redis://{host}?password={WRONG_PASSWORD}"),
        format!("redis://{ACL_USER}@{host}?password={WRONG_PASSWORD}&db=0"),
    ];
    for program in ["telos-world", "telos-gate", "telosctl"] {
        for url in &urls {
            // Refused (no valid credentials), and the secret in no output.
            let stderr = refused_start(program, url, &[])?;
            assert!(stderr.contains("***"), "{program}: {stderr}");
        }
        let mut cmd = clean_command(program);
        cmd.env(
            "TELOS_REDIS_URL",
            format!("redis://{ACL_USER}:{WRONG_PASSWORD}@{host}"),
        )
        .arg("--help");
        let help = run_to_exit(program, cmd, EXIT_TIMEOUT)?;
        assert!(help.success(), "{program} --help: {help:?}");
        assert!(help.stdout.contains("TELOS_REDIS_URL"), "{}", help.stdout);
        assert_never_printed(&[&help.stdout, &help.stderr]);
    }
    Ok(())
}
