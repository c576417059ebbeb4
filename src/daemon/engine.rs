//! Building the engine from the configuration: signers, per-submitter
//! settings, the supervisor; and the `LISTEN txmgr_work` bridge.

use std::{sync::Arc, time::Duration};

use alloy::primitives::Address;
use anyhow::Context;
use async_trait::async_trait;
use sqlx::{postgres::PgListener, PgPool};
use txmgr_actors::{
    chain::{ChainClient, FeeCache},
    cluster::BalanceConfig,
    domain::{CreateError, CreateOutcome, Finality, NewIntent},
    node::{Engine, EngineConfig, NodeServices, SubmitterSpec},
    signer::build_signer,
    store::{actions::RESUBMIT_SUFFIX, intents::WORK_CHANNEL, LeaseOwner, LEASE_SUFFIX},
    submitter::{IngressLimits, LeaseTiming},
};

use crate::{
    config::{Config, NamedChain},
    http::{ServedChains, Submissions},
};

/// Restarts of one submitter actor tolerated within [`RESTART_WINDOW`].
const MAX_RESTARTS: u32 = 10;
/// Window for [`MAX_RESTARTS`].
const RESTART_WINDOW: Duration = Duration::from_secs(300);

/// Canonical history kept by a chain's head watcher: the deepest
/// confirmation setting on that chain plus a margin, at least 128 blocks.
fn window_blocks(config: &Config, chain: &NamedChain<'_>) -> usize {
    let depth = |finality: Finality| match finality {
        Finality::Confirmations(n) => n,
        Finality::Tag(_) => 0,
    };
    let deepest = config
        .resolved_submitters_on(chain.name)
        .iter()
        .map(|s| depth(s.settings.finality))
        .chain(std::iter::once(depth(
            config.chain_defaults(chain).finality,
        )))
        .max()
        .unwrap_or(0);
    usize::try_from(deepest.saturating_add(64))
        .unwrap_or(usize::MAX)
        .max(128)
}

/// Starts the engine of the first chain (the only one with `[chain]`); see
/// [`start_chain_engine`].
pub async fn start_engine(
    config: &Config,
    owner: &LeaseOwner,
    pool: PgPool,
    chain: Arc<dyn ChainClient>,
) -> anyhow::Result<Engine> {
    let named = config
        .first_chain()
        .context("chains: no chain configured")?;
    start_chain_engine(config, &named, owner, pool, chain, None).await
}

/// Builds the signer of every submitter configured on the chain (checking
/// its address) and starts the chain's supervisor, pools and lease keeper.
pub async fn start_chain_engine(
    config: &Config,
    named: &NamedChain<'_>,
    owner: &LeaseOwner,
    pool: PgPool,
    chain: Arc<dyn ChainClient>,
    node_services: Option<NodeServices>,
) -> anyhow::Result<Engine> {
    let chain_config = named.config;
    // Fee quotes are shared by the chain's submitters for one poll interval.
    let chain: Arc<dyn ChainClient> = Arc::new(FeeCache::new(chain, chain_config.poll_interval));
    let mut specs = Vec::new();
    for submitter in config.resolved_submitters_on(named.name) {
        let address: Address = submitter
            .address
            .parse()
            .with_context(|| format!("submitters.{}: bad address", submitter.address))?;
        let signer = build_signer(
            &submitter.signer,
            address,
            chain_config.chain_id,
            chain_config.rpc_timeout,
        )
        .await
        .with_context(|| format!("submitters.{}.signer", submitter.address))?;
        specs.push(SubmitterSpec {
            address,
            signer,
            settings: submitter.settings,
        });
    }
    let engine_config = EngineConfig {
        owner: owner.clone(),
        chain_id: chain_config.chain_id,
        chain_name: named.name.to_string(),
        lease: LeaseTiming {
            duration: config.lease.duration,
            renew_interval: config.lease.renew_interval,
            clock_skew: config.lease.clock_skew_allowance,
            idle_release_after: config.lease.idle_release_after,
        },
        poll_interval: chain_config.poll_interval,
        sweep_interval: chain_config.sweep_interval,
        receipt_workers: chain_config.receipt_workers as usize,
        finality_workers: chain_config.finality_workers as usize,
        resubmit_workers: chain_config.resubmit_workers as usize,
        balance: BalanceConfig {
            enabled: config.node.rebalance,
            liveness: config.node.liveness(),
            settle: config.node.rebalance_settle,
            min_hold: config.node.rebalance_min_hold,
            handover_grace: config.node.handover_grace,
            refresh: config.node.heartbeat_interval,
        },
        window_blocks: window_blocks(config, named),
        discovery_interval: config.node.discovery_interval,
        create_timeout: config.http.request_timeout,
        ingress: ingress_limits(config),
        node_services,
        max_restarts: MAX_RESTARTS,
        restart_window: RESTART_WINDOW,
    };
    Engine::start(engine_config, pool, chain, specs)
        .await
        .with_context(|| format!("{}: starting the supervisor", named.key))
}

