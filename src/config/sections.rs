//! The fixed sections of `config.toml`: `[database]`, `[http]`, `[chain]`,
//! `[lease]`, `[node]` and `[log]`, with their defaults.

use std::{fmt, net::SocketAddr, path::PathBuf, time::Duration};

use serde::{Deserialize, Serialize};
use txmgr_actors::submitter::SubmitterSettings;

use super::{
    defaults::*, url::redact_password, HttpTlsConfig, RpcEndpointConfig, SettingsOverrides,
};

/// `[database]`: the PostgreSQL authority.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseConfig {
    /// `postgres://user:password@host:port/db`; the password is redacted in
    /// Debug output and in [`Config::redacted_toml`](super::Config::redacted_toml).
    pub url: String,
    /// Allow a non-loopback server without `sslmode=require` or stronger
    /// (README "Security"): the default refuses it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_insecure: bool,
    /// Pool size.
    #[serde(default = "default_max_connections")]
    pub max_connections: u32,
    /// Timeout for opening a connection.
    #[serde(default = "default_connect_timeout", with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// Whether to apply embedded migrations at start.
    #[serde(default = "default_true")]
    pub migrate_on_start: bool,
    /// Longest any statement may run (`statement_timeout` on every pooled
    /// session; migrations are exempt). Bounds what a stuck query holds.
    #[serde(default = "default_statement_timeout", with = "humantime_serde")]
    pub statement_timeout: Duration,
    /// Longest a statement waits for a lock (`lock_timeout`): a standby
    /// blocked behind a frozen leader's lock gives up and tries again.
    #[serde(default = "default_lock_timeout", with = "humantime_serde")]
    pub lock_timeout: Duration,
    /// TCP keep-alive idle time the server uses on our sessions
    /// (`tcp_keepalives_idle`; interval and count derive from it): a node cut
    /// off by a network partition loses its session, its open transaction
    /// and its locks within about twice this.
    #[serde(default = "default_keepalive_idle", with = "humantime_serde")]
    pub keepalive_idle: Duration,
}

fn default_statement_timeout() -> Duration {
    Duration::from_secs(30)
}

fn default_lock_timeout() -> Duration {
    Duration::from_secs(5)
}

fn default_keepalive_idle() -> Duration {
    Duration::from_secs(10)
}

impl DatabaseConfig {
    /// The URL with its password replaced by `***`, safe to log.
    pub fn redacted_url(&self) -> String {
        redact_password(&self.url)
    }
}

impl fmt::Debug for DatabaseConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DatabaseConfig")
            .field("url", &self.redacted_url())
            .field("max_connections", &self.max_connections)
            .field("connect_timeout", &self.connect_timeout)
            .field("migrate_on_start", &self.migrate_on_start)
            .field("statement_timeout", &self.statement_timeout)
            .field("lock_timeout", &self.lock_timeout)
            .field("keepalive_idle", &self.keepalive_idle)
            .finish()
    }
}

/// `[http]`: the API server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// Listen address; non-loopback requires `[[auth.tokens]]`.
    pub listen: SocketAddr,
    /// Largest accepted request body.
    pub body_limit_bytes: usize,
    /// Largest accepted transaction `data` (decoded bytes).
    pub data_limit_bytes: usize,
    /// Time budget of one request.
    #[serde(with = "humantime_serde")]
    pub request_timeout: Duration,
    /// How far ahead a create's `valid_until` may be.
    #[serde(with = "humantime_serde")]
    pub max_valid_for: Duration,
    /// API requests served at once; more get 503 `busy` at once. `/healthz`,
    /// `/readyz` and `/metrics` have their own small limit and stay
    /// answerable when the API is saturated.
    pub max_concurrent_requests: usize,
    /// `GET /v1/completions` requests waiting for a completion at once
    /// (part of `max_concurrent_requests`); more get 503 `busy`.
    pub max_long_polls: usize,
    /// JSON bytes of the items of one page of `GET /v1/transactions` or
    /// `GET /v1/completions`: a page ends early (with its cursor) once this
    /// is reached; it always holds at least one item.
    pub page_max_bytes: usize,
    /// Page bytes built at once over every list and feed request of the node
    /// (each reserves `page_max_bytes` while it builds and sends its page);
    /// beyond it a request gets 503 `busy`. At least `page_max_bytes`.
    pub page_bytes_in_flight: usize,
    /// How often the state `/readyz` answers from is refreshed in the
    /// background (database and chain); older than three of these plus the
    /// probe timeout counts as not ready.
    #[serde(with = "humantime_serde")]
    pub readiness_interval: Duration,
    /// Whether `/metrics` is served without a token. Unset: public only
    /// while no `[[auth.tokens]]` are configured (the exposition names every
    /// submitter and its balance); see [`super::Config::metrics_public`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_public: Option<bool>,
    /// HTTPS for the API; plain HTTP without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<HttpTlsConfig>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            listen: DEFAULT_LISTEN,
            body_limit_bytes: DEFAULT_BODY_LIMIT_BYTES,
            data_limit_bytes: DEFAULT_DATA_LIMIT_BYTES,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_valid_for: DEFAULT_MAX_VALID_FOR,
            max_concurrent_requests: DEFAULT_MAX_CONCURRENT_REQUESTS,
            max_long_polls: DEFAULT_MAX_LONG_POLLS,
            page_max_bytes: DEFAULT_PAGE_MAX_BYTES,
            page_bytes_in_flight: DEFAULT_PAGE_BYTES_IN_FLIGHT,
            readiness_interval: DEFAULT_READINESS_INTERVAL,
            metrics_public: None,
            tls: None,
        }
    }
}

