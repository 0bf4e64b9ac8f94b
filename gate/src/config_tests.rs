//! Settings: layering, defaults and one-line errors.

use super::*;

fn cli(args: &[&str]) -> Cli {
    let mut v = vec!["telos-gate"];
    v.extend_from_slice(args);
    // `try_parse_from` still reads the environment for `env =` fields;
    // these tests only use variables nobody sets in CI.
    Cli::try_parse_from(v).unwrap()
}

#[test]
fn defaults_apply_when_nothing_is_given() {
    let s = Cli::default().resolve_with(FileConfig::default()).unwrap();
    assert_eq!(s.listen.to_string(), DEFAULT_LISTEN);
    assert_eq!(s.redis.redacted(), DEFAULT_REDIS_URL);
    assert!(s.metrics_listen.is_none());
    assert_eq!(s.gate.idle_timeout, Duration::from_secs(1800));
}

#[test]
fn flag_beats_file_and_file_beats_default() {
    let file = FileConfig::parse(
        "listen = \"127.0.0.1:5000\"\nidle_timeout_secs = 99\nmetrics_listen = \"127.0.0.1:9100\"\n",
    )
    .unwrap();
    let s = cli(&["--listen", "127.0.0.1:6000"])
        .resolve_with(file)
        .unwrap();
    assert_eq!(s.listen.to_string(), "127.0.0.1:6000");
    assert_eq!(s.gate.idle_timeout, Duration::from_secs(99));
    assert_eq!(s.metrics_listen.unwrap().to_string(), "127.0.0.1:9100");
    assert_eq!(s.gate.input_buffer_lines, 1024);
}

#[test]
fn env_is_read_by_clap_between_flag_and_file() {
    // Clap folds env into the same Option; simulate with a Cli value as
    // it would come out of clap when only the variable is set.
    let c = Cli {
        redis: RedisCli {
            redis_url: Some("redis://10.0.0.1:6379".into()),
            ..RedisCli::default()
        },
        ..Cli::default()
    };
    let file = FileConfig::parse("redis_url = \"redis://file:6379\"").unwrap();
    assert_eq!(
        c.resolve_with(file).unwrap().redis.redacted(),
        "redis://10.0.0.1:6379"
    );
}

#[test]
fn unknown_file_keys_are_rejected() {
    let err = FileConfig::parse("listen = \"127.0.0.1:1\"\nlisten_typo = 3\n").unwrap_err();
    assert!(err.contains("listen_typo"), "{err}");
    assert!(!err.contains('\n'));
}

#[test]
fn bad_values_name_the_setting_in_one_line() {
    let err = cli(&["--listen", "nowhere"])
        .resolve_with(FileConfig::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("listen") && !err.contains('\n'), "{err}");
    let err = cli(&["--idle-timeout-secs", "x"])
        .resolve_with(FileConfig::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("idle-timeout-secs"), "{err}");
    let err = cli(&["--input-buffer-lines", "0"])
        .resolve_with(FileConfig::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("input_buffer_lines"), "{err}");
    let err = cli(&["--redis-url", "http://x"])
        .resolve_with(FileConfig::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("redis_url"), "{err}");
    let err = cli(&["--redis-url", "http://telos:s3cret@x"])
        .resolve_with(FileConfig::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("redis_url") && !err.contains("s3cret"),
        "{err}"
    );
}

#[test]
fn sentinel_flags_and_file_keys_find_the_primary_through_sentinel() {
    let s = cli(&[
        "--redis-sentinels",
        "10.0.0.1:26379,10.0.0.2:26379",
        "--redis-master-name",
        "telos",
    ])
    .resolve_with(FileConfig::default())
    .unwrap();
    assert!(s.redis.is_sentinel());
    assert_eq!(
        s.redis.redacted(),
        "redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/telos"
    );
    let file = FileConfig::parse("redis_url = \"redis+sentinel://s:26379/telos\"\n").unwrap();
    assert!(
        Cli::default()
            .resolve_with(file)
            .unwrap()
            .redis
            .is_sentinel()
    );
    for args in [
        &["--redis-sentinels", "a:1"][..],
        &["--redis-master-name", "telos"],
        &[
            "--redis-url",
            "redis://h:1",
            "--redis-sentinels",
            "a:1",
            "--redis-master-name",
            "m",
        ],
    ] {
        assert!(
            cli(args).resolve_with(FileConfig::default()).is_err(),
            "{args:?}"
        );
    }
    // A broken Sentinel URL is refused at start, naming the problem.
    let err = cli(&["--redis-url", "redis+sentinel://s:26379"])
        .resolve_with(FileConfig::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("master name"), "{err}");
}