/// The node-wide bounds of creates waiting to be persisted (`[node]`).
pub(super) fn ingress_limits(config: &Config) -> IngressLimits {
    IngressLimits {
        max_items: config.node.ingress_max_items,
        max_bytes: config.node.ingress_max_bytes,
    }
}

/// The HTTP edge's create path into the engine.
#[derive(Debug, Clone)]
pub struct EngineSubmissions(pub Engine);

#[async_trait]
impl Submissions for EngineSubmissions {
    async fn create(&self, intent: NewIntent) -> Result<CreateOutcome, CreateError> {
        self.0.create(intent).await
    }
}

/// [`listen_for_chains`] for one engine.
pub async fn listen_for_work(pool: PgPool, engine: Engine, chain_id: u64) {
    listen_for_chains(pool, vec![(chain_id, engine)]).await
}

/// Forwards `NOTIFY txmgr_work` (new work inserted by any node) to the
/// engine of its chain, over one connection for every chain; reconnects on
/// failure. Wake-ups are hints: discovery and the actors' own timers cover
/// anything missed while disconnected.
pub async fn listen_for_chains(pool: PgPool, engines: Vec<(u64, Engine)>) {
    listen_routed(pool, move |chain_id| {
        engines
            .iter()
            .find(|(id, _)| *id == chain_id)
            .map(|(_, engine)| engine.clone())
    })
    .await
}

/// [`listen_for_chains`] for the chains served now: a chain a reload adds
/// gets its notifications from then on, a removed one no more.
pub async fn listen_for_served(pool: PgPool, chains: ServedChains) {
    listen_routed(pool, move |chain_id| {
        chains
            .by_id(chain_id.into())
            .and_then(|chain| chain.engine.clone())
    })
    .await
}

async fn listen_routed(pool: PgPool, route: impl Fn(u64) -> Option<Engine>) {
    loop {
        match PgListener::connect_with(&pool).await {
            Ok(mut listener) => {
                if let Err(err) = listener.listen(WORK_CHANNEL).await {
                    tracing::warn!(error = %err, "LISTEN txmgr_work failed");
                } else {
                    loop {
                        match listener.recv().await {
                            Ok(notification) => {
                                let parsed = parse_payload(notification.payload());
                                let target = parsed.and_then(|(chain_id, address, hint)| {
                                    Some((route(chain_id)?, address, hint))
                                });
                                match target {
                                    Some((engine, address, Hint::Work)) => engine.notify(address),
                                    Some((engine, address, Hint::Resubmit)) => {
                                        engine.notify_resubmit(address)
                                    }
                                    Some((engine, address, Hint::Lease)) => {
                                        engine.notify_lease(address)
                                    }
                                    None => {}
                                }
                            }
                            Err(err) => {
                                tracing::warn!(error = %err, "LISTEN connection lost; reconnecting");
                                break;
                            }
                        }
                    }
                }
            }
            Err(err) => tracing::warn!(error = %err, "LISTEN connection failed"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// What a work notification asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hint {
    /// New work was queued (`<chain_id>:<address>`).
    Work,
    /// An operator's request waits (`…:resubmit`).
    Resubmit,
    /// A lease was handed over (`…:lease`).
    Lease,
}

/// `<chain_id>:<address>[:resubmit|:lease]`.
fn parse_payload(payload: &str) -> Option<(u64, Address, Hint)> {
    let (chain, rest) = payload.split_once(':')?;
    let chain_id = chain.parse::<u64>().ok()?;
    let (address, hint) = match rest.split_once(':') {
        Some((address, RESUBMIT_SUFFIX)) => (address, Hint::Resubmit),
        Some((address, LEASE_SUFFIX)) => (address, Hint::Lease),
        Some(_) => return None,
        None => (rest, Hint::Work),
    };
    Some((chain_id, address.parse().ok()?, hint))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_payload_names_chain_and_address() {
        let address = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266";
        let parsed: Address = address.parse().expect("address");
        assert_eq!(
            parse_payload(&format!("31337:{address}")),
            Some((31337, parsed, Hint::Work))
        );
        assert_eq!(
            parse_payload(&format!("31337:{address}:resubmit")),
            Some((31337, parsed, Hint::Resubmit))
        );
        assert_eq!(
            parse_payload(&format!("8453:{address}:lease")),
            Some((8453, parsed, Hint::Lease))
        );
        assert_eq!(parse_payload(&format!("31337:{address}:other")), None);
        assert_eq!(parse_payload("garbage"), None);
    }
}
