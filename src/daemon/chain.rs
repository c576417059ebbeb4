//! The chain endpoints of a node, per configured chain: TLS settings,
//! health policy, and the start-up check of every endpoint's chain id.

use std::time::Duration;

use anyhow::Context;
use txmgr_actors::chain::{EndpointSettings, EndpointSpec, HealthPolicy, RpcEndpoints};

use crate::config::{ChainConfig, Config, NamedChain};

/// Longest a health probe may take, whatever `rpc_timeout` says: a frozen
/// endpoint must be noticed quickly.
const MAX_PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Health rules and probe timing of one chain. `start_out_of_service`: the
/// node serves several chains, so one whose endpoints are all unreachable
/// must not stop it.
pub fn endpoint_settings(chain: &ChainConfig, start_out_of_service: bool) -> EndpointSettings {
    EndpointSettings {
        start_out_of_service,
        batch_sends: chain.batch_sends,
        batch_refusal_backoff: chain.batch_refusal_backoff,
        policy: HealthPolicy {
            failures_to_unhealthy: chain.unhealthy_after_failures,
            max_head_lag: chain.max_head_lag,
            probe_interval: chain.poll_interval,
            max_probe_backoff: chain.probe_max_backoff.max(chain.poll_interval),
        },
        probe_timeout: chain.rpc_timeout.min(MAX_PROBE_TIMEOUT),
    }
}

/// Builds the endpoint set of the first chain (the only one with `[chain]`);
/// see [`connect_named_chain`].
pub async fn connect_chain(config: &Config) -> anyhow::Result<RpcEndpoints> {
    let chain = config
        .first_chain()
        .context("chains: no chain configured")?;
    connect_named_chain(&chain, false).await
}

/// Builds the endpoint set of one chain and verifies every endpoint's chain
/// id (see [`RpcEndpoints::connect`]); with `start_out_of_service`, a chain
/// none of whose endpoints answers starts out of service instead of failing.
/// Errors name the chain and its endpoints, never URLs.
pub async fn connect_named_chain(
    named: &NamedChain<'_>,
    start_out_of_service: bool,
) -> anyhow::Result<RpcEndpoints> {
    txmgr_actors::tls::install_default_provider();
    let chain = named.config;
    let tls = txmgr_actors::tls::client_config(chain.ca_file.as_deref())
        .with_context(|| named.key_of("ca_file"))?;
    let specs = chain
        .endpoints()
        .into_iter()
        .map(|e| EndpointSpec {
            send_only: e.role == crate::config::EndpointRole::SendOnly,
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
        endpoint_settings(chain, start_out_of_service),
    )
    .await
    .with_context(|| format!("{}: checking the RPC endpoints", named.key))
}
