//! Keys that were renamed: the old name is still read (a serde `alias` on
//! the field) and earns a warning naming the new one; giving both names is
//! an error, since it is unclear which one the operator meant.

use figment::{Figment, Profile};

use super::{env::ENV_METADATA_NAME, ConfigError, ConfigIssue};

/// `(old dotted key, new dotted key)` of every renamed key.
pub const RENAMED_KEYS: &[(&str, &str)] = &[
    // It never was a timeout: it is the period of the slow sweep.
    ("chain.stale_receipt_timeout", "chain.sweep_interval"),
];

/// One warning per old name used in `sources` (the file merged with the
/// environment); an error for each key given under both names.
pub(crate) fn renamed_keys_used(sources: &Figment) -> Result<Vec<ConfigIssue>, ConfigError> {
    let mut warnings = Vec::new();
    let mut conflicts = Vec::new();
    for (old, new) in RENAMED_KEYS {
        if sources.find_value(old).is_err() {
            continue;
        }
        let from = where_set(sources, old);
        if sources.find_value(new).is_ok() {
            conflicts.push(ConfigIssue::new(
                *old,
                format!("renamed to {new}, which is also set; remove {old}{from}"),
            ));
        } else {
            warnings.push(ConfigIssue::new(
                *old,
                format!(
                    "deprecated name{from}, read as {new}; rename it, the old name will be removed"
                ),
            ));
        }
    }
    if conflicts.is_empty() {
        Ok(warnings)
    } else {
        Err(ConfigError { issues: conflicts })
    }
}

/// ` (set by environment variable TXMGR_…)` when the environment set `key`,
/// since the operator will not find it in the file; empty otherwise.
fn where_set(sources: &Figment, key: &str) -> String {
    match sources.find_metadata(key) {
        Some(md) if md.name == ENV_METADATA_NAME => {
            let keys: Vec<&str> = key.split('.').collect();
            format!(
                " (set by environment variable {})",
                md.interpolate(&Profile::Default, &keys)
            )
        }
        _ => String::new(),
    }
}
