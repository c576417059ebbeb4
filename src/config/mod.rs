//! The daemon's configuration: `config.toml` plus `TXMGR_…` environment
//! overrides, checked as a whole before anything uses it.
//!
//! ```text
//! config.toml ──► TOML ─┐
//!                       ├─► figment merge ─► serde (deny unknown keys) ─► validate ─► Config
//! TXMGR_A__B=v ─► env ──┘                                  │                  │
//!                                                          └──► ConfigError ◄─┘  (key: reason per line)
//! ```
//!
//! Per-submitter settings are the engine's own
//! [`SubmitterSettings`](txmgr_actors::submitter::SubmitterSettings)
//! (`[defaults]`), merged with the overrides of each `[submitters."0x…"]`
//! entry; [`Config::resolved_submitters`] does the merge.
//!
//! A renamed key is still read under its old name, with a warning
//! ([`Config::warnings`], see `deprecated.rs`).

mod auth;
mod chains;
mod defaults;
mod deprecated;
mod endpoints;
mod env;
mod error;
mod feed;
mod funds;
mod history;
mod http_tls;
mod overrides;
mod policy_warnings;
mod sections;
mod settings_checks;
mod signer;
mod telemetry;
mod transport;
mod url;
mod validate;
mod webhooks;

use std::{collections::BTreeMap, path::Path};

use figment::{
    providers::{Format, Toml},
    value::Value,
    Figment,
};
use serde::{Deserialize, Serialize};
use txmgr_actors::submitter::SubmitterSettings;

pub use auth::{AuthConfig, Role, TokenConfig, TokenRate};
pub use chains::{NamedChain, SHORTHAND_CHAIN_NAME};
pub use defaults::*;
pub use deprecated::RENAMED_KEYS;
pub use endpoints::{EndpointRole, RpcEndpointConfig};
pub use env::{ENV_PREFIX, ENV_SEPARATOR, TOP_LEVEL_KEYS};
pub use error::{ConfigError, ConfigIssue};
pub use feed::{FeedConfig, DEFAULT_AUDIT_RETAIN, DEFAULT_FEED_RETAIN};
pub use history::{
    HistoryConfig, DEFAULT_HISTORY_DELETE_RATE, DEFAULT_HISTORY_INTERVAL, DEFAULT_HISTORY_RETAIN,
};
pub use http_tls::{HttpTlsConfig, DEFAULT_HANDSHAKE_TIMEOUT, DEFAULT_MAX_PENDING_HANDSHAKES};
pub use overrides::{GasBumpOverride, ResolvedSubmitter, SettingsOverrides, SubmitterConfig};
pub use sections::*;
pub use signer::SignerSpec;
pub use telemetry::TelemetryConfig;
pub use url::{redact_password, shown_url};
pub use validate::{check_address, check_node_id};
pub use webhooks::{resolve_webhooks, StartAt, WebhookConfig};

/// The whole, validated configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// This node's identity in leases and heartbeats; defaults to
    /// `node-<hostname>`.
    #[serde(default = "default_node_id")]
    pub node_id: String,
    /// PostgreSQL connection.
    pub database: DatabaseConfig,
    /// HTTP API server.
    #[serde(default)]
    pub http: HttpConfig,
    /// The one-chain shorthand: the deployment serves this chain, named
    /// `default`. Not together with `chains`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<ChainConfig>,
    /// The chains this deployment serves, by name (`[chains.<name>]`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub chains: BTreeMap<String, ChainConfig>,
    /// Submitter lease timing.
    #[serde(default)]
    pub lease: LeaseConfig,
    /// Cluster membership timing.
    #[serde(default)]
    pub node: NodeConfig,
    /// Settings every submitter inherits.
    #[serde(default)]
    pub defaults: SubmitterSettings,
    /// Configured submitters by lower-case address (normalised on load).
    #[serde(default)]
    pub submitters: BTreeMap<String, SubmitterConfig>,
    /// API tokens.
    #[serde(default)]
    pub auth: AuthConfig,
    /// Log output.
    #[serde(default)]
    pub log: LogConfig,
    /// Completion feed retention.
    #[serde(default)]
    pub feed: FeedConfig,
    /// How long finished intents stay (`[history]`).
    #[serde(default)]
    pub history: HistoryConfig,
    /// OpenTelemetry traces (off unless `otlp_endpoint` is set).
    #[serde(default)]
    pub telemetry: TelemetryConfig,
    /// Where completion-feed events are pushed (`[[webhooks]]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub webhooks: Vec<WebhookConfig>,
    /// What loaded but deserves the operator's attention (renamed keys);
    /// shown by `txmgr config check`, logged at start and on reload.
    #[serde(skip)]
    warnings: Vec<ConfigIssue>,
}

impl Config {
    /// Whether `/metrics` is served without a token: `http.metrics_public`
    /// when set, otherwise only while no token is configured — once tokens
    /// guard the API, the exposition (every submitter, its balance) is not
    /// left open by default.
    pub fn metrics_public(&self) -> bool {
        self.http
            .metrics_public
            .unwrap_or(self.auth.tokens.is_empty())
    }

