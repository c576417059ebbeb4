//! Live reconfiguration (`POST /v1/ops/reload`, SIGHUP; README "Configuration").
//!
//! ```text
//! config.toml ─► Config::load (validate) ─ bad ─► issues (key: reason); nothing changes
//!                      │ good
//!                      ├─ per (chain, submitter), on that chain's engine:
//!                      ├─ new submitters: build + check signers first (any failure rejects all)
//!                      ├─ changed settings ─► Engine::apply_settings (running actors, no restart)
//!                      ├─ added ─► Engine::add_submitter     removed ─► Engine::remove_submitter
//!                      ├─ chains added: connected (an endpoint on another chain id
//!                      │  rejects all), started, served; removed: no longer served,
//!                      │  drained (leases released, rows kept)
//!                      ├─ longest spend window ─► spend_ledger_horizon (the longer of
//!                      │  old and new while the actors switch; then the new one)
//!                      ├─ [[webhooks]] (secrets re-read) ─► Webhooks::apply
//!                      └─ keys that need a restart (restart_keys: node-level
//!                         sections, a running chain's endpoints, ingress_capacity) ─► reported
//! ```
//!
//! The running configuration keeps its node-level sections (they did not
//! take effect), so a later reload reports them again until the node
//! restarts. A chain that stays keeps its running settings too (a change of
//! its endpoints or timings needs a restart), except its `defaults`, which
//! are submitter settings; a chain added or removed takes effect at once.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::PathBuf,
    sync::Arc,
};

use alloy::primitives::Address;
use async_trait::async_trait;
use tokio::sync::Mutex;
use txmgr_actors::{node::SubmitterSpec, signer::build_signer, webhook::Webhooks};

use super::{ledger_retention::HorizonChange, restart_keys::restart_keys, ChainHost};
use crate::{
    config::{Config, ConfigError, ResolvedSubmitter},
    http::{Reload, ReloadReport},
};

/// Applies the configuration file to a running node's chains and engines.
pub struct Reloader {
    path: PathBuf,
    /// The chains running, where chains are added and removed.
    host: Arc<ChainHost>,
    webhooks: Webhooks,
    running: Mutex<Config>,
}

impl Reloader {
    /// A reloader for the node started with `config` from `path`, running
    /// the chains of `host`.
    pub fn new(path: PathBuf, host: Arc<ChainHost>, webhooks: Webhooks, config: Config) -> Self {
        Self {
            path,
            host,
            webhooks,
            running: Mutex::new(config),
        }
    }
}

