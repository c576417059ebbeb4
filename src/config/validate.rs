//! Semantic checks that serde cannot express: ranges, relations between
//! keys, address syntax and duplicates. Every check names the exact key.

use std::{collections::BTreeMap, time::Duration};

use super::{
    error::ConfigIssue, settings_checks::check_settings, url::check_url, Config, SubmitterConfig,
};

/// Checks an address is `0x` + 40 hex digits and returns it lower-cased.
pub fn check_address(addr: &str) -> Result<String, String> {
    let hex = addr.strip_prefix("0x").or_else(|| addr.strip_prefix("0X"));
    match hex {
        Some(h) if h.len() == 40 && h.chars().all(|c| c.is_ascii_hexdigit()) => {
            Ok(format!("0x{}", h.to_ascii_lowercase()))
        }
        _ => Err(format!(
            "invalid address {addr:?}: expected 0x followed by 40 hex digits"
        )),
    }
}

/// Checks a node id: 1 to 64 characters from `[A-Za-z0-9_.-]`.
pub fn check_node_id(id: &str) -> Result<(), String> {
    let ok = (1..=64).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid node id {id:?}: expected 1 to 64 characters of [A-Za-z0-9_.-]"
        ))
    }
}

/// Normalises `config` in place (lower-case addresses; with one chain, the
/// engine's `retry_backoff` from its `poll_interval`) and returns every
/// issue found.
pub(crate) fn normalise_and_validate(config: &mut Config) -> Vec<ConfigIssue> {
    let mut issues = Vec::new();
    if let Err(reason) = check_node_id(&config.node_id) {
        issues.push(ConfigIssue::new("node_id", reason));
    }
    // With one chain, `[defaults]` is what its submitters inherit, the
    // chain's retry backoff included (each chain's own is applied where a
    // submitter's settings are resolved on it).
    let only_backoff = match &config.chains()[..] {
        [only] => Some(only.config.retry_backoff()),
        _ => None,
    };
    if let Some(backoff) = only_backoff {
        config.defaults.retry_backoff = backoff;
    }
    check_sections(config, &mut issues);
    for chain in config.chains() {
        check_chain(&chain, &mut issues);
    }
    let chains: Vec<(String, u64)> = config
        .chains()
        .iter()
        .map(|c| (c.name.to_string(), c.config.chain_id))
        .collect();
    issues.extend(config.auth.normalise_and_validate(&chains));
    for (i, hook) in config.webhooks.iter_mut().enumerate() {
        for (j, entry) in hook.chains.iter_mut().flatten().enumerate() {
            match super::chains::chain_id_of(entry, &chains) {
                Ok(id) => *entry = id.to_string(),
                Err(reason) => issues.push(ConfigIssue::new(
                    format!("webhooks[{i}].chains[{j}]"),
                    reason,
                )),
            }
        }
    }
    if config.auth.tokens.is_empty() && !config.http.listen.ip().is_loopback() {
        issues.push(ConfigIssue::new(
            "http.listen",
            format!(
                "{} is not a loopback address; configure [[auth.tokens]] to listen on it",
                config.http.listen
            ),
        ));
    }

    let default_issues = check_settings(&config.defaults);
    for (field, reason) in &default_issues {
        issues.push(ConfigIssue::new(
            format!("defaults.{field}"),
            reason.clone(),
        ));
    }

    let (submitters, submitter_issues) =
        normalise_submitters(std::mem::take(&mut config.submitters));
    issues.extend(submitter_issues);
    config.submitters = submitters;
    issues.extend(super::chains::check(config));
    // A bad inherited value is reported once, where it is set: under
    // `defaults.`, then under the chain's `defaults.`, then the submitter's.
    let mut reported: Vec<(&str, String)> = default_issues;
    for chain in config.chains() {
        if let Some(overrides) = &chain.config.defaults {
            let settings = overrides.merged_settings(&config.defaults);
            for (field, reason) in check_settings(&settings) {
                if !reported.iter().any(|(f, r)| *f == field && *r == reason) {
                    let key = chain.key_of(&format!("defaults.{field}"));
                    issues.push(ConfigIssue::new(key, reason.clone()));
                    reported.push((field, reason));
                }
            }
        }
    }
    for (address, entry) in &config.submitters {
        let prefix = format!("submitters.{address}");
        issues.extend(super::signer::validate(
            &entry.signer,
            &format!("{prefix}.signer"),
            address,
        ));
        for chain in config.chains() {
            let Some(resolved) = config.submitter_on(chain.name, address) else {
                continue;
            };
            if let Some(issue) = super::chains::check_private_sends(&chain, &prefix, &resolved) {
                issues.push(issue);
            }
            for (field, reason) in check_settings(&resolved.settings) {
                if !reported.iter().any(|(f, r)| *f == field && *r == reason) {
                    let key = match entry.on.get(chain.name) {
                        Some(on) if on.has_overrides() => {
                            format!("{prefix}.on.{}.{field}", chain.name)
                        }
                        _ => format!("{prefix}.{field}"),
                    };
                    issues.push(ConfigIssue::new(key, reason.clone()));
                    reported.push((field, reason));
                }
            }
        }
    }
    issues.extend(super::signer::check_shared_pkcs11(
        config
            .submitters
            .iter()
            .map(|(address, entry)| (address.as_str(), &entry.signer)),
    ));
    issues.extend(super::funds::check_top_ups(config));
    issues.extend(super::webhooks::validate_webhooks(&mut config.webhooks));
    issues
}

