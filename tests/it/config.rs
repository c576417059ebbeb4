//! Configuration loading: the shipped `config.toml`, environment overrides,
//! and one test per class of bad configuration, each asserting the exact key
//! the error names. The environment is always passed explicitly, so tests do
//! not race on the process environment.

mod chains;
mod deprecated;
mod env;
mod shipped_docs;
mod submitters;

use std::path::Path;

use txmgr::config::{Config, ConfigError, SignerSpec, DEFAULT_LEASE_DURATION};

const DEV: &str = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266";
const OTHER: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";

/// A small valid configuration; tests append to it.
const BASE: &str = r#"
[database]
url = "postgres://postgres:hunter2@127.0.0.1:5432/txmgr"
[chain]
rpc_url = "http://127.0.0.1:8545"
chain_id = 31337
[submitters."0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"]
signer = { kind = "env", env = "TXMGR_DEV_PRIVATE_KEY" }
"#;

fn no_env() -> Vec<(String, String)> {
    Vec::new()
}

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::from_toml_str(text, no_env())
}

/// Parses `text`, expects failure, and asserts one issue names `key`.
#[track_caller]
fn assert_rejects(text: &str, key: &str) -> ConfigError {
    assert_rejects_with_env(text, env(&[]), key)
}

#[track_caller]
fn assert_rejects_with_env(text: &str, vars: Vec<(String, String)>, key: &str) -> ConfigError {
    match Config::from_toml_str(text, vars) {
        Ok(_) => panic!("config was accepted, expected an error at {key}"),
        Err(err) => {
            assert!(
                err.has_key(key),
                "expected an issue at {key:?}, got:\n{err}"
            );
            assert!(err
                .to_string()
                .lines()
                .any(|l| l.starts_with(&format!("{key}: "))));
            err
        }
    }
}

fn shipped_path() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("config.toml")
}

#[test]
fn shipped_config_parses_and_validates() {
    let config = Config::load_with_env(&shipped_path(), no_env()).expect("shipped config.toml");
    assert_eq!(
        config.database.url,
        "postgres://postgres@127.0.0.1:5432/txmgr"
    );
    assert_eq!(
        config.chain.as_ref().expect("[chain]").rpc_url.as_deref(),
        Some("http://127.0.0.1:8545")
    );
    assert_eq!(config.chain.as_ref().expect("[chain]").chain_id, 31337);
    assert_eq!(config.lease.duration, DEFAULT_LEASE_DURATION);
    assert!(config.node_id.starts_with("node-"));
    let subs = config.resolved_submitters();
    assert_eq!(subs.len(), 1);
    assert_eq!(subs[0].address, DEV);
    assert_eq!(subs[0].signer, SignerSpec::env("TXMGR_DEV_PRIVATE_KEY"));
    assert_eq!(subs[0].settings, config.defaults);
}

#[test]
fn shipped_config_values_equal_the_built_in_defaults() {
    // The file documents the defaults, so it must not drift from the code.
    let config = Config::load_with_env(&shipped_path(), no_env()).expect("shipped config.toml");
    let bare = parse(BASE).expect("base");
    assert_eq!(config.defaults, bare.defaults);
    assert_eq!(config.http, bare.http);
    assert_eq!(config.lease, bare.lease);
    assert_eq!(config.node, bare.node);
    assert_eq!(config.log, bare.log);
    assert_eq!(config.feed, bare.feed);
    assert_eq!(
        config.chain.as_ref().expect("[chain]").poll_interval,
        bare.chain.as_ref().expect("[chain]").poll_interval
    );
    assert_eq!(
        config.database.max_connections,
        bare.database.max_connections
    );
}

#[test]
fn missing_file_is_reported() {
    let err = Config::load_with_env(Path::new("/nonexistent/txmgr.toml"), no_env())
        .expect_err("must be rejected");
    assert!(err.to_string().contains("/nonexistent/txmgr.toml"));
}

#[test]
fn bad_duration_names_the_key() {
    assert_rejects(
        &format!("{BASE}\n[lease]\nduration = \"ten seconds\"\n"),
        "lease.duration",
    );
    assert_rejects(
        &format!("{BASE}\n[defaults]\nstuck_after = 30\n"),
        "defaults.stuck_after",
    );
}

#[test]
fn unknown_top_level_key_is_rejected() {
    assert_rejects(&format!("bogus = 1\n{BASE}"), "bogus");
}

