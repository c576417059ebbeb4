//! The chains of a node: each chain's endpoints and engine (its supervisor,
//! submitters, pools and lease keeper), started side by side so that one
//! chain's stall never holds another's work.
//!
//! ```text
//! [chains.a] ─► endpoints ─► Engine (supervisor ─► submitters, pools) ─┐
//! [chains.b] ─► endpoints ─► Engine (supervisor ─► submitters, pools) ─┼─► ServedChains (API)
//!                                 one LISTEN txmgr_work for all ───────┘
//! ChainHost: the running set; a reload adds a chain (connect, start, then
//! publish) or removes one (unpublish, then drain: leases released, rows kept)
//! ```

use std::sync::Arc;

use anyhow::Context as _;
use sqlx::PgPool;
use txmgr_actors::{
    chain::ChainClient,
    domain::ChainId,
    node::{Engine, NodeServices},
    store::LeaseOwner,
};

use super::{
    connect_named_chain,
    engine::{ingress_limits, start_chain_engine},
    EngineSubmissions,
};
use crate::{
    config::{Config, NamedChain},
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
    // One root actor and one set of writers for every chain: each chain's
    // supervisor is a child of the root, all chains' creates and pipeline
    // records share their group commits, and `[node]` ingress bounds hold
    // for the node. The writers only talk to PostgreSQL, so no chain's RPC
    // can hold their batches.
    let services = NodeServices::start(pool, ingress_limits(config))
        .await
        .context("starting the node's root actor")?;
    for named in config.chains() {
        // The `chain` label of the endpoint set's series from its first probe.
        txmgr_actors::metrics::name_chain(named.config.chain_id.into(), named.name);
        let attempt = async {
            let endpoints = connect_named_chain(&named, several).await?;
            let client = wrap(named.name, Arc::new(endpoints));
            start_connected(config, &named, owner, pool, client, services.clone()).await
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

/// Starts the engine of a chain whose endpoints are connected.
async fn start_connected(
    config: &Config,
    named: &NamedChain<'_>,
    owner: &LeaseOwner,
    pool: &PgPool,
    client: Arc<dyn ChainClient>,
    services: NodeServices,
) -> anyhow::Result<ChainRuntime> {
    let engine = start_chain_engine(
        config,
        named,
        owner,
        pool.clone(),
        client.clone(),
        Some(services),
    )
    .await?;
    let private_sends = named
        .config
        .endpoints()
        .iter()
        .any(|e| e.role == crate::config::EndpointRole::SendOnly);
    Ok(ChainRuntime {
        name: named.name.to_string(),
        chain_id: named.config.chain_id,
        client,
        engine,
        private_sends,
    })
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
    ServedChains::new(served_list(chains))
}

fn served_list(chains: &[ChainRuntime]) -> Vec<ServedChain> {
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
        .collect()
}

/// Wraps the endpoints of a chain a reload adds (the daemon counts calls).
pub type WrapAdded = fn(&str, Arc<dyn ChainClient>) -> Arc<dyn ChainClient>;

/// The chains running on this node, and everything that follows the set:
/// the API's [`ServedChains`] (also the work listener's, the gauges' and
/// readiness's view). A reload adds and removes chains through it. The
/// completion feed and the webhooks do not follow it: they carry every
/// chain's rows whatever this node serves.
pub struct ChainHost {
    owner: LeaseOwner,
    pool: PgPool,
    wrap_added: WrapAdded,
    /// The node's root actor and database writers, which chains added share too.
    services: Option<NodeServices>,
    running: std::sync::Mutex<Vec<ChainRuntime>>,
    served: ServedChains,
}

/// A chain a reload adds, connected but not started yet.
pub struct ConnectedChain {
    name: String,
    client: Arc<dyn ChainClient>,
}

impl ConnectedChain {
    /// The chain's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl ChainHost {
    /// The host of `chains` (as [`start_chains`] started them); chains
    /// added later get their endpoints wrapped by `wrap_added`; the API
    /// keys its webhook views by `webhook_chain` (the webhooks' key chain).
    pub fn new(
        owner: LeaseOwner,
        pool: PgPool,
        wrap_added: WrapAdded,
        chains: Vec<ChainRuntime>,
        webhook_chain: ChainId,
    ) -> Self {
        Self {
            owner,
            pool,
            wrap_added,
            services: chains.first().map(|chain| chain.engine.services()),
            served: ServedChains::with_home(served_list(&chains), webhook_chain),
            running: std::sync::Mutex::new(chains),
        }
    }

    /// The API's view of the chains, kept current.
    pub fn served(&self) -> ServedChains {
        self.served.clone()
    }

    fn lock_running(&self) -> std::sync::MutexGuard<'_, Vec<ChainRuntime>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The node's database pool.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The chains running now.
    pub fn running(&self) -> Vec<ChainRuntime> {
        self.lock_running().clone()
    }

    /// The engine of the chain named `name`, if it runs.
    pub fn engine(&self, name: &str) -> Option<Engine> {
        self.lock_running()
            .iter()
            .find(|chain| chain.name == name)
            .map(|chain| chain.engine.clone())
    }

    /// Connects a chain a reload adds: fails (nothing started) when an
    /// endpoint serves another chain id; all endpoints unreachable starts
    /// it out of service, as at start with several chains.
    pub async fn connect(&self, named: &NamedChain<'_>) -> anyhow::Result<ConnectedChain> {
        txmgr_actors::metrics::name_chain(named.config.chain_id.into(), named.name);
        let endpoints = connect_named_chain(named, true).await?;
        Ok(ConnectedChain {
            name: named.name.to_owned(),
            client: (self.wrap_added)(named.name, Arc::new(endpoints)),
        })
    }

    /// Starts a connected chain's engine under `config` (its submitters
    /// from there) and serves it.
    pub async fn start(&self, config: &Config, connected: ConnectedChain) -> anyhow::Result<()> {
        let named = config
            .chain_named(&connected.name)
            .ok_or_else(|| anyhow::anyhow!("chains.{}: not configured", connected.name))?;
        let services = match self.services.clone() {
            Some(services) => services,
            None => NodeServices::start(&self.pool, ingress_limits(config))
                .await
                .context("starting the node's root actor")?,
        };
        let chain = start_connected(
            config,
            &named,
            &self.owner,
            &self.pool,
            connected.client,
            services,
        )
        .await?;
        let mut running = self.lock_running();
        running.push(chain);
        running.sort_by(|a, b| a.name.cmp(&b.name));
        self.publish(&running);
        Ok(())
    }

    /// Stops serving the chain named `name` and drains its engine (leases
    /// released, rows kept): new creates for it get 400, its open work
    /// waits in the database for the chain to be configured again.
    pub async fn remove(&self, name: &str, lease_duration: std::time::Duration) {
        let removed = {
            let mut running = self.lock_running();
            let Some(at) = running.iter().position(|chain| chain.name == name) else {
                return;
            };
            let removed = running.remove(at);
            self.publish(&running);
            removed
        };
        removed.engine.shutdown(lease_duration).await;
    }

    /// Drains every chain (node shutdown).
    pub async fn stop_all(&self, lease_duration: std::time::Duration) {
        let running = self.running();
        stop_chains(&running, lease_duration).await;
    }

    fn publish(&self, running: &[ChainRuntime]) {
        self.served.replace(served_list(running));
    }
}
