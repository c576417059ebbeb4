//! `TXMGR_…` environment overrides.

use std::time::Duration;

use txmgr::config::Config;

use super::{assert_rejects_with_env, env, shipped_path, BASE, DEV};

#[test]
fn signer_key_variable_is_not_config() {
    let vars = env(&[
        ("TXMGR_DEV_PRIVATE_KEY", "0xac09"),
        ("TXMGR_UNRELATED", "x"),
    ]);
    Config::load_with_env(&shipped_path(), vars).expect("non-config TXMGR_ vars are ignored");
}

#[test]
fn env_overrides_file_values() {
    let vars = env(&[
        ("TXMGR_LEASE__DURATION", "20s"),
        ("TXMGR_NODE_ID", "n2"),
        (
            "TXMGR_DATABASE__URL",
            "postgres://u:pw@db:5432/x?sslmode=verify-full",
        ),
        ("TXMGR_DEFAULTS__GAS_BUMP__ENABLED", "true"),
        (
            "TXMGR_SUBMITTERS__0XF39FD6E51AAD88F6F4CE6AB8827279CFFFB92266__MAX_IN_FLIGHT",
            "3",
        ),
    ]);
    let config = Config::load_with_env(&shipped_path(), vars).expect("overrides");
    assert_eq!(config.lease.duration, Duration::from_secs(20));
    assert_eq!(config.node_id, "n2");
    assert_eq!(
        config.database.url,
        "postgres://u:pw@db:5432/x?sslmode=verify-full"
    );
    assert!(config.defaults.gas_bump.enabled);
    assert_eq!(
        config.submitter(DEV).expect("dev").settings.max_in_flight,
        3
    );
}

#[test]
fn env_string_keys_are_not_parsed_as_numbers() {
    let vars = env(&[("TXMGR_NODE_ID", "7"), ("TXMGR_LOG__LEVEL", "1")]);
    let config = Config::from_toml_str(BASE, vars).expect("numeric-looking strings");
    assert_eq!(config.node_id, "7");
    assert_eq!(config.log.level, "1");
}

#[test]
fn env_override_reaches_a_checksummed_file_key() {
    let text = BASE.replace(DEV, "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266");
    let vars = env(&[(
        &format!("TXMGR_SUBMITTERS__{}__BATCH_SIZE", DEV.to_uppercase()),
        "7",
    )]);
    let config = Config::from_toml_str(&text, vars).expect("one submitter, not a duplicate");
    assert_eq!(config.submitters.len(), 1);
    assert_eq!(config.submitter(DEV).expect("dev").settings.batch_size, 7);
}

#[test]
fn env_with_bad_value_names_the_key_and_variable() {
    let err = assert_rejects_with_env(
        BASE,
        env(&[("TXMGR_LEASE__DURATION", "soon")]),
        "lease.duration",
    );
    assert!(err.to_string().contains("TXMGR_LEASE__DURATION"), "{err}");
    assert_rejects_with_env(
        BASE,
        env(&[("TXMGR_LEASE__DURATON", "5s")]),
        "lease.duraton",
    );
    assert_rejects_with_env(
        BASE,
        env(&[("TXMGR_LEASE__RENEW_INTERVAL", "9s")]),
        "lease.renew_interval",
    );
}

#[test]
fn a_webhooks_variable_is_refused_naming_it_not_ignored() {
    for name in ["TXMGR_WEBHOOKS__0__URL", "TXMGR_WEBHOOKS"] {
        let err = assert_rejects_with_env(BASE, env(&[(name, "http://127.0.0.1:1/")]), name);
        assert!(err.to_string().contains("[[webhooks]]"), "{err}");
    }
    // A secret variable that merely starts alike is not configuration.
    Config::from_toml_str(BASE, env(&[("TXMGR_WEBHOOKS_SECRET", "s")]))
        .expect("not a configuration variable");
}