/// Lower-cases the submitter keys; two keys naming the same address are an
/// error naming both spellings.
fn normalise_submitters(
    raw: BTreeMap<String, SubmitterConfig>,
) -> (BTreeMap<String, SubmitterConfig>, Vec<ConfigIssue>) {
    let mut issues = Vec::new();
    let mut out: BTreeMap<String, SubmitterConfig> = BTreeMap::new();
    let mut spelling: BTreeMap<String, String> = BTreeMap::new();
    for (key, mut entry) in raw {
        let address = match check_address(&key) {
            Ok(a) => a,
            Err(reason) => {
                issues.push(ConfigIssue::new(format!("submitters.{key}"), reason));
                continue;
            }
        };
        if let Some(first) = spelling.get(&address) {
            issues.push(ConfigIssue::new(
                format!("submitters.{key}"),
                format!(
                    "duplicate submitter: submitters.{first} and submitters.{key} are the same \
                     address (addresses are case-insensitive)"
                ),
            ));
            continue;
        }
        super::signer::normalise(&mut entry.signer);
        spelling.insert(address.clone(), key);
        out.insert(address, entry);
    }
    (out, issues)
}

/// A configured file must exist (its content is checked where it is used).
fn check_file(push: &mut impl FnMut(&str, String), key: &str, path: &std::path::Path) {
    if !path.is_file() {
        push(key, format!("{} is not a readable file", path.display()));
    }
}

fn check_sections(config: &Config, issues: &mut Vec<ConfigIssue>) {
    let mut push = |key: &str, reason: String| issues.push(ConfigIssue::new(key, reason));

    let db = &config.database;
    if let Err(reason) = check_url(&db.url, &["postgres", "postgresql"]) {
        push("database.url", reason);
    }
    if db.max_connections == 0 {
        push("database.max_connections", "must be >= 1".into());
    }
    positive(&mut push, "database.connect_timeout", db.connect_timeout);
    positive(
        &mut push,
        "database.statement_timeout",
        db.statement_timeout,
    );
    positive(&mut push, "database.lock_timeout", db.lock_timeout);
    positive(&mut push, "database.keepalive_idle", db.keepalive_idle);

    let http = &config.http;
    if http.body_limit_bytes == 0 {
        push("http.body_limit_bytes", "must be > 0".into());
    }
    if http.data_limit_bytes == 0 || http.data_limit_bytes > http.body_limit_bytes {
        push(
            "http.data_limit_bytes",
            "must be > 0 and <= http.body_limit_bytes".into(),
        );
    }
    positive(&mut push, "http.request_timeout", http.request_timeout);
    positive(&mut push, "http.max_valid_for", http.max_valid_for);
    if http.max_concurrent_requests == 0 {
        push("http.max_concurrent_requests", "must be >= 1".into());
    }
    if http.max_long_polls == 0 || http.max_long_polls > http.max_concurrent_requests {
        push(
            "http.max_long_polls",
            "must be >= 1 and <= http.max_concurrent_requests".into(),
        );
    }
    if http.page_max_bytes == 0 {
        push("http.page_max_bytes", "must be > 0".into());
    }
    if http.page_bytes_in_flight < http.page_max_bytes {
        push(
            "http.page_bytes_in_flight",
            "must be >= http.page_max_bytes (one page at least)".into(),
        );
    }
    positive(
        &mut push,
        "http.readiness_interval",
        http.readiness_interval,
    );
    if config.node.ingress_max_items == 0 {
        push("node.ingress_max_items", "must be >= 1".into());
    }
    if config.node.ingress_max_bytes < http.data_limit_bytes {
        push(
            "node.ingress_max_bytes",
            "must be >= http.data_limit_bytes (one largest create must fit)".into(),
        );
    }

    if let Some(tls) = &http.tls {
        check_file(&mut push, "http.tls.cert_file", &tls.cert_file);
        check_file(&mut push, "http.tls.key_file", &tls.key_file);
        if let Some(path) = &tls.client_ca_file {
            check_file(&mut push, "http.tls.client_ca_file", path);
        }
    }
    let lease = &config.lease;
    positive(&mut push, "lease.duration", lease.duration);
    positive(&mut push, "lease.renew_interval", lease.renew_interval);
    positive(
        &mut push,
        "lease.clock_skew_allowance",
        lease.clock_skew_allowance,
    );
    positive(
        &mut push,
        "lease.idle_release_after",
        lease.idle_release_after,
    );
    if !lease.renew_interval.is_zero() && lease.renew_interval >= lease.duration / 2 {
        push(
            "lease.renew_interval",
            format!(
                "must be less than lease.duration / 2 ({}), so one missed renewal does not lose \
                 the lease",
                humantime::format_duration(lease.duration / 2)
            ),
        );
    }
    if !lease.clock_skew_allowance.is_zero() && lease.clock_skew_allowance >= lease.duration {
        push(
            "lease.clock_skew_allowance",
            "must be less than lease.duration".into(),
        );
    }

    positive(
        &mut push,
        "node.heartbeat_interval",
        config.node.heartbeat_interval,
    );
    positive(
        &mut push,
        "node.discovery_interval",
        config.node.discovery_interval,
    );
    positive(
        &mut push,
        "node.rebalance_settle",
        config.node.rebalance_settle,
    );
    positive(
        &mut push,
        "node.rebalance_min_hold",
        config.node.rebalance_min_hold,
    );

    if config.log.level.trim().is_empty() {
        push("log.level", "must not be empty (e.g. \"info\")".into());
    }
}

