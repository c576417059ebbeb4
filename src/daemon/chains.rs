//! The chains of a node: each chain's endpoints and engine (its supervisor,
//! submitters, pools and lease keeper), started side by side so that one
//! chain's stall never holds another's work.
//!
//! ```text
//! [chains.a] ─► endpoints ─► Engine (supervisor ─► submitters, pools) ─┐
//! [chains.b] ─► endpoints ─► Engine (supervisor ─► submitters, pools) ─┼─► ServedChains (API)
//!                                 one LISTEN txmgr_work for all ───────┘
//! ```

use std::sync::Arc;

use sqlx::PgPool;
use txmgr_actors::{chain::ChainClient, node::Engine, store::LeaseOwner};

use super::{connect_named_chain, engine::start_chain_engine, EngineSubmissions};
use crate::{
    config::Config,
    http::{ServedChain, ServedChains},
};

/// One chain running on this node.
#[derive(Clone)]
pub struct ChainRuntime {
    /// `[chains.<name>]` (`default` for `[chain]`).
    pub name: String,
    /// Its chain id.
    pub chain_id: u64,
    /// Its RPC endpoints, as wrapped by the caller.
    pub client: Arc<dyn ChainClient>,
    /// Its engine.
    pub engine: Engine,
    /// It has a send-only endpoint (private sends are possible).
    pub private_sends: bool,
}

/// Wraps a chain's endpoints (`(chain name, endpoints)`): metrics counting,
/// fault injection in tests.
pub type WrapClient<'a> = &'a (dyn Fn(&str, Arc<dyn ChainClient>) -> Arc<dyn ChainClient> + Sync);

/// Connects every configured chain's endpoints and starts its engine, in
/// configuration order. With several chains, one whose endpoints are all
/// unreachable starts out of service (logged, shown by `/readyz` and the ops
/// views, probed with backoff) rather than stopping the node; an endpoint
/// serving another chain id than configured still stops the start. A
/// failure stops the chains already started (their leases are released) and
/// is returned naming the chain.
pub async fn start_chains(
    config: &Config,
    owner: &LeaseOwner,
    pool: &PgPool,
    wrap: WrapClient<'_>,
) -> anyhow::Result<Vec<ChainRuntime>> {
    let mut started: Vec<ChainRuntime> = Vec::new();
    let several = config.chains().len() > 1;
    for named in config.chains() {
        // The `chain` label of the endpoint set's series from its first probe.
        txmgr_actors::metrics::name_chain(named.config.chain_id.into(), named.name);
        let attempt = async {
            let endpoints = connect_named_chain(&named, several).await?;
            let client = wrap(named.name, Arc::new(endpoints));
            let engine =
                start_chain_engine(config, &named, owner, pool.clone(), client.clone()).await?;
            let private_sends = named
                .config
                .endpoints()
                .iter()
                .any(|e| e.role == crate::config::EndpointRole::SendOnly);
            Ok::<_, anyhow::Error>(ChainRuntime {
                name: named.name.to_string(),
                chain_id: named.config.chain_id,
                client,
                engine,
                private_sends,
            })
        };
        match attempt.await {
            Ok(chain) => started.push(chain),
            Err(err) => {
                stop_chains(&started, config.lease.duration).await;
                return Err(err);
            }
        }
    }
    Ok(started)
}

/// Drains every chain's engine (each releases its leases).
pub async fn stop_chains(chains: &[ChainRuntime], lease_duration: std::time::Duration) {
    futures::future::join_all(
        chains
            .iter()
            .map(|chain| chain.engine.shutdown(lease_duration)),
    )
    .await;
}

/// The chains as the API serves them.
pub fn served_chains(chains: &[ChainRuntime]) -> ServedChains {
    ServedChains::new(
        chains
            .iter()
            .map(|chain| ServedChain {
                name: chain.name.clone(),
                chain_id: chain.chain_id.into(),
                submissions: Arc::new(EngineSubmissions(chain.engine.clone())),
                engine: Some(chain.engine.clone()),
                client: Some(chain.client.clone()),
                private_sends: chain.private_sends,
            })
            .collect(),
    )
}