/// `[chains.<name>]` (or the one-chain `[chain]`): one chain this deployment
/// serves.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChainConfig {
    /// One-endpoint shorthand: the HTTP(S) JSON-RPC endpoint (named
    /// `default`). Exactly one of `rpc_url` and `rpc_urls` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpc_url: Option<String>,
    /// WebSocket endpoint for new-head subscriptions, with `rpc_url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ws_url: Option<String>,
    /// Several endpoints: reads go to a healthy one, sends to every healthy one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rpc_urls: Vec<RpcEndpointConfig>,
    /// With the `rpc_url` shorthand: allow a plaintext (`http://`, `ws://`)
    /// URL carrying a key to a non-loopback host (README "Security").
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_insecure: bool,
    /// PEM file of a private CA trusted (besides the public roots) for
    /// `https://` and `wss://` endpoints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// Consecutive transport failures that take an endpoint out of service.
    #[serde(default = "default_unhealthy_after_failures")]
    pub unhealthy_after_failures: u32,
    /// Blocks an endpoint's head may lag the best before it is taken out of
    /// service.
    #[serde(default = "default_max_head_lag")]
    pub max_head_lag: u64,
    /// Longest wait between probes of an endpoint out of service (probes
    /// start at `poll_interval` and double).
    #[serde(default = "default_probe_max_backoff", with = "humantime_serde")]
    pub probe_max_backoff: Duration,
    /// Expected chain id, verified against the node at start.
    pub chain_id: u64,
    /// Interval between chain polls.
    #[serde(default = "default_poll_interval", with = "humantime_serde")]
    pub poll_interval: Duration,
    /// Timeout of one RPC call.
    #[serde(default = "default_rpc_timeout", with = "humantime_serde")]
    pub rpc_timeout: Duration,
    /// Send a leader's batch of transactions in one JSON-RPC batch request
    /// (in nonce order) to each endpoint; off: one request per
    /// transaction. Once an endpoint refuses a batch, the chain sends one
    /// transaction per request for `batch_refusal_backoff`.
    #[serde(default = "default_true")]
    pub batch_sends: bool,
    /// After an endpoint refused a JSON-RPC batch: how long the chain sends
    /// one transaction per request before it tries a batch again.
    #[serde(default = "default_batch_refusal_backoff", with = "humantime_serde")]
    pub batch_refusal_backoff: Duration,
    /// Period of the slow sweep that re-checks, per submitter, the chain's
    /// nonces (external use of the key) and the receipts of intents whose
    /// nonce is consumed but whose receipt the block matcher did not see.
    /// Formerly `stale_receipt_timeout`, still read (with a warning, see
    /// `deprecated.rs`).
    #[serde(
        alias = "stale_receipt_timeout",
        default = "default_sweep_interval",
        with = "humantime_serde"
    )]
    pub sweep_interval: Duration,
    /// Receipt matcher workers (blocks are spread over them).
    #[serde(default = "default_tracker_workers")]
    pub receipt_workers: u32,
    /// Finality checker workers (submitters are spread over them).
    #[serde(default = "default_tracker_workers")]
    pub finality_workers: u32,
    /// Resubmit timer workers (submitters are spread over them).
    #[serde(default = "default_tracker_workers")]
    pub resubmit_workers: u32,
    /// This chain's defaults for any `[defaults]` knob (fee mode, caps,
    /// finality, bumps…): above `[defaults]`, below a submitter's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defaults: Option<SettingsOverrides>,
}

impl ChainConfig {
    /// Wait before retrying a transiently refused broadcast: the engine's
    /// `retry_backoff`, derived from `poll_interval`.
    pub fn retry_backoff(&self) -> Duration {
        SubmitterSettings::retry_backoff_for(self.poll_interval)
    }

