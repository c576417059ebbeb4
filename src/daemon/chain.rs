//! The chain endpoints of a node, from `[chain]`: TLS settings, health
//! policy, and the start-up check of every endpoint's chain id.

use std::time::Duration;

use anyhow::Context;
use txmgr_actors::chain::{EndpointSettings, EndpointSpec, HealthPolicy, RpcEndpoints};

use crate::config::Config;

/// Longest a health probe may take, whatever `chain.rpc_timeout` says: a
/// frozen endpoint must be noticed quickly.
const MAX_PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Health rules and probe timing of `[chain]`.
pub fn endpoint_settings(config: &Config) -> EndpointSettings {
    let chain = &config.chain;
    EndpointSettings {
        policy: HealthPolicy {
            failures_to_unhealthy: chain.unhealthy_after_failures,
            max_head_lag: chain.max_head_lag,
            probe_interval: chain.poll_interval,
            max_probe_backoff: chain.probe_max_backoff.max(chain.poll_interval),
        },
        probe_timeout: chain.rpc_timeout.min(MAX_PROBE_TIMEOUT),
    }
}

/// Builds the endpoint set of `[chain]` and verifies every endpoint's chain
/// id (see [`RpcEndpoints::connect`]). Errors name endpoints, never URLs.
pub async fn connect_chain(config: &Config) -> anyhow::Result<RpcEndpoints> {
    txmgr_actors::tls::install_default_provider();
    let chain = &config.chain;
    let tls =
        txmgr_actors::tls::client_config(chain.ca_file.as_deref()).context("chain.ca_file")?;
    let specs = chain
        .endpoints()
        .into_iter()
        .map(|e| EndpointSpec {
            name: e.name,
            url: e.url,
            ws_url: e.ws_url,
        })
        .collect();
    RpcEndpoints::connect(
        specs,
        chain.chain_id,
        chain.rpc_timeout,
        tls,
        endpoint_settings(config),
    )
    .await
    .context("chain: checking the RPC endpoints")
}