/// The checks of one chain's table.
fn check_chain(named: &super::NamedChain<'_>, issues: &mut Vec<ConfigIssue>) {
    let mut push = |key: &str, reason: String| issues.push(ConfigIssue::new(key, reason));
    let key = |field: &str| named.key_of(field);
    let chain = named.config;
    super::endpoints::check_endpoints(&named.key, chain, &mut push);
    if let Some(path) = &chain.ca_file {
        check_file(&mut push, &key("ca_file"), path);
    }
    if chain.unhealthy_after_failures == 0 {
        push(&key("unhealthy_after_failures"), "must be >= 1".into());
    }
    positive(
        &mut push,
        &key("probe_max_backoff"),
        chain.probe_max_backoff,
    );
    if chain.chain_id == 0 || i64::try_from(chain.chain_id).is_err() {
        push(
            &key("chain_id"),
            "must be > 0 and fit a signed 64-bit integer".into(),
        );
    }
    positive(&mut push, &key("poll_interval"), chain.poll_interval);
    positive(&mut push, &key("rpc_timeout"), chain.rpc_timeout);
    positive(
        &mut push,
        &key("batch_refusal_backoff"),
        chain.batch_refusal_backoff,
    );
    positive(&mut push, &key("sweep_interval"), chain.sweep_interval);
    if !(1..=64).contains(&chain.receipt_workers) {
        push(
            &key("receipt_workers"),
            "must be between 1 and 64".to_owned(),
        );
    }
    if !(1..=64).contains(&chain.finality_workers) {
        push(
            &key("finality_workers"),
            "must be between 1 and 64".to_owned(),
        );
    }
    if !(1..=64).contains(&chain.resubmit_workers) {
        push(
            &key("resubmit_workers"),
            "must be between 1 and 64".to_owned(),
        );
    }
}

fn positive(push: &mut impl FnMut(&str, String), key: &str, d: Duration) {
    if d.is_zero() {
        push(key, "must be greater than zero".into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_check_normalises_case() {
        let a = "0xF39Fd6e51aad88F6F4ce6aB8827279cffFb92266";
        assert_eq!(check_address(a), Ok(a.to_ascii_lowercase()));
        assert!(check_address("f39fd6e51aad88f6f4ce6ab8827279cfffb92266").is_err());
        assert!(check_address("0xf39fd6e51aad88f6f4ce6ab8827279cfffb9226").is_err());
        assert!(check_address("0xg39fd6e51aad88f6f4ce6ab8827279cfffb92266").is_err());
    }

    #[test]
    fn node_id_charset_and_length() {
        assert!(check_node_id("node-a.1_b").is_ok());
        assert!(check_node_id("").is_err());
        assert!(check_node_id("a b").is_err());
        assert!(check_node_id(&"a".repeat(65)).is_err());
    }

    #[test]
    fn defaults_are_valid() {
        let defaults = txmgr_actors::submitter::SubmitterSettings::default();
        assert!(check_settings(&defaults).is_empty());
    }
}
