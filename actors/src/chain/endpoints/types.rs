//! The public vocabulary of an endpoint set: what is configured, what the
//! ops view shows, and why a set could not start.

use std::{sync::Arc, time::Duration};

use crate::chain::{shown_url, ChainClient, ChainError, EvmRpc, HealthPolicy};

/// Why an endpoint set could not start.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ConnectError {
    /// An endpoint serves another chain than the configured one.
    #[error("endpoint {endpoint}: serves chain {served}, but chain.chain_id is {expected}")]
    WrongChain {
        /// Endpoint name.
        endpoint: String,
        /// The chain id it reported.
        served: u64,
        /// The configured chain id.
        expected: u64,
    },
    /// An endpoint answered `eth_chainId` with an error (e.g. a rejected API key).
    #[error("endpoint {endpoint}: eth_chainId refused: {message}")]
    Refused {
        /// Endpoint name.
        endpoint: String,
        /// The node's message.
        message: String,
    },
    /// No endpoint could be reached; one reason per endpoint.
    #[error("no RPC endpoint reachable: {0}")]
    Unreachable(String),
    /// The configuration cannot make a client (bad URL, no endpoint).
    #[error("{0}")]
    Setup(String),
}

/// Asks one endpoint for its chain id and compares.
pub(super) async fn check_chain(rpc: &EvmRpc, expected: u64) -> Result<(), ConnectError> {
    match rpc.chain_id().await {
        Ok(served) if served == expected => Ok(()),
        Ok(served) => Err(ConnectError::WrongChain {
            endpoint: rpc.name().to_owned(),
            served,
            expected,
        }),
        Err(ChainError::Rpc { message, .. }) => Err(ConnectError::Refused {
            endpoint: rpc.name().to_owned(),
            message,
        }),
        Err(ChainError::Transport(reason)) => Err(ConnectError::Unreachable(reason)),
    }
}

/// One configured endpoint.
#[derive(Clone)]
pub struct EndpointSpec {
    /// Its name: the only way it is shown (logs, errors, metrics, ops views).
    pub name: String,
    /// `http(s)://` JSON-RPC URL (may carry an API key).
    pub url: String,
    /// Optional `ws(s)://` URL for `newHeads` subscriptions.
    pub ws_url: Option<String>,
    /// Only sent to (`role = "send_only"`): never read from, not probed,
    /// and the only target of private sends.
    pub send_only: bool,
}

impl std::fmt::Debug for EndpointSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointSpec")
            .field("name", &self.name)
            .field("url", &shown_url(&self.url))
            .finish()
    }
}

/// Where `newHeads` can be subscribed to: the endpoint chosen for reads.
#[derive(Clone)]
pub struct WsTarget {
    /// Endpoint name, for logs.
    pub name: Arc<str>,
    /// The `ws(s)://` URL (never logged).
    pub url: String,
    /// TLS settings for `wss://`.
    pub tls: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for WsTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WsTarget")
            .field("name", &self.name)
            .finish()
    }
}

/// One endpoint's state, as the ops view and readiness show it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct EndpointStatus {
    /// Configured name.
    pub name: String,
    /// `scheme://host[:port]` only (paths and queries carry API keys).
    pub url: String,
    /// Serves reads and sends.
    pub healthy: bool,
    /// Reads (and the `newHeads` subscription) go to this endpoint now.
    pub reads: bool,
    /// Only sent to (`role = "send_only"`): never read from nor probed;
    /// `healthy` is then whether its last send got an answer.
    pub send_only: bool,
    /// Why it is out of service: `unverified` (chain id not confirmed yet),
    /// `failing` (consecutive transport failures) or `lagging` (head behind).
    pub reason: Option<String>,
    /// Head at the last probe.
    pub head: Option<u64>,
    /// Blocks behind the best head at the last probe.
    pub lag: u64,
    /// Consecutive transport failures.
    pub consecutive_failures: u32,
    /// The last transport failure (URL-free).
    pub last_error: Option<String>,
    /// Seconds since it became healthy or unhealthy.
    pub since_secs: u64,
    /// While its refusal of a JSON-RPC batch holds
    /// (`chain.batch_refusal_backoff`): the seconds left before a batch is
    /// tried again; the chain sends one request per transaction meanwhile.
    /// Null when batches go out.
    pub batches_refused_secs_left: Option<u64>,
}

/// Health and timing settings of an endpoint set.
#[derive(Debug, Clone, Copy)]
pub struct EndpointSettings {
    /// Health rules and probe timing.
    pub policy: HealthPolicy,
    /// Bound on one probe.
    pub probe_timeout: Duration,
    /// Start even when no endpoint can be reached: the set starts out of
    /// service and serves once a probe confirms an endpoint's chain id (a
    /// node serving several chains must not fail for one chain's outage).
    /// An endpoint serving another chain still fails the start.
    pub start_out_of_service: bool,
    /// Send a leader's batch of transactions as one JSON-RPC batch to each
    /// endpoint (`chain.batch_sends`).
    pub batch_sends: bool,
    /// After an endpoint refused a batch, one request per transaction for
    /// this long, then a batch again (`chain.batch_refusal_backoff`).
    pub batch_refusal_backoff: Duration,
}
