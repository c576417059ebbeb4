//! Which configuration keys a reload cannot apply (README "Operations",
//! Reload): the node-level sections, a running chain's endpoints and
//! timings, and `ingress_capacity` (each submitter's ingress queue is sized
//! when its handle is made). A reload reports the ones that changed as
//! `restart_required`; [`needs_restart`] answers for one key, so anything
//! that tells an operator "change X and reload" can be checked against it
//! (the alert runbooks are: `tests/it/rule_texts.rs`).

use std::collections::BTreeSet;

use serde_json::Value;

use crate::config::{Config, TOP_LEVEL_KEYS};

/// Top-level sections a reload applies. Every other section an environment
/// variable may set ([`TOP_LEVEL_KEYS`], the one list of sections) takes
/// effect only at start; `webhooks`, which no variable may set, is applied
/// by a reload too.
const RELOADED: &[&str] = &["defaults", "submitters"];

/// Whether `section` takes effect only at start.
fn node_level(section: &str) -> bool {
    TOP_LEVEL_KEYS.contains(&section) && !RELOADED.contains(&section)
}

/// The one per-submitter setting a reload does not apply to a running
/// submitter: its ingress queue keeps the capacity it was made with.
const FIXED_SETTING: &str = "ingress_capacity";

/// Whether a change of `key` (a dotted path such as `chain.rpc_url`,
/// `chains.<name>.rpc_urls`, `auth.tokens[].rate` or
/// `defaults.ingress_capacity`) takes effect only when the node restarts.
/// A chain added or removed as a whole is the exception a reload handles
/// ([`restart_keys`] leaves those out).
pub fn needs_restart(key: &str) -> bool {
    let section = key.split(['.', '[']).next().unwrap_or(key);
    let leaf = key.rsplit('.').next().unwrap_or(key);
    leaf == FIXED_SETTING || (node_level(section) && !is_chain_defaults_key(key))
}

/// Keys that differ between `old` and `new` and need a restart (names
/// only: values may be secrets), but for those of chains added or removed
/// (`changed_chains`, they apply now) and of submitters added or removed
/// (they start with the new values).
pub(super) fn restart_keys(
    old: &Config,
    new: &Config,
    changed_chains: &BTreeSet<String>,
) -> Vec<String> {
    let (Ok(old), Ok(new)) = (serde_json::to_value(old), serde_json::to_value(new)) else {
        return Vec::new();
    };
    let mut keys = Vec::new();
    changed_keys("", &old, &new, &mut keys);
    let in_both = |address: &str| {
        [&old, &new]
            .iter()
            .all(|config| config["submitters"].get(address).is_some())
    };
    keys.retain(|key| {
        let submitter_stays = key
            .strip_prefix("submitters.")
            .is_none_or(|rest| in_both(rest.split('.').next().unwrap_or(rest)));
        needs_restart(key) && submitter_stays && !is_chain_key_of(key, changed_chains)
    });
    keys
}

/// Dotted paths of the leaves that differ between two JSON values.
fn changed_keys(prefix: &str, old: &Value, new: &Value, out: &mut Vec<String>) {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                changed_keys(
                    &path,
                    a.get(key).unwrap_or(&Value::Null),
                    b.get(key).unwrap_or(&Value::Null),
                    out,
                );
            }
        }
        (a, b) if a != b => out.push(prefix.to_owned()),
        _ => {}
    }
}

/// A key of one of `chains` (`chain…` for the shorthand's `default`).
fn is_chain_key_of(key: &str, chains: &BTreeSet<String>) -> bool {
    if key == "chain" || key.starts_with("chain.") {
        return chains.contains(crate::config::SHORTHAND_CHAIN_NAME);
    }
    let Some(rest) = key.strip_prefix("chains.") else {
        return false;
    };
    let name = rest.split_once('.').map_or(rest, |(name, _)| name);
    chains.contains(name)
}

/// `chain.defaults…` or `chains.<name>.defaults…`: submitter settings,
/// applied by a reload.
fn is_chain_defaults_key(key: &str) -> bool {
    let rest = key.strip_prefix("chain.").or_else(|| {
        key.strip_prefix("chains.")
            .and_then(|r| r.split_once('.').map(|x| x.1))
    });
    rest.is_some_and(|r| r == "defaults" || r.starts_with("defaults."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_defaults_are_not_restart_keys() {
        assert!(is_chain_defaults_key("chain.defaults.max_in_flight"));
        assert!(is_chain_defaults_key("chains.base.defaults"));
        assert!(!is_chain_defaults_key("chains.base.poll_interval"));
        assert!(!is_chain_defaults_key("chains.defaults.poll_interval"));
    }

    #[test]
    fn changed_keys_name_leaves() {
        let old = serde_json::json!({"chain": {"rpc_url": "a", "poll_interval": "1s"}});
        let new = serde_json::json!({"chain": {"rpc_url": "b", "poll_interval": "1s"}});
        let mut out = Vec::new();
        changed_keys("", &old, &new, &mut out);
        assert_eq!(out, vec!["chain.rpc_url"]);
    }

    #[test]
    fn node_level_keys_and_ingress_capacity_need_a_restart_settings_do_not() {
        for key in [
            "chain.rpc_url",
            "chains.main.rpc_urls",
            "auth.tokens[].rate",
            "http.max_concurrent_requests",
            "lease.duration",
            "defaults.ingress_capacity",
            "chains.main.defaults.ingress_capacity",
            "submitters.0xabc.ingress_capacity",
        ] {
            assert!(needs_restart(key), "{key}");
        }
        for key in [
            "defaults.max_fee_per_gas_cap",
            "chains.main.defaults.max_in_flight",
            "submitters.0xabc.top_up",
            "submitters.0xabc.policy.spend_limit",
            "webhooks",
        ] {
            assert!(!needs_restart(key), "{key}");
        }
    }

    /// A configuration of one chain and one submitter, with `extra` keys.
    fn config(defaults: &str, submitters: &str) -> Config {
        let text = format!(
            "[database]\nurl = \"postgres://localhost/x\"\n[chain]\nrpc_url = \"http://127.0.0.1:8545\"\n\
             chain_id = 31337\n[defaults]\n{defaults}\n\
             [submitters.\"0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266\"]\nsigner = {{ kind = \"env\", env = \"K\" }}\n{submitters}"
        );
        Config::from_toml_str(&text, std::iter::empty()).expect("valid")
    }

    #[test]
    fn a_changed_ingress_capacity_is_reported_a_new_submitters_is_not() {
        let running = config("ingress_capacity = 100", "");
        let reloaded = config("ingress_capacity = 200\nmax_in_flight = 4", "");
        assert_eq!(
            restart_keys(&running, &reloaded, &BTreeSet::new()),
            vec!["defaults.ingress_capacity"]
        );
        let added = config(
            "ingress_capacity = 100",
            "[submitters.\"0x70997970c51812dc3a010c7d01b50e0d17dc79c8\"]\n\
             signer = { kind = \"env\", env = \"K2\" }\ningress_capacity = 5\n",
        );
        assert!(restart_keys(&running, &added, &BTreeSet::new()).is_empty());
    }
}
