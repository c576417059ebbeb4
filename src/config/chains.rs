//! Several chains in one deployment: `[chains.<name>]` tables (or the
//! one-chain shorthand `[chain]`, named `default`), which submitter sends on
//! which chain, and the precedence of the settings a submitter runs with on
//! one chain:
//!
//! ```text
//! built-in < [defaults] < [chains.X].defaults < [submitters.A] < [submitters.A.on.X]
//! ```

use std::collections::{BTreeMap, HashMap};

use super::{error::ConfigIssue, ChainConfig, Config, ResolvedSubmitter, SubmitterConfig};

/// The name of the chain configured with the `[chain]` shorthand.
pub const SHORTHAND_CHAIN_NAME: &str = "default";

/// One configured chain: its name (used in logs, metrics and ops views),
/// the key its settings are read under, and its settings.
#[derive(Debug, Clone)]
pub struct NamedChain<'a> {
    /// `[chains.<name>]`, or `default` for `[chain]`.
    pub name: &'a str,
    /// `chain` for the shorthand, `chains.<name>` otherwise: the prefix of
    /// every key named in an error about this chain.
    pub key: String,
    /// Its settings.
    pub config: &'a ChainConfig,
}

impl NamedChain<'_> {
    /// A key of this chain's table, as errors name it.
    pub fn key_of(&self, field: &str) -> String {
        format!("{}.{field}", self.key)
    }
}

impl Config {
    /// Every configured chain, `[chain]` or `[chains.*]` in name order.
    pub fn chains(&self) -> Vec<NamedChain<'_>> {
        match &self.chain {
            Some(config) => vec![NamedChain {
                name: SHORTHAND_CHAIN_NAME,
                key: "chain".to_string(),
                config,
            }],
            None => self
                .chains
                .iter()
                .map(|(name, config)| NamedChain {
                    name,
                    key: format!("chains.{name}"),
                    config,
                })
                .collect(),
        }
    }

    /// The chain named `name`, if configured.
    pub fn chain_named(&self, name: &str) -> Option<NamedChain<'_>> {
        self.chains().into_iter().find(|c| c.name == name)
    }

    /// The chain with this chain id, if configured.
    pub fn chain_with_id(&self, chain_id: u64) -> Option<NamedChain<'_>> {
        self.chains()
            .into_iter()
            .find(|c| c.config.chain_id == chain_id)
    }

    /// The first chain (the only one with `[chain]`).
    pub fn first_chain(&self) -> Option<NamedChain<'_>> {
        self.chains().into_iter().next()
    }

    /// Whether the submitter entry sends on `chain` (every chain when its
    /// `chains` is unset).
    pub fn sends_on(entry: &SubmitterConfig, chain: &str) -> bool {
        entry
            .chains
            .as_ref()
            .is_none_or(|names| names.iter().any(|n| n == chain))
    }

    /// The settings of submitter `address` (any case) on `chain`, or `None`
    /// when it is not configured there.
    pub fn submitter_on(&self, chain: &str, address: &str) -> Option<ResolvedSubmitter> {
        let address = address.to_ascii_lowercase();
        let entry = self.submitters.get(&address)?;
        Self::sends_on(entry, chain)
            .then(|| self.resolve_on(chain, &address, entry))
            .flatten()
    }

    /// Every submitter configured on `chain`, resolved, in address order.
    pub fn resolved_submitters_on(&self, chain: &str) -> Vec<ResolvedSubmitter> {
        self.submitters
            .iter()
            .filter(|(_, entry)| Self::sends_on(entry, chain))
            .filter_map(|(address, entry)| self.resolve_on(chain, address, entry))
            .collect()
    }

    /// The merge, in precedence order: `[defaults]`, the chain's
    /// `defaults`, the submitter's entry, its `on.<chain>`.
    pub(super) fn resolve_on(
        &self,
        chain: &str,
        address: &str,
        entry: &SubmitterConfig,
    ) -> Option<ResolvedSubmitter> {
        let named = self.chain_named(chain)?;
        let mut settings = self.chain_defaults(&named);
        settings = entry.merged_settings(&settings);
        if let Some(on) = entry.on.get(chain) {
            settings = on.merged_settings(&settings);
        }
        // The target's leader checks the funder's bound with the top-up.
        if let Some(top_up) = &mut settings.top_up {
            top_up.funder_max_per_day = self
                .submitter_settings_entry(&named, &format!("{:#x}", top_up.from))
                .and_then(|funder| funder.funding_max_per_day);
        }
        Some(ResolvedSubmitter {
            address: address.to_string(),
            chain: chain.to_string(),
            signer: entry.signer.clone(),
            settings,
        })
    }

    /// `[defaults]` with the chain's own defaults and its retry backoff: what
    /// a submitter on the chain inherits.
    pub fn chain_defaults(
        &self,
        named: &NamedChain<'_>,
    ) -> txmgr_actors::submitter::SubmitterSettings {
        let mut defaults = self.defaults.clone();
        defaults.retry_backoff = named.config.retry_backoff();
        match &named.config.defaults {
            Some(overrides) => overrides.merged_settings(&defaults),
            None => defaults,
        }
    }

    /// Private sending asked for on a chain without a send-only endpoint,
    /// for every (chain, submitter): what a reload checks again against the
    /// running chains (whose endpoints only a restart changes).
    pub fn private_sends_issues(&self) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        for chain in self.chains() {
            for resolved in self.resolved_submitters_on(chain.name) {
                let prefix = format!("submitters.{}", resolved.address);
                issues.extend(check_private_sends(&chain, &prefix, &resolved));
            }
        }
        issues
    }

    /// A submitter's merged settings on a chain, without the funder lookup.
    fn submitter_settings_entry(
        &self,
        named: &NamedChain<'_>,
        address: &str,
    ) -> Option<txmgr_actors::submitter::SubmitterSettings> {
        let entry = self.submitters.get(address)?;
        if !Self::sends_on(entry, named.name) {
            return None;
        }
        let mut settings = entry.merged_settings(&self.chain_defaults(named));
        if let Some(on) = entry.on.get(named.name) {
            settings = on.merged_settings(&settings);
        }
        Some(settings)
    }
}