/// The names of the chains of `config`.
fn chain_names(config: &Config) -> BTreeSet<String> {
    config
        .chains()
        .iter()
        .map(|chain| chain.name.to_owned())
        .collect()
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

/// Node-level sections take effect only at a restart: `new` keeps the
/// running ones, and what the submitters' settings derive from them. A
/// chain that stays keeps its running settings but for its `defaults`; a
/// chain added or removed is taken from `new` as it is.
fn keep_node_level(new: &mut Config, running: &Config) {
    new.node_id = running.node_id.clone();
    new.database = running.database.clone();
    new.http = running.http.clone();
    if let (Some(read), Some(kept)) = (&mut new.chain, &running.chain) {
        let defaults = read.defaults.take();
        *read = kept.clone();
        read.defaults = defaults;
    }
    for (name, read) in &mut new.chains {
        if let Some(kept) = running.chains.get(name) {
            let defaults = read.defaults.take();
            *read = kept.clone();
            read.defaults = defaults;
        }
    }
    new.lease = running.lease;
    new.node = running.node;
    new.auth = running.auth.clone();
    new.log = running.log.clone();
    new.telemetry = running.telemetry.clone();
    new.feed = running.feed;
    new.history = running.history;
}

/// The configuration key of the chain `name`: `chain` for the shorthand.
fn chain_key(config: &Config, name: &str) -> String {
    if config.chain.is_some() && name == crate::config::SHORTHAND_CHAIN_NAME {
        "chain".to_owned()
    } else {
        format!("chains.{name}")
    }
}

/// Drops the chain `name` from `config` (it did not start).
fn forget_chain(config: &mut Config, name: &str) {
    if config.chain.is_some() && name == crate::config::SHORTHAND_CHAIN_NAME {
        config.chain = None;
    } else {
        config.chains.remove(name);
    }
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
        let (old_chains, new_chains) = (chain_names(&running), chain_names(&new));
        let chains_added: Vec<String> = new_chains.difference(&old_chains).cloned().collect();
        let chains_removed: Vec<String> = old_chains.difference(&new_chains).cloned().collect();
        let changed_chains: BTreeSet<String> = chains_added
            .iter()
            .chain(&chains_removed)
            .cloned()
            .collect();
        let mut report = ReloadReport {
            restart_required: restart_keys(&running, &new, &changed_chains),
            ..ReloadReport::default()
        };
        keep_node_level(&mut new, &running);
        // Endpoints change only at a restart: private sending must work with
        // the running ones.
        let private = new.private_sends_issues();
        if !private.is_empty() {
            return Err(ConfigError { issues: private });
        }
        let several = running.chains().len() > 1 || new.chains().len() > 1;
        let old_subs = by_chain_and_address(&running);
        let new_subs = by_chain_and_address(&new);

        // Everything that can fail happens before anything is applied.
        let webhooks = new.resolved_webhooks()?;
        let mut added = Vec::new();
        for ((chain, address), resolved) in &new_subs {
            if old_subs.contains_key(&(chain.clone(), address.clone())) {
                continue;
            }
            // A chain being added starts its submitters itself.
            let (Some(named), Some(engine)) = (running.chain_named(chain), self.host.engine(chain))
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
            if old.settings == resolved.settings {
                continue;
            }
            if let Some(engine) = self.host.engine(chain) {
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
            // A chain removed drains as a whole.
            if new_subs.contains_key(&(chain.clone(), address.clone()))
                || chains_removed.contains(chain)
            {
                continue;
            }
            if let Some(engine) = self.host.engine(chain) {
                removed.push((
                    engine.clone(),
                    parse(address)?,
                    shown(several, chain, address),
                ));
            }
        }

        // Chains added are connected before anything changes: an endpoint
        // serving another chain id rejects the whole reload.
        let mut connected = Vec::new();
        for name in &chains_added {
            let Some(named) = new.chain_named(name) else {
                continue;
            };
            let chain =
                self.host.connect(&named).await.map_err(|err| {
                    ConfigError::single(chain_key(&new, name), format!("{err:#}"))
                })?;
            connected.push(chain);
        }

        // The spend ledger keeps the longer of the old and new windows
        // while the running actors switch; the new one once they have.
        let horizon = HorizonChange::between(&running, &new);
        horizon.widen(self.host.pool()).await?;

        // Removed first: a chain id may move to a chain of another name.
        for name in &chains_removed {
            self.host.remove(name, running.lease.duration).await;
            tracing::info!(target: "txmgr::reload", chain = %name, "chain removed: drained, its rows kept");
            report.chains_removed.push(name.clone());
        }
        for chain in connected {
            let name = chain.name().to_owned();
            match self.host.start(&new, chain).await {
                Ok(()) => {
                    tracing::info!(target: "txmgr::reload", chain = %name, "chain added");
                    report.chains_added.push(name);
                }
                Err(err) => {
                    // Not kept as running: the next reload tries again.
                    tracing::error!(target: "txmgr::reload", chain = %name, error = %format!("{err:#}"), "starting an added chain failed");
                    forget_chain(&mut new, &name);
                }
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
        horizon.settle(self.host.pool()).await;
        *running = new;
        tracing::info!(target: "txmgr::reload", updated = report.updated.len(), added = report.added.len(),
            removed = report.removed.len(), chains_added = ?report.chains_added, chains_removed = ?report.chains_removed,
            restart_required = ?report.restart_required, "configuration reloaded");
        Ok(report)
    }
}