#[test]
fn an_unreadable_redis_password_file_is_named() {
    let err = cli(&["--redis-password-file", "/nonexistent/redis.pw"])
        .resolve_with(FileConfig::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("/nonexistent/redis.pw"), "{err}");
}

#[test]
fn missing_config_file_is_named() {
    let c = Cli {
        config: Some("/nonexistent/gate.toml".into()),
        ..Cli::default()
    };
    let err = c.resolve().unwrap_err().to_string();
    assert!(err.contains("/nonexistent/gate.toml"), "{err}");
}

#[test]
fn edge_limits_have_defaults_flags_and_positive_values() {
    let s = Cli::default().resolve_with(FileConfig::default()).unwrap();
    assert_eq!(
        s.gate.max_connections_per_ip,
        DEFAULT_MAX_CONNECTIONS_PER_IP
    );
    assert_eq!(s.gate.pre_login_timeout, DEFAULT_PRE_LOGIN_TIMEOUT);
    assert_eq!(s.gate.input_buffer_bytes, DEFAULT_INPUT_BUFFER_BYTES);
    let s = cli(&[
        "--max-connections-per-ip",
        "3",
        "--pre-login-timeout-secs",
        "2",
        "--create-ip-burst",
        "1",
        "--create-ip-per-hour",
        "0.5",
        "--input-buffer-bytes",
        "9000",
    ])
    .resolve_with(FileConfig::default())
    .unwrap();
    assert_eq!(s.gate.max_connections_per_ip, 3);
    assert_eq!(s.gate.pre_login_timeout, Duration::from_secs(2));
    assert_eq!(s.gate.create_ip_burst, 1);
    assert_eq!(s.gate.create_ip_per_hour, 0.5);
    assert_eq!(s.gate.input_buffer_bytes, 9000);
    let file =
        FileConfig::parse("max_connections_per_ip = 4\npre_login_timeout_secs = 5\n").unwrap();
    let s = Cli::default().resolve_with(file).unwrap();
    assert_eq!(s.gate.max_connections_per_ip, 4);
    assert_eq!(s.gate.pre_login_timeout, Duration::from_secs(5));
    for (flag, name) in [
        ("--max-connections-per-ip", "max_connections_per_ip"),
        ("--pre-login-timeout-secs", "pre_login_timeout_secs"),
        ("--create-ip-burst", "create_ip_burst"),
        ("--input-buffer-bytes", "input_buffer_bytes"),
    ] {
        let err = cli(&[flag, "0"])
            .resolve_with(FileConfig::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains(name), "{err}");
    }
}

#[test]
fn a_bare_metrics_port_binds_loopback_and_an_address_is_used_as_given() {
    let s = cli(&["--metrics-listen", "9100"])
        .resolve_with(FileConfig::default())
        .unwrap();
    assert_eq!(s.metrics_listen.unwrap().to_string(), "127.0.0.1:9100");
    let s = cli(&["--metrics-listen", "0.0.0.0:9100"])
        .resolve_with(FileConfig::default())
        .unwrap();
    assert_eq!(s.metrics_listen.unwrap().to_string(), "0.0.0.0:9100");
    let err = cli(&["--metrics-listen", "nine"])
        .resolve_with(FileConfig::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("metrics_listen"), "{err}");
}

#[test]
fn a_config_file_error_does_not_quote_the_line() {
    // Review finding: toml's message quoted the offending line, and with it
    // a Redis password.
    let err = FileConfig::parse("redis_url = \"redis://telos:s3\"cret@h:1\"\n").unwrap_err();
    assert!(err.contains("line 1"), "{err}");
    assert!(!err.contains("s3") && !err.contains("cret"), "{err}");
}