#[test]
fn unknown_nested_key_is_rejected() {
    assert_rejects(
        &format!("{BASE}\n[lease]\nduraton = \"10s\"\n"),
        "lease.duraton",
    );
    assert_rejects(
        &format!("{BASE}\n[defaults.gas_bump]\nfactor = 1.2\n"),
        "defaults.gas_bump.factor",
    );
}

#[test]
fn unknown_key_inside_submitter_is_rejected() {
    let text = format!("{BASE}max_inflight = 2\n");
    assert_rejects(&text, &format!("submitters.{DEV}.max_inflight"));
    let text = format!("{BASE}gas_bump = {{ enabled = true, factor = 2.0 }}\n");
    assert_rejects(&text, &format!("submitters.{DEV}.gas_bump.factor"));
}

#[test]
fn renew_interval_must_be_below_half_the_duration() {
    let text = format!("{BASE}\n[lease]\nduration = \"10s\"\nrenew_interval = \"5s\"\n");
    let err = assert_rejects(&text, "lease.renew_interval");
    assert_eq!(err.issues.len(), 1, "{err}");
    let ok = format!("{BASE}\n[lease]\nduration = \"10s\"\nrenew_interval = \"4999ms\"\n");
    parse(&ok).expect("just below half");
}

#[test]
fn bad_enum_values_are_rejected() {
    assert_rejects(
        &format!("{BASE}advance_after = \"final\"\n"),
        &format!("submitters.{DEV}.advance_after"),
    );
    assert_rejects(
        &format!("{BASE}\n[defaults]\nstuck_policy = \"panic\"\n"),
        "defaults.stuck_policy",
    );
    assert_rejects(
        &format!("{BASE}\n[defaults]\nfinality = \"latest\"\n"),
        "defaults.finality",
    );
    assert_rejects(&format!("{BASE}\n[log]\nformat = \"xml\"\n"), "log.format");
    let text = format!(
        "{BASE}\n[[auth.tokens]]\nname = \"a\"\nrole = \"admin\"\nsha256 = \"{}\"\n",
        "a".repeat(64)
    );
    let err = parse(&text).expect_err("must be rejected");
    assert!(
        err.issues
            .iter()
            .any(|i| i.key.starts_with("auth.tokens") && i.key.ends_with("role")),
        "{err}"
    );
}

