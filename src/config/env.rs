//! Environment overrides: `TXMGR_<SECTION>__<KEY>=value`, a double
//! underscore nesting one level (`TXMGR_LEASE__DURATION=20s`,
//! `TXMGR_NODE_ID=n2`).
//!
//! Only variables whose first segment is a known top-level key are taken, so
//! a signer's own variable (`TXMGR_DEV_PRIVATE_KEY`) never leaks into the
//! configuration. The variables come from an explicit iterator, which lets
//! tests run in parallel without touching the process environment.

use figment::{
    util::nest,
    value::{Dict, Map, Value},
    Error, Metadata, Profile, Provider,
};

/// Prefix of every configuration variable.
pub const ENV_PREFIX: &str = "TXMGR_";

/// Separator between nesting levels in a variable name.
pub const ENV_SEPARATOR: &str = "__";

/// Metadata name of the environment provider; error mapping uses it to name
/// the variable that supplied a bad value.
pub(crate) const ENV_METADATA_NAME: &str = "`TXMGR_` environment variable(s)";

/// Top-level keys that environment variables may set.
pub const TOP_LEVEL_KEYS: &[&str] = &[
    "node_id",
    "database",
    "http",
    "chain",
    "chains",
    "lease",
    "node",
    "defaults",
    "submitters",
    "auth",
    "log",
    "feed",
    "history",
    "telemetry",
];

/// A figment provider over an explicit list of variables.
#[derive(Debug, Clone)]
pub(crate) struct EnvOverrides {
    /// `(dotted lowercase key, raw value)` pairs in input order.
    entries: Vec<(String, String)>,
}

impl EnvOverrides {
    /// Selects the configuration variables from `vars`. `file_keys` are
    /// the submitter and chain map keys of the file: a variable naming an
    /// address or a chain is mapped onto the file's spelling of it, so a
    /// checksummed key in the file and the lower-case variable name address
    /// the same entry.
    pub(crate) fn new(
        vars: impl IntoIterator<Item = (String, String)>,
        file_keys: &FileKeys,
    ) -> Self {
        let mut entries = Vec::new();
        for (name, value) in vars {
            if let Some(key) = config_key(&name, file_keys) {
                entries.push((key, value));
            }
        }
        // Sorting makes the result independent of the iteration order of the
        // process environment.
        entries.sort();
        Self { entries }
    }
}

/// Top-level keys that are lists of tables (`[[webhooks]]`): no variable can
/// address one entry, so a variable naming them is refused rather than
/// silently ignored.
const LIST_KEYS: &[&str] = &["webhooks"];

/// Variables that look like configuration but cannot be applied: a
/// `TXMGR_WEBHOOKS…` override would otherwise be dropped without a word.
pub(crate) fn refused_variables<'a>(
    vars: impl IntoIterator<Item = &'a (String, String)>,
) -> Vec<super::ConfigIssue> {
    vars.into_iter()
        .filter_map(|(name, _)| {
            let rest = name.strip_prefix(ENV_PREFIX)?;
            let first = rest.split(ENV_SEPARATOR).next()?.to_ascii_lowercase();
            LIST_KEYS.contains(&first.as_str()).then(|| {
                super::ConfigIssue::new(
                    name.clone(),
                    format!(
                        "[[{first}]] is a list of tables and cannot be overridden from the environment; \
                         change it in the file (a webhook's secret comes from its secret_env or secret_file)"
                    ),
                )
            })
        })
        .collect()
}

/// The map keys of the file that variables may name in another case.
#[derive(Debug, Clone, Default)]
pub(crate) struct FileKeys {
    /// `[submitters.<address>]` keys.
    pub(crate) submitters: Vec<String>,
    /// `[chains.<name>]` keys.
    pub(crate) chains: Vec<String>,
}

/// Turns a variable name into a dotted key, or `None` when it is not ours.
fn config_key(name: &str, file_keys: &FileKeys) -> Option<String> {
    let rest = name.strip_prefix(ENV_PREFIX)?;
    let mut segments: Vec<String> = rest
        .split(ENV_SEPARATOR)
        .map(|s| s.to_ascii_lowercase())
        .collect();
    let first = segments.first()?;
    if !TOP_LEVEL_KEYS.contains(&first.as_str()) || segments.iter().any(|s| s.is_empty()) {
        return None;
    }
    let spelled = match segments[0].as_str() {
        "submitters" => &file_keys.submitters,
        "chains" => &file_keys.chains,
        _ => return Some(segments.join(".")),
    };
    if let Some(entry) = segments.get_mut(1) {
        if let Some(file_key) = spelled.iter().find(|k| k.eq_ignore_ascii_case(entry)) {
            entry.clone_from(file_key);
        }
    }
    Some(segments.join("."))
}

