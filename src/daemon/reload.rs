//! Live reconfiguration (`POST /v1/ops/reload`, SIGHUP; README "Configuration").
//!
//! ```text
//! config.toml ─► Config::load (validate) ─ bad ─► issues (key: reason); nothing changes
//!                      │ good
//!                      ├─ per (chain, submitter), on that chain's engine:
//!                      ├─ new submitters: build + check signers first (any failure rejects all)
//!                      ├─ changed settings ─► Engine::apply_settings (running actors, no restart)
//!                      ├─ added ─► Engine::add_submitter     removed ─► Engine::remove_submitter
//!                      ├─ [[webhooks]] (secrets re-read) ─► Webhooks::apply
//!                      └─ node-level keys that differ ─► reported as needing a restart
//! ```
//!
//! The running configuration keeps its node-level sections (they did not
//! take effect), so a later reload reports them again until the node
//! restarts. The chains are node-level too (adding or removing one needs a
//! restart), except each chain's `defaults`, which are submitter settings.

use std::{collections::BTreeMap, path::PathBuf};

use alloy::primitives::Address;
use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::Mutex;
use txmgr_actors::{
    node::{Engine, SubmitterSpec},
    signer::build_signer,
    webhook::Webhooks,
};

use crate::{
    config::{Config, ConfigError, ResolvedSubmitter},
    http::{Reload, ReloadReport},
};

/// Sections that only take effect at start.
const NODE_LEVEL: &[&str] = &[
    "node_id", "database", "http", "chain", "chains", "lease", "node", "auth", "log", "feed",
];

/// Applies the configuration file to a running node's engines.
pub struct Reloader {
    path: PathBuf,
    /// `(chain name, its engine)` of every chain running.
    engines: Vec<(String, Engine)>,
    webhooks: Webhooks,
    running: Mutex<Config>,
}

impl Reloader {
    /// A reloader for the node started with `config` from `path`, running
    /// `engines` (`(chain name, engine)`).
    pub fn for_chains(
        path: PathBuf,
        engines: Vec<(String, Engine)>,
        webhooks: Webhooks,
        config: Config,
    ) -> Self {
        Self {
            path,
            engines,
            webhooks,
            running: Mutex::new(config),
        }
    }

    fn engine(&self, chain: &str) -> Option<&Engine> {
        self.engines
            .iter()
            .find(|(name, _)| name == chain)
            .map(|(_, engine)| engine)
    }
}

/// Every submitter of every chain, by `(chain, address)`.
fn by_chain_and_address(config: &Config) -> BTreeMap<(String, String), ResolvedSubmitter> {
    config
        .chains()
        .iter()
        .flat_map(|chain| config.resolved_submitters_on(chain.name))
        .map(|s| ((s.chain.clone(), s.address.clone()), s))
        .collect()
}

/// How a report names a submitter: its address, with the chain when the
/// node runs several.
fn shown(several: bool, chain: &str, address: &str) -> String {
    if several {
        format!("{chain}:{address}")
    } else {
        address.to_owned()
    }
}