#[test]
fn toml_syntax_error_is_one_line() {
    let err = parse(&format!(
        "{BASE}
foo = [1\n"
    ))
    .expect_err("must be rejected");
    assert_eq!(err.issues.len(), 1);
    assert_eq!(err.to_string().lines().count(), 1, "{err}");
    assert!(err.to_string().contains("line"), "{err}");
}

#[test]
fn bad_amounts_and_caps_are_rejected() {
    assert_rejects(
        &format!("{BASE}\n[defaults]\nmax_fee_per_gas_cap = \"100 gwei\"\n"),
        "defaults.max_fee_per_gas_cap",
    );
    assert_rejects(
        &format!("{BASE}\n[defaults]\ngas_price_cap = -1\n"),
        "defaults.gas_price_cap",
    );
    assert_rejects(
        &format!("{BASE}\n[defaults]\ngas_price_cap = 0\n"),
        "defaults.gas_price_cap",
    );
    assert_rejects(
        &format!("{BASE}max_fee_per_gas_cap = \"0xzz\"\n"),
        &format!("submitters.{DEV}.max_fee_per_gas_cap"),
    );
    let text = format!(
        "{BASE}\n[defaults]\nmax_fee_per_gas_cap = 10\nmax_priority_fee_per_gas_cap = 11\n"
    );
    assert_rejects(&text, "defaults.max_priority_fee_per_gas_cap");
}

#[test]
fn amounts_accept_integer_decimal_and_hex() {
    let text = format!(
        "{BASE}max_fee_per_gas_cap = \"0x174876e800\"\n\n[defaults]\nmax_fee_per_gas_cap = 100000000000\n\
         gas_price_cap = \"1000000000000000000000000\"\n"
    );
    let config = parse(&text).expect("amounts");
    assert_eq!(config.defaults.max_fee_per_gas_cap, Some(100_000_000_000));
    assert_eq!(config.defaults.gas_price_cap, Some(10u128.pow(24)));
    let dev = config.submitter(DEV).expect("dev");
    assert_eq!(dev.settings.max_fee_per_gas_cap, Some(100_000_000_000));
}

#[test]
fn bump_multiplier_below_minimum_is_rejected_when_enabled() {
    let low = format!("{BASE}\n[defaults.gas_bump]\nenabled = true\nmultiplier = 1.05\n");
    assert_rejects(&low, "defaults.gas_bump.multiplier");
    let disabled = format!("{BASE}\n[defaults.gas_bump]\nenabled = false\nmultiplier = 1.05\n");
    parse(&disabled).expect("low multiplier is fine while disabled");
    // Enabled by the submitter, multiplier inherited: the submitter is named.
    let inherited = format!(
        "{BASE}gas_bump = {{ enabled = true }}\n\n[defaults.gas_bump]\nmultiplier = 1.05\n"
    );
    assert_rejects(&inherited, &format!("submitters.{DEV}.gas_bump.multiplier"));
}

#[test]
fn range_checks_name_the_key() {
    assert_rejects(
        &format!("{BASE}max_in_flight = 0\n"),
        &format!("submitters.{DEV}.max_in_flight"),
    );
    assert_rejects(
        &format!("{BASE}\n[defaults]\nbatch_size = 1001\n"),
        "defaults.batch_size",
    );
    assert_rejects(
        &format!("{BASE}\n[defaults]\nfinality = {{ confirmations = 0 }}\n"),
        "defaults.finality",
    );
    assert_rejects(
        &format!("{BASE}\n[defaults]\ngas_limit_margin = 0.9\n"),
        "defaults.gas_limit_margin",
    );
    assert_rejects(
        &BASE.replace("chain_id = 31337", "chain_id = 0"),
        "chain.chain_id",
    );
    assert_rejects(&format!("node_id = \"bad id\"\n{BASE}"), "node_id");
    assert_rejects(
        &format!("{BASE}\n[lease]\nclock_skew_allowance = \"10s\"\n"),
        "lease.clock_skew_allowance",
    );
}

#[test]
fn missing_required_section_is_named() {
    assert_rejects(
        "[chain]\nrpc_url = \"http://x\"\nchain_id = 1\n",
        "database",
    );
    assert_rejects(&BASE.replace("chain_id = 31337", ""), "chain.chain_id");
}

#[test]
fn non_loopback_listen_requires_tokens() {
    let text = format!("{BASE}\n[http]\nlisten = \"0.0.0.0:8080\"\n");
    assert_rejects(&text, "http.listen");
    let with_token = format!(
        "{text}\n[[auth.tokens]]\nname = \"ops\"\nrole = \"ops\"\nsha256 = \"{}\"\n",
        "AB".repeat(32)
    );
    let config = parse(&with_token).expect("tokens configured");
    assert_eq!(config.auth.tokens[0].sha256, "ab".repeat(32));
}

#[test]
fn duplicate_token_names_and_bad_hash_are_rejected() {
    let token = |name: &str, hash: &str| {
        format!("\n[[auth.tokens]]\nname = \"{name}\"\nrole = \"client\"\nsha256 = \"{hash}\"\n")
    };
    let text = format!("{BASE}{}{}", token("a", &"0".repeat(64)), token("a", "abc"));
    let err = assert_rejects(&text, "auth.tokens.1.name");
    assert!(err.has_key("auth.tokens.1.sha256"), "{err}");
}

#[test]
fn redacted_toml_hides_the_password_and_round_trips() {
    let config = parse(BASE).expect("base");
    let shown = config.redacted_toml();
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(
        shown.contains("postgres://postgres:***@127.0.0.1:5432/txmgr"),
        "{shown}"
    );
    assert!(!format!("{config:?}").contains("hunter2"));
    let back = parse(&shown).expect("printed config parses again");
    assert_eq!(back.defaults, config.defaults);
    assert_eq!(back.submitters, config.submitters);
    assert_eq!(back.lease, config.lease);
}

#[test]
fn every_issue_is_reported_at_once() {
    let text = format!("{BASE}max_in_flight = 0\n\n[lease]\nrenew_interval = \"9s\"\n\n[defaults]\nbatch_size = 0\n");
    let err = parse(&text).expect_err("must be rejected");
    assert!(
        err.has_key("lease.renew_interval") && err.has_key("defaults.batch_size"),
        "{err}"
    );
    assert!(
        err.has_key(&format!("submitters.{DEV}.max_in_flight")),
        "{err}"
    );
    assert_eq!(err.to_string().lines().count(), err.issues.len());
}
