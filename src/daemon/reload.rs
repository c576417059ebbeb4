//! Live reconfiguration (`POST /v1/ops/reload`, SIGHUP; README "Configuration").
//!
//! ```text
//! config.toml ─► Config::load (validate) ─ bad ─► issues (key: reason); nothing changes
//!                      │ good
//!                      ├─ new submitters: build + check signers first (any failure rejects all)
//!                      ├─ changed settings ─► Engine::apply_settings (running actors, no restart)
//!                      ├─ added ─► Engine::add_submitter     removed ─► Engine::remove_submitter
//!                      ├─ [[webhooks]] (secrets re-read) ─► Webhooks::apply
//!                      └─ node-level keys that differ ─► reported as needing a restart
//! ```
//!
//! The running configuration keeps its node-level sections (they did not
//! take effect), so a later reload reports them again until the node restarts.

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
    "node_id", "database", "http", "chain", "lease", "node", "auth", "log", "feed",
];

/// Applies the configuration file to a running engine.
pub struct Reloader {
    path: PathBuf,
    engine: Engine,
    webhooks: Webhooks,
    running: Mutex<Config>,
}

impl Reloader {
    /// A reloader for the node started with `config` from `path`.
    pub fn new(path: PathBuf, engine: Engine, webhooks: Webhooks, config: Config) -> Self {
        Self {
            path,
            engine,
            webhooks,
            running: Mutex::new(config),
        }
    }
}

fn by_address(config: &Config) -> BTreeMap<String, ResolvedSubmitter> {
    config
        .resolved_submitters()
        .into_iter()
        .map(|s| (s.address.clone(), s))
        .collect()
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
    keys
}

/// Node-level sections take effect only at a restart: `new` keeps the
/// running ones, and what the submitters' settings derive from them.
fn keep_node_level(new: &mut Config, running: &Config) {
    new.node_id = running.node_id.clone();
    new.database = running.database.clone();
    new.http = running.http.clone();
    new.chain = running.chain.clone();
    new.lease = running.lease;
    new.node = running.node;
    new.auth = running.auth.clone();
    new.log = running.log.clone();
    new.defaults.retry_backoff = new.chain.retry_backoff();
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
        let old_subs = by_address(&running);
        let new_subs = by_address(&new);

        // Everything that can fail happens before anything is applied.
        let webhooks = new.resolved_webhooks()?;
        let mut added = Vec::new();
        for (address, resolved) in &new_subs {
            if old_subs.contains_key(address) {
                continue;
            }
            let parsed = parse(address)?;
            let signer = build_signer(
                &resolved.signer,
                parsed,
                running.chain.chain_id,
                running.chain.rpc_timeout,
            )
            .await
            .map_err(|e| {
                ConfigError::single(format!("submitters.{address}.signer"), e.to_string())
            })?;
            added.push(SubmitterSpec {
                address: parsed,
                signer,
                settings: resolved.settings.clone(),
            });
        }
        let mut updates = Vec::new();
        for (address, resolved) in &new_subs {
            if let Some(old) = old_subs.get(address) {
                if old.signer != resolved.signer {
                    report.signer_changed.push(address.clone());
                }
                if old.settings != resolved.settings {
                    updates.push((parse(address)?, address.clone(), resolved.settings.clone()));
                }
            }
        }
        let mut removed = Vec::new();
        for address in old_subs.keys() {
            if !new_subs.contains_key(address) {
                removed.push((parse(address)?, address.clone()));
            }
        }

        for (parsed, address, settings) in updates {
            self.engine.apply_settings(parsed, settings);
            report.updated.push(address);
        }
        for spec in added {
            report.added.push(format!("{:#x}", spec.address));
            self.engine.add_submitter(spec);
        }
        for (parsed, address) in removed {
            self.engine.remove_submitter(parsed);
            report.removed.push(address);
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
    fn changed_keys_name_leaves() {
        let old = serde_json::json!({"chain": {"rpc_url": "a", "poll_interval": "1s"}});
        let new = serde_json::json!({"chain": {"rpc_url": "b", "poll_interval": "1s"}});
        let mut out = Vec::new();
        changed_keys("", &old, &new, &mut out);
        assert_eq!(out, vec!["chain.rpc_url"]);
    }
}
