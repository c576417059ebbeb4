//! Warnings about submitter policies whose rules a client can step around
//! with a request the policy accepts (`Policy::bypasses`, README
//! "Guardrails"): the configuration loads, and `config check`, the start
//! and every reload say so. Reported once, where the policy is set: under
//! `defaults.`, a chain's `defaults.`, or the submitter.

use super::{error::ConfigIssue, Config};

/// Every policy bypass of `config`, keyed like the configuration errors.
pub(crate) fn policy_warnings(config: &Config) -> Vec<ConfigIssue> {
    let mut warnings = Vec::new();
    let mut reported: Vec<(&'static str, String)> = Vec::new();
    let mut report = |key: String, field: &'static str, reason: String| {
        if !reported.iter().any(|(f, r)| *f == field && *r == reason) {
            warnings.push(ConfigIssue::new(key, reason.clone()));
            reported.push((field, reason));
        }
    };
    for (field, reason) in config.defaults.policy.bypasses() {
        report(format!("defaults.{field}"), field, reason);
    }
    for chain in config.chains() {
        if let Some(overrides) = &chain.config.defaults {
            let settings = overrides.merged_settings(&config.defaults);
            for (field, reason) in settings.policy.bypasses() {
                report(chain.key_of(&format!("defaults.{field}")), field, reason);
            }
        }
    }
    for (address, entry) in &config.submitters {
        for chain in config.chains() {
            let Some(resolved) = config.submitter_on(chain.name, address) else {
                continue;
            };
            for (field, reason) in resolved.settings.policy.bypasses() {
                let key = match entry.on.get(chain.name) {
                    Some(on) if on.has_overrides() => {
                        format!("submitters.{address}.on.{}.{field}", chain.name)
                    }
                    _ => format!("submitters.{address}.{field}"),
                };
                report(key, field, reason);
            }
        }
    }
    warnings
}