/// The chain id a reference names: a configured chain's name or its id in
/// decimal (`chains`: `(name, id)` of every configured chain).
pub(super) fn chain_id_of(reference: &str, chains: &[(String, u64)]) -> Result<u64, String> {
    chains
        .iter()
        .find(|(name, id)| name == reference || id.to_string() == reference)
        .map(|(_, id)| *id)
        .ok_or_else(|| {
            let listed: Vec<String> = chains.iter().map(|(n, id)| format!("{n} ({id})")).collect();
            format!(
                "unknown chain {reference:?} (configured: {})",
                listed.join(", ")
            )
        })
}

/// Private sending on a chain without a send-only endpoint: the issue, at
/// `<prefix>.private_sends` (`prefix` = the submitter's key).
pub(super) fn check_private_sends(
    chain: &NamedChain<'_>,
    prefix: &str,
    resolved: &ResolvedSubmitter,
) -> Option<ConfigIssue> {
    let send_only = chain
        .config
        .endpoints()
        .iter()
        .any(|e| e.role == super::EndpointRole::SendOnly);
    (resolved.settings.private_sends && !send_only).then(|| {
        ConfigIssue::new(
            format!("{prefix}.private_sends"),
            format!(
                "private sending on {} needs an endpoint with role = \"send_only\" there",
                chain.key
            ),
        )
    })
}

/// A chain name fit for metric labels and URLs.
fn check_chain_name(name: &str) -> Result<(), String> {
    let ok = (1..=32).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid chain name {name:?}: expected 1 to 32 characters of [a-z0-9_-]"
        ))
    }
}

/// Checks what ties chains together:
/// `[chain]` and `[chains.*]` not both, at least one chain, names, unique
/// chain ids, and every submitter's `chains` and `on` naming configured
/// chains (and leaving it at least one).
pub(super) fn check(config: &Config) -> Vec<ConfigIssue> {
    let mut issues = Vec::new();
    if config.chain.is_some() && !config.chains.is_empty() {
        issues.push(ConfigIssue::new(
            "chain",
            "[chain] is the one-chain shorthand; with [chains.*] tables, move it to \
             [chains.<name>]",
        ));
    }
    if config.chain.is_none() && config.chains.is_empty() {
        issues.push(ConfigIssue::new(
            "chains",
            "required: configure [chains.<name>] (or the one-chain [chain])",
        ));
    }
    if config.chain.is_none() {
        for name in config.chains.keys() {
            if let Err(reason) = check_chain_name(name) {
                issues.push(ConfigIssue::new(format!("chains.{name}"), reason));
            }
        }
    }
    let mut by_id: HashMap<u64, &str> = HashMap::new();
    for chain in config.chains() {
        if let Some(first) = by_id.insert(chain.config.chain_id, chain.name) {
            issues.push(ConfigIssue::new(
                chain.key_of("chain_id"),
                format!(
                    "duplicate chain_id {}: chains.{first} has it too",
                    chain.config.chain_id
                ),
            ));
        }
    }
    let names: Vec<String> = config.chains().iter().map(|c| c.name.to_string()).collect();
    for (address, entry) in &config.submitters {
        issues.extend(check_submitter_chains(address, entry, &names));
    }
    issues
}

fn check_submitter_chains(
    address: &str,
    entry: &SubmitterConfig,
    names: &[String],
) -> Vec<ConfigIssue> {
    let mut issues = Vec::new();
    let known = |name: &str| names.iter().any(|n| n == name);
    let listed = names.join(", ");
    if let Some(chains) = &entry.chains {
        if chains.is_empty() {
            issues.push(ConfigIssue::new(
                format!("submitters.{address}.chains"),
                "a submitter with no chain: list at least one, or remove the key for every chain",
            ));
        }
        let mut seen = BTreeMap::new();
        for (i, name) in chains.iter().enumerate() {
            if !known(name) {
                issues.push(ConfigIssue::new(
                    format!("submitters.{address}.chains[{i}]"),
                    format!("unknown chain {name:?} (configured: {listed})"),
                ));
            } else if seen.insert(name.as_str(), i).is_some() {
                issues.push(ConfigIssue::new(
                    format!("submitters.{address}.chains[{i}]"),
                    format!("chain {name:?} is listed twice"),
                ));
            }
        }
    }
    for name in entry.on.keys() {
        if !known(name) {
            issues.push(ConfigIssue::new(
                format!("submitters.{address}.on.{name}"),
                format!("unknown chain {name:?} (configured: {listed})"),
            ));
        } else if !Config::sends_on(entry, name) {
            issues.push(ConfigIssue::new(
                format!("submitters.{address}.on.{name}"),
                format!("the submitter does not send on {name:?} (not in its chains)"),
            ));
        }
    }
    issues
}