impl Provider for EnvOverrides {
    fn metadata(&self) -> Metadata {
        Metadata::named(ENV_METADATA_NAME).interpolater(|_: &Profile, keys: &[&str]| {
            let upper: Vec<String> = keys.iter().map(|k| k.to_ascii_uppercase()).collect();
            format!("{ENV_PREFIX}{}", upper.join(ENV_SEPARATOR))
        })
    }

    fn data(&self) -> Result<Map<Profile, Dict>, Error> {
        let mut dict = Dict::new();
        for (key, raw) in &self.entries {
            // Parsing mirrors figment's own `Env`: "20" is a number, "true" a
            // bool, "20s" a string; anything unparsable stays a string. Keys
            // that are always strings skip parsing, so `TXMGR_NODE_ID=7` is
            // the node id "7", not a type error.
            let value = if is_string_key(key) {
                Value::from(raw.clone())
            } else {
                let Ok(parsed) = raw.parse::<Value>();
                parsed
            };
            if let Value::Dict(_, nested) = nest(key, value) {
                merge_dict(&mut dict, nested);
            }
        }
        Ok(Profile::Default.collect(dict))
    }
}

/// Keys whose value is always text, whatever it looks like.
fn is_string_key(key: &str) -> bool {
    const WHOLE: &[&str] = &[
        "node_id",
        "database.url",
        "chain.rpc_url",
        "chain.ws_url",
        "chain.ca_file",
        "http.tls.cert_file",
        "http.tls.key_file",
        "http.tls.client_ca_file",
        "log.level",
    ];
    const LAST: &[&str] = &[
        "env",
        "path",
        "password_env",
        "url",
        "address",
        "name",
        "sha256",
    ];
    // `chains.<name>.rpc_url`, `.ws_url`, `.ca_file`: as `chain.…`.
    let chain_key = key
        .strip_prefix("chains.")
        .and_then(|rest| rest.split_once('.'))
        .map(|(_, field)| format!("chain.{field}"));
    WHOLE.contains(&key)
        || chain_key.is_some_and(|k| WHOLE.contains(&k.as_str()))
        || (key.starts_with("submitters.") || key.starts_with("auth."))
            && key
                .rsplit('.')
                .next()
                .is_some_and(|last| LAST.contains(&last))
}

/// Deep-merges `from` into `into`; later variables win on conflicts.
fn merge_dict(into: &mut Dict, from: Dict) {
    for (key, value) in from {
        match (into.get_mut(&key), value) {
            (Some(Value::Dict(_, existing)), Value::Dict(_, nested)) => {
                merge_dict(existing, nested)
            }
            (_, value) => {
                into.insert(key, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selects_only_known_top_level_keys() {
        let keys = FileKeys {
            submitters: vec!["0xABCDEF".to_string()],
            chains: vec!["Base".to_string()],
        };
        assert_eq!(
            config_key("TXMGR_LEASE__DURATION", &keys).as_deref(),
            Some("lease.duration")
        );
        assert_eq!(
            config_key("TXMGR_NODE_ID", &keys).as_deref(),
            Some("node_id")
        );
        assert_eq!(config_key("TXMGR_DEV_PRIVATE_KEY", &keys), None);
        assert_eq!(config_key("TXMGR_LEASE_DURATION", &keys), None);
        assert_eq!(config_key("PATH", &keys), None);
        assert_eq!(config_key("TXMGR_LEASE____X", &keys), None);
        assert_eq!(
            config_key("TXMGR_SUBMITTERS__0XABCDEF__MAX_IN_FLIGHT", &keys).as_deref(),
            Some("submitters.0xABCDEF.max_in_flight")
        );
        assert_eq!(
            config_key("TXMGR_CHAINS__BASE__POLL_INTERVAL", &keys).as_deref(),
            Some("chains.Base.poll_interval")
        );
        assert!(is_string_key("chains.base.rpc_url"));
        assert!(!is_string_key("chains.base.poll_interval"));
    }
}