    /// Loads `path` with overrides from the process environment.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        Self::load_with_env(path, std::env::vars())
    }

    /// Loads `path` with overrides from `env` instead of the process
    /// environment (tests, reload with a captured environment).
    pub fn load_with_env(
        path: &Path,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigError::single("<file>", format!("cannot read {}: {e}", path.display()))
        })?;
        Self::from_toml_str(&text, env)
    }

    /// Parses TOML text with overrides from `env`, then validates.
    pub fn from_toml_str(
        text: &str,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let env: Vec<(String, String)> = env.into_iter().collect();
        let pgsslmode = env
            .iter()
            .find(|(key, _)| key == "PGSSLMODE")
            .map(|(_, value)| value.clone());
        let refused_variables = env::refused_variables(&env);
        let otlp_headers = env.iter().any(|(key, value)| {
            transport::OTLP_HEADER_VARIABLES.contains(&key.as_str()) && !value.trim().is_empty()
        });
        let file = Figment::from(Toml::string(text));
        let keys_of = |section: &str| match file.find_value(section) {
            Ok(Value::Dict(_, dict)) => dict.keys().cloned().collect(),
            _ => Vec::new(),
        };
        let file_keys = env::FileKeys {
            submitters: keys_of("submitters"),
            chains: keys_of("chains"),
        };
        let figment = file.merge(env::EnvOverrides::new(env, &file_keys));
        let warnings = deprecated::renamed_keys_used(&figment)?;
        let mut config: Config = figment.extract().map_err(ConfigError::from_figment)?;
        config.warnings = warnings;
        let mut issues = validate::normalise_and_validate(&mut config);
        let policy_bypasses = policy_warnings::policy_warnings(&config);
        config.warnings.extend(policy_bypasses);
        issues.extend(refused_variables);
        issues.extend(config.feed.validate());
        issues.extend(config.history.validate());
        let history = config.history.warnings(&config.feed);
        config.warnings.extend(history);
        issues.extend(config.telemetry.validate());
        if let Some(tls) = &config.http.tls {
            issues.extend(tls.validate());
        }
        let transport = transport::check(&config, pgsslmode.as_deref());
        issues.extend(transport.refused);
        config.warnings.extend(transport.warned);
        let telemetry = transport::check_telemetry(&config.telemetry, otlp_headers);
        issues.extend(telemetry.refused);
        config.warnings.extend(telemetry.warned);
        if issues.is_empty() {
            Ok(config)
        } else {
            Err(ConfigError { issues })
        }
    }

    /// The engine's settings of every webhook, secrets read from the
    /// process environment.
    pub fn resolved_webhooks(
        &self,
    ) -> Result<Vec<txmgr_actors::webhook::WebhookSettings>, ConfigError> {
        resolve_webhooks(&self.webhooks, |var| std::env::var(var).ok())
            .map_err(|issues| ConfigError { issues })
    }

    /// Keys that loaded but deserve attention (deprecated names, policy
    /// rules a request can step around, insecure transport allowed), as
    /// `key: reason`.
    pub fn warnings(&self) -> &[ConfigIssue] {
        &self.warnings
    }

    /// Logs [`Config::warnings`]; for after the tracing subscriber is up
    /// (the file is read before it).
    pub fn log_warnings(&self) {
        for warning in &self.warnings {
            tracing::warn!(target: "txmgr::config", key = %warning.key, "{}", warning.reason);
        }
    }

    /// The resolved settings of the submitter `address` (any case) on the
    /// first chain — the only one with `[chain]`; see
    /// [`Config::submitter_on`] — or `None` when it is not configured there.
    pub fn submitter(&self, address: &str) -> Option<ResolvedSubmitter> {
        let chain = self.first_chain()?;
        self.submitter_on(chain.name, address)
    }

    /// Every submitter of the first chain (the only one with `[chain]`),
    /// resolved, in address order; see [`Config::resolved_submitters_on`].
    pub fn resolved_submitters(&self) -> Vec<ResolvedSubmitter> {
        match self.first_chain() {
            Some(chain) => self.resolved_submitters_on(chain.name),
            None => Vec::new(),
        }
    }

    /// The effective configuration (file, environment and defaults) as
    /// TOML, with the database password replaced by `***` and RPC and
    /// signer URLs shown as `scheme://host[:port]`; for
    /// `txmgr config check`.
    pub fn redacted_toml(&self) -> String {
        let mut shown = self.clone();
        shown.database.url = self.database.redacted_url();
        // RPC and signer URLs often carry API keys in their path or query.
        for chain in shown.chain.iter_mut().chain(shown.chains.values_mut()) {
            chain.rpc_url = chain.rpc_url.as_deref().map(shown_url);
            chain.ws_url = chain.ws_url.as_deref().map(shown_url);
            for endpoint in &mut chain.rpc_urls {
                endpoint.url = shown_url(&endpoint.url);
                endpoint.ws_url = endpoint.ws_url.as_deref().map(shown_url);
            }
        }
        for hook in &mut shown.webhooks {
            hook.url = shown_url(&hook.url);
        }
        for entry in shown.submitters.values_mut() {
            entry.signer = entry.signer.redacted();
        }
        toml::to_string_pretty(&shown)
            .unwrap_or_else(|e| format!("# cannot render the configuration as TOML: {e}\n"))
    }
}

/// `node-<hostname>`, reduced to the node-id alphabet; `node-local` when
/// the hostname is unknown.
pub fn default_node_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .unwrap_or_default();
    let host: String = host
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(59)
        .collect();
    if host.is_empty() {
        "node-local".to_string()
    } else {
        format!("node-{host}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_node_id_is_valid() {
        assert!(check_node_id(&default_node_id()).is_ok());
    }
}
