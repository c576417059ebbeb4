//! What the operator surface needs besides the client API's state: the
//! engine, the token checker, the metrics handle, the chain (readiness) and
//! the reloader. Grouped in one `Default`-able struct so tools and tests that
//! only use the client API need not know about it.

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use metrics_exporter_prometheus::PrometheusHandle;
use serde::Serialize;

use super::{auth::Auth, browser_guard::LocalHosts, readiness::Readiness};
use crate::config::{ConfigError, DEFAULT_HEARTBEAT_INTERVAL};

/// Re-reads the configuration and applies it to the running node
/// (`POST /v1/ops/reload`, SIGHUP). The daemon implements it.
#[async_trait]
pub trait Reload: Send + Sync + 'static {
    /// Applies the configuration file as it is now; a bad file changes
    /// nothing and returns its issues.
    async fn reload(&self) -> Result<ReloadReport, ConfigError>;
}

/// What a reload changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ReloadReport {
    /// Submitters whose settings changed and were pushed into the running actors.
    pub updated: Vec<String>,
    /// Submitters started.
    pub added: Vec<String>,
    /// Submitters draining (new creates get 422; the actor stops when idle).
    pub removed: Vec<String>,
    /// Node-level keys that changed but take effect only after a restart.
    pub restart_required: Vec<String>,
    /// Submitters whose signer changed: needs a restart of the node.
    pub signer_changed: Vec<String>,
    /// The webhooks now configured, when `[[webhooks]]` changed (applied at once).
    pub webhooks: Vec<String>,
    /// Chains started and served (their submitters with them).
    pub chains_added: Vec<String>,
    /// Chains no longer served: their actors drained, their rows kept.
    pub chains_removed: Vec<String>,
}

/// The operator side of [`AppState`](super::AppState).
#[derive(Clone)]
pub struct OpsState {
    /// Bearer tokens; empty = authentication off.
    pub auth: Arc<Auth>,
    /// Renders `/metrics`; `None` = no recorder installed (503).
    pub metrics: Option<PrometheusHandle>,
    /// `/metrics` without a token (`http.metrics_public`).
    pub metrics_public: bool,
    /// What `/readyz` answers from; `None` = not monitored (503).
    pub readiness: Option<Readiness>,
    /// Applies configuration changes.
    pub reloader: Option<Arc<dyn Reload>>,
    /// `node.heartbeat_interval`: a node is alive when its heartbeat is
    /// younger than three of them.
    pub heartbeat_interval: Duration,
    /// The node's recent history for the ops page's charts.
    pub history: Arc<super::history::NodeHistory>,
    /// The `Host` values answered while no tokens are configured (README
    /// "Security": DNS rebinding).
    pub local_hosts: LocalHosts,
    /// `history.retain` (the database view tells whether retention is
    /// behind).
    pub history_retain: Duration,
}

impl Default for OpsState {
    fn default() -> Self {
        Self {
            auth: Arc::new(Auth::default()),
            metrics: None,
            metrics_public: true,
            readiness: None,
            reloader: None,
            heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
            history: Arc::default(),
            local_hosts: LocalHosts::new(None),
            history_retain: Duration::ZERO,
        }
    }
}
