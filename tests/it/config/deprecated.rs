//! Renamed keys: the old name still loads, with a warning naming the new one.

use std::time::Duration;

use txmgr::config::RENAMED_KEYS;

use super::{assert_rejects, assert_rejects_with_env, env, no_env, parse, shipped_path, BASE};

const OLD: &str = "chain.stale_receipt_timeout";

#[test]
fn stale_receipt_timeout_is_read_as_sweep_interval_with_a_warning() {
    let text = BASE.replace(
        "chain_id = 31337\n",
        "chain_id = 31337\nstale_receipt_timeout = \"7s\"\n",
    );
    let config = parse(&text).expect("the old name still loads");
    assert_eq!(
        config.chain.as_ref().expect("[chain]").sweep_interval,
        Duration::from_secs(7)
    );
    let [warning] = config.warnings() else {
        panic!("one warning expected: {:?}", config.warnings());
    };
    assert_eq!(warning.key, OLD);
    assert!(
        warning.reason.contains("deprecated") && warning.reason.contains("chain.sweep_interval"),
        "{warning}"
    );

    // The effective configuration is shown under the new name only, and
    // loads again without a warning.
    let shown = config.redacted_toml();
    assert!(shown.contains("sweep_interval = \"7s\""), "{shown}");
    assert!(!shown.contains("stale_receipt_timeout"), "{shown}");
    let back = parse(&shown).expect("printed config parses again");
    assert_eq!(
        back.chain.as_ref().expect("[chain]").sweep_interval,
        Duration::from_secs(7)
    );
    assert!(back.warnings().is_empty(), "{:?}", back.warnings());
}

#[test]
fn the_old_name_from_the_environment_names_the_variable() {
    let config = txmgr::config::Config::from_toml_str(
        BASE,
        env(&[("TXMGR_CHAIN__STALE_RECEIPT_TIMEOUT", "9s")]),
    )
    .expect("the old name still loads");
    assert_eq!(
        config.chain.as_ref().expect("[chain]").sweep_interval,
        Duration::from_secs(9)
    );
    let [warning] = config.warnings() else {
        panic!("one warning expected: {:?}", config.warnings());
    };
    assert_eq!(warning.key, OLD);
    assert!(
        warning
            .reason
            .contains("TXMGR_CHAIN__STALE_RECEIPT_TIMEOUT"),
        "{warning}"
    );
}

#[test]
fn both_names_at_once_are_refused() {
    let text = BASE.replace(
        "chain_id = 31337\n",
        "chain_id = 31337\nstale_receipt_timeout = \"7s\"\nsweep_interval = \"8s\"\n",
    );
    let err = assert_rejects(&text, OLD);
    assert!(err.to_string().contains("chain.sweep_interval"), "{err}");
    assert_rejects_with_env(
        BASE,
        env(&[
            ("TXMGR_CHAIN__STALE_RECEIPT_TIMEOUT", "7s"),
            ("TXMGR_CHAIN__SWEEP_INTERVAL", "8s"),
        ]),
        OLD,
    );
}

#[test]
fn a_bad_value_under_the_old_name_names_the_old_key() {
    let text = BASE.replace(
        "chain_id = 31337\n",
        "chain_id = 31337\nstale_receipt_timeout = \"soon\"\n",
    );
    assert_rejects(&text, OLD);
}

#[test]
fn current_names_load_without_warnings() {
    let shipped = txmgr::config::Config::load_with_env(&shipped_path(), no_env())
        .expect("shipped config.toml");
    assert!(shipped.warnings().is_empty(), "{:?}", shipped.warnings());
    let shipped_text = std::fs::read_to_string(shipped_path()).expect("read config.toml");
    for (old, new) in RENAMED_KEYS {
        let leaf = |key: &str| key.rsplit('.').next().map(str::to_owned);
        let (old, new) = (leaf(old).expect("leaf"), leaf(new).expect("leaf"));
        assert!(
            shipped_text.contains(&format!("\n{new} = ")),
            "the shipped file documents {new}"
        );
        assert!(
            !shipped_text.contains(&format!("\n{old} = ")),
            "the shipped file uses the old name {old}"
        );
    }
}
