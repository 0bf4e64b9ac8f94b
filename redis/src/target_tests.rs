use super::*;

#[test]
fn redact_hides_the_password_of_user_and_password() {
    assert_eq!(
        redact("redis://telos:s3cret@10.0.0.5:6380/2"),
        "redis://telos:***@10.0.0.5:6380/2"
    );
}

#[test]
fn redact_hides_a_password_without_user() {
    assert_eq!(
        redact("redis://:s3cret@127.0.0.1:6379"),
        "redis://:***@127.0.0.1:6379"
    );
}

#[test]
fn redact_leaves_a_url_without_credentials_as_it_is() {
    for url in [
        "redis://127.0.0.1:6379/",
        "unix:///run/redis.sock?db=1",
        "redis://h:1/?protocol=resp3",
        "not a url",
    ] {
        assert_eq!(redact(url), url);
    }
}

#[test]
fn redact_hides_the_password_of_rediss_and_unix_urls() {
    assert_eq!(
        redact("rediss://telos:s3cret@redis.internal:6380/0"),
        "rediss://telos:***@redis.internal:6380/0"
    );
    assert_eq!(
        redact("unix:///run/redis.sock?user=telos&pass=s3cret&db=1"),
        "unix:///run/redis.sock?user=telos&pass=***&db=1"
    );
}

#[test]
fn redact_hides_a_password_too_broken_to_parse() {
    for url in [
        "redis://telos:s3/cr@et@host:6379",
        "redis://telos:s3?cret@host:6379",
    ] {
        let shown = redact(url);
        assert!(!shown.contains("s3"), "{shown}");
        assert!(shown.ends_with("@host:6379"), "{shown}");
    }
}

#[test]
fn display_and_debug_never_show_the_password() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pw");
    std::fs::write(&file, "from-file\n").unwrap();
    let target = RedisTarget::from_files("redis://telos:in-url@h:1/", Some(&file), None).unwrap();
    for shown in [target.to_string(), format!("{target:?}")] {
        assert!(
            !shown.contains("in-url") && !shown.contains("from-file"),
            "{shown}"
        );
    }
}

#[test]
fn the_password_file_loses_its_newline_and_names_its_path_when_unreadable() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pw");
    std::fs::write(&file, "p w\n").unwrap();
    assert_eq!(read_password(&file).unwrap(), "p w");
    std::fs::write(&file, "\n").unwrap();
    assert!(matches!(
        read_password(&file),
        Err(TargetError::EmptyPasswordFile { .. })
    ));
    let missing = dir.path().join("missing");
    let err = RedisTarget::from_files("redis://h:1", Some(&missing), None)
        .unwrap_err()
        .to_string();
    assert!(err.contains(&missing.display().to_string()), "{err}");
}

#[test]
fn a_ca_needs_a_rediss_url() {
    let err =
        RedisTarget::from_files("redis://h:1", None, Some(Path::new("/nonexistent"))).unwrap_err();
    assert!(matches!(err, TargetError::CaWithoutTls { .. }), "{err}");
}

#[test]
fn redact_hides_a_password_in_a_url_without_a_valid_scheme() {
    // Review finding: a typo in the scheme printed the URL whole.
    for (url, shown) in [
        ("telos:s3cret@127.0.0.1:6391", "telos:***@127.0.0.1:6391"),
        ("redis:/telos:s3cret@h:1", "redis:***@h:1"),
        (":s3cret@h:1", ":***@h:1"),
    ] {
        assert_eq!(redact(url), shown, "{url}");
        assert!(!redact(url).contains("s3cret"));
    }
}

#[test]
fn redact_hides_a_password_typed_without_its_colon_or_in_the_query() {
    // Issue 18: `redis://SECRET@host` (the colon forgotten) reads as a user
    // name, and `?password=` is no field of a redis URL: both were printed.
    for (url, shown) in [
        ("redis://s3cret@h:1/", "redis://***@h:1/"),
        ("rediss://s3cret@h:1/0", "rediss://***@h:1/0"),
        ("redis://h:1/?password=s3cret", "redis://h:1/?password=***"),
        (
            "redis://h:1/0?db=2&password=s3cret&x",
            "redis://h:1/0?db=2&password=***&***",
        ),
        ("redis://h:1/?s3cret", "redis://h:1/?***"),
        (
            "redis://u@h:1/?pass=s3cret&user=u",
            "redis://***@h:1/?pass=***&user=u",
        ),
    ] {
        assert_eq!(redact(url), shown, "{url}");
    }
}

#[test]
fn a_lone_user_is_shown_when_the_password_comes_from_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pw");
    std::fs::write(&file, "from-file\n").unwrap();
    let with_file = RedisTarget::from_files("redis://telos@h:1/", Some(&file), None).unwrap();
    assert_eq!(with_file.redacted(), "redis://telos@h:1/");
    let without = RedisTarget::new("redis://telos@h:1/");
    assert_eq!(without.redacted(), "redis://***@h:1/");
}

#[test]
fn redact_hides_a_password_typed_without_the_host() {
    // `user:password` with no `@host`: parsed as a host and a port that is
    // not a number, it was printed whole.
    assert_eq!(redact("redis://telos:SECRET"), "redis://telos:***");
    assert_eq!(redact("redis://telos:SECRET/0"), "redis://telos:***/0");
    assert_eq!(redact("telos:SECRET"), "telos:***");
    assert_eq!(
        redact("redis://127.0.0.1:6379/0"),
        "redis://127.0.0.1:6379/0"
    );
    assert_eq!(redact("redis://[::1]:6379"), "redis://[::1]:6379");
}