/// Dotted paths of the leaves that differ between two JSON values.
fn changed_keys(prefix: &str, old: &Value, new: &Value, out: &mut Vec<String>) {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
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

/// Node-level keys that differ (names only: values may be secrets).
fn restart_keys(old: &Config, new: &Config) -> Vec<String> {
    let (Ok(Value::Object(old)), Ok(Value::Object(new))) =
        (serde_json::to_value(old), serde_json::to_value(new))
    else {
        return Vec::new();
    };
    let mut keys = Vec::new();
    for section in NODE_LEVEL {
        changed_keys(
            section,
            old.get(*section).unwrap_or(&Value::Null),
            new.get(*section).unwrap_or(&Value::Null),
            &mut keys,
        );
    }
    // A chain's `defaults` are submitter settings: applied, not restarted for.
    keys.retain(|key| !is_chain_defaults_key(key));
    keys
}

/// `chain.defaults…` or `chains.<name>.defaults…`.
fn is_chain_defaults_key(key: &str) -> bool {
    let rest = key.strip_prefix("chain.").or_else(|| {
        key.strip_prefix("chains.")
            .and_then(|r| r.split_once('.').map(|x| x.1))
    });
    rest.is_some_and(|r| r == "defaults" || r.starts_with("defaults."))
}

/// Node-level sections take effect only at a restart: `new` keeps the
/// running ones, and what the submitters' settings derive from them.
fn keep_node_level(new: &mut Config, running: &Config) {
    new.node_id = running.node_id.clone();
    new.database = running.database.clone();
    new.http = running.http.clone();
    // The running chains, with each one's `defaults` from the new file.
    let mut chain = running.chain.clone();
    let mut chains = running.chains.clone();
    if let (Some(kept), Some(read)) = (&mut chain, &new.chain) {
        kept.defaults.clone_from(&read.defaults);
    }
    for (name, kept) in &mut chains {
        kept.defaults = new.chains.get(name).and_then(|c| c.defaults.clone());
    }
    new.chain = chain;
    new.chains = chains;
    new.lease = running.lease;
    new.node = running.node;
    new.auth = running.auth.clone();
    new.log = running.log.clone();
}

fn parse(address: &str) -> Result<Address, ConfigError> {
    address
        .parse()
        .map_err(|_| ConfigError::single(format!("submitters.{address}"), "bad address"))
}

#[async_trait]
impl Reload for Reloader {
    async fn reload(&self) -> Result<ReloadReport, ConfigError> {
        let mut new = Config::load(&self.path)?;
        new.log_warnings();
        let mut running = self.running.lock().await;
        let mut report = ReloadReport {
            restart_required: restart_keys(&running, &new),
            ..ReloadReport::default()
        };
        keep_node_level(&mut new, &running);
        // Endpoints change only at a restart: private sending must work with
        // the running ones.
        let private = new.private_sends_issues();
        if !private.is_empty() {
            return Err(ConfigError { issues: private });
        }
        let several = running.chains().len() > 1;
        let old_subs = by_chain_and_address(&running);
        let new_subs = by_chain_and_address(&new);

        // Everything that can fail happens before anything is applied.
        let webhooks = new.resolved_webhooks()?;
        let mut added = Vec::new();
        for ((chain, address), resolved) in &new_subs {
            if old_subs.contains_key(&(chain.clone(), address.clone())) {
                continue;
            }
            let (Some(named), Some(engine)) = (running.chain_named(chain), self.engine(chain))
            else {
                continue;
            };
            let parsed = parse(address)?;
            let signer = build_signer(
                &resolved.signer,
                parsed,
                named.config.chain_id,
                named.config.rpc_timeout,
            )
            .await
            .map_err(|e| {
                ConfigError::single(format!("submitters.{address}.signer"), e.to_string())
            })?;
            let spec = SubmitterSpec {
                address: parsed,
                signer,
                settings: resolved.settings.clone(),
            };
            added.push((engine.clone(), shown(several, chain, address), spec));
        }
        let mut updates = Vec::new();
        for ((chain, address), resolved) in &new_subs {
            let Some(old) = old_subs.get(&(chain.clone(), address.clone())) else {
                continue;
            };
            if old.signer != resolved.signer && !report.signer_changed.contains(address) {
                report.signer_changed.push(address.clone());
            }
            if let (true, Some(engine)) = (old.settings != resolved.settings, self.engine(chain)) {
                let settings = resolved.settings.clone();
                updates.push((
                    engine.clone(),
                    parse(address)?,
                    shown(several, chain, address),
                    settings,
                ));
            }
        }
        let mut removed = Vec::new();
        for (chain, address) in old_subs.keys() {
            if new_subs.contains_key(&(chain.clone(), address.clone())) {
                continue;
            }
            if let Some(engine) = self.engine(chain) {
                removed.push((
                    engine.clone(),
                    parse(address)?,
                    shown(several, chain, address),
                ));
            }
        }

        for (engine, parsed, shown, settings) in updates {
            engine.apply_settings(parsed, settings);
            report.updated.push(shown);
        }
        for (engine, shown, spec) in added {
            report.added.push(shown);
            engine.add_submitter(spec);
        }
        for (engine, parsed, shown) in removed {
            engine.remove_submitter(parsed);
            report.removed.push(shown);
        }
        // A submitter whose signer changed keeps running with the old one.
        for address in &report.signer_changed {
            if let (Some(old), Some(entry)) = (
                running.submitters.get(address),
                new.submitters.get_mut(address),
            ) {
                entry.signer = old.signer.clone();
            }
        }
        if running.webhooks != new.webhooks {
            report.webhooks = new.webhooks.iter().map(|w| w.name.clone()).collect();
        }
        // Applied every time: a rotated secret (same file) takes effect too.
        self.webhooks.apply(webhooks);
        *running = new;
        tracing::info!(target: "txmgr::reload", updated = report.updated.len(), added = report.added.len(),
            removed = report.removed.len(), restart_required = ?report.restart_required, "configuration reloaded");
        Ok(report)
    }
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
}