    /// The configured endpoints: `rpc_urls`, or the `rpc_url` shorthand as
    /// one endpoint named `default`.
    pub fn endpoints(&self) -> Vec<RpcEndpointConfig> {
        match &self.rpc_url {
            Some(url) if self.rpc_urls.is_empty() => vec![RpcEndpointConfig {
                name: DEFAULT_ENDPOINT_NAME.to_owned(),
                url: url.clone(),
                ws_url: self.ws_url.clone(),
                allow_insecure: self.allow_insecure,
                role: super::EndpointRole::Full,
            }],
            _ => self.rpc_urls.clone(),
        }
    }
}

impl fmt::Debug for ChainConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChainConfig")
            .field("endpoints", &self.endpoints())
            .field("ca_file", &self.ca_file)
            .field("chain_id", &self.chain_id)
            .field("poll_interval", &self.poll_interval)
            .field("rpc_timeout", &self.rpc_timeout)
            .finish_non_exhaustive()
    }
}

/// `[lease]`: submitter ownership (README "Data model and leases").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LeaseConfig {
    /// How long an acquired lease is valid.
    #[serde(with = "humantime_serde")]
    pub duration: Duration,
    /// Renewal interval; must be below `duration / 2` so one failed renewal
    /// does not lose the lease.
    #[serde(with = "humantime_serde")]
    pub renew_interval: Duration,
    /// Extra time an expired lease of another node is left alone, and taken
    /// off the local validity; must be below `duration`.
    #[serde(with = "humantime_serde")]
    pub clock_skew_allowance: Duration,
    /// A leader with no open intent (nothing queued, in flight, tracked or
    /// stuck) for this long releases its lease and stops until new work
    /// arrives, so an idle node holds no lease and renews nothing.
    #[serde(with = "humantime_serde")]
    pub idle_release_after: Duration,
}

impl Default for LeaseConfig {
    fn default() -> Self {
        Self {
            duration: DEFAULT_LEASE_DURATION,
            renew_interval: DEFAULT_LEASE_RENEW_INTERVAL,
            clock_skew_allowance: DEFAULT_CLOCK_SKEW_ALLOWANCE,
            idle_release_after: DEFAULT_IDLE_RELEASE_AFTER,
        }
    }
}

/// `[node]`: cluster membership.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NodeConfig {
    /// Interval between `txmgr_node` heartbeats.
    #[serde(with = "humantime_serde")]
    pub heartbeat_interval: Duration,
    /// Interval between rounds looking for unowned submitters and peers.
    #[serde(with = "humantime_serde")]
    pub discovery_interval: Duration,
    /// Spread submitter leases over the live nodes (rendezvous hashing with
    /// bounded loads); off = the first node to ask keeps a lease.
    pub rebalance: bool,
    /// A node receives leases from others only after it has been up this long.
    #[serde(with = "humantime_serde")]
    pub rebalance_settle: Duration,
    /// A leader keeps a lease at least this long before handing it over.
    #[serde(with = "humantime_serde")]
    pub rebalance_min_hold: Duration,
    /// How much later than the preferred node another node takes over an
    /// expired lease.
    #[serde(with = "humantime_serde")]
    pub handover_grace: Duration,
    /// Creates admitted and not yet persisted, over every submitter of this
    /// node; more get 503 `busy` (each submitter's own bound is
    /// `ingress_capacity`, 429 `overloaded`).
    pub ingress_max_items: usize,
    /// Approximate bytes of those creates (`data`, `request_id` and a fixed
    /// 512 per create); more get 503 `busy`.
    pub ingress_max_bytes: usize,
}

impl NodeConfig {
    /// A node is alive while its heartbeat is younger than this.
    pub fn liveness(&self) -> Duration {
        self.heartbeat_interval.saturating_mul(3)
    }
}

impl Default for NodeConfig {
    fn default() -> Self {
        Self {
            heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
            discovery_interval: DEFAULT_DISCOVERY_INTERVAL,
            rebalance: true,
            rebalance_settle: Duration::from_secs(10),
            rebalance_min_hold: Duration::from_secs(30),
            handover_grace: Duration::from_secs(2),
            ingress_max_items: DEFAULT_INGRESS_MAX_ITEMS,
            ingress_max_bytes: DEFAULT_INGRESS_MAX_BYTES,
        }
    }
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines, one per event.
    #[default]
    Text,
    /// Human-readable, multi-line (fields and span context on their own lines).
    Pretty,
    /// One JSON object per line (with the current span and the span list).
    Json,
}

/// `[log]`: tracing output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// Line format.
    pub format: LogFormat,
    /// `tracing` filter directive, e.g. `info` or `txmgr=debug,info`.
    pub level: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            format: LogFormat::default(),
            level: DEFAULT_LOG_LEVEL.to_string(),
        }
    }
}
