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
    node::{Engine, EngineConfig, SubmitterSpec},
    signer::build_signer,
    store::{actions::RESUBMIT_SUFFIX, intents::WORK_CHANNEL, LeaseOwner, LEASE_SUFFIX},
    submitter::{IngressLimits, LeaseTiming},
};

use crate::{config::Config, http::Submissions};

/// Restarts of one submitter actor tolerated within [`RESTART_WINDOW`].
const MAX_RESTARTS: u32 = 10;
/// Window for [`MAX_RESTARTS`].
const RESTART_WINDOW: Duration = Duration::from_secs(300);

/// Canonical history kept by the head watcher: the deepest confirmation
/// setting plus a margin, at least 128 blocks.
fn window_blocks(config: &Config) -> usize {
    let depth = |finality: Finality| match finality {
        Finality::Confirmations(n) => n,
        Finality::Tag(_) => 0,
    };
    let deepest = config
        .resolved_submitters()
        .iter()
        .map(|s| depth(s.settings.finality))
        .chain(std::iter::once(depth(config.defaults.finality)))
        .max()
        .unwrap_or(0);
    usize::try_from(deepest.saturating_add(64))
        .unwrap_or(usize::MAX)
        .max(128)
}

/// Builds every configured submitter's signer (checking its address) and
/// starts the supervisor.
pub async fn start_engine(
    config: &Config,
    owner: &LeaseOwner,
    pool: PgPool,
    chain: Arc<dyn ChainClient>,
) -> anyhow::Result<Engine> {
    // Fee quotes are shared node-wide for one poll interval.
    let chain: Arc<dyn ChainClient> = Arc::new(FeeCache::new(chain, config.chain.poll_interval));
    let mut specs = Vec::new();
    for submitter in config.resolved_submitters() {
        let address: Address = submitter
            .address
            .parse()
            .with_context(|| format!("submitters.{}: bad address", submitter.address))?;
        let signer = build_signer(
            &submitter.signer,
            address,
            config.chain.chain_id,
            config.chain.rpc_timeout,
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
        chain_id: config.chain.chain_id,
        lease: LeaseTiming {
            duration: config.lease.duration,
            renew_interval: config.lease.renew_interval,
            clock_skew: config.lease.clock_skew_allowance,
            idle_release_after: config.lease.idle_release_after,
        },
        poll_interval: config.chain.poll_interval,
        sweep_interval: config.chain.sweep_interval,
        receipt_workers: config.chain.receipt_workers as usize,
        finality_workers: config.chain.finality_workers as usize,
        resubmit_workers: config.chain.resubmit_workers as usize,
        balance: BalanceConfig {
            enabled: config.node.rebalance,
            liveness: config.node.liveness(),
            settle: config.node.rebalance_settle,
            min_hold: config.node.rebalance_min_hold,
            handover_grace: config.node.handover_grace,
            refresh: config.node.heartbeat_interval,
        },
        window_blocks: window_blocks(config),
        discovery_interval: config.node.discovery_interval,
        create_timeout: config.http.request_timeout,
        ingress: IngressLimits {
            max_items: config.node.ingress_max_items,
            max_bytes: config.node.ingress_max_bytes,
        },
        max_restarts: MAX_RESTARTS,
        restart_window: RESTART_WINDOW,
    };
    Engine::start(engine_config, pool, chain, specs)
        .await
        .context("starting the supervisor")
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

/// Forwards `NOTIFY txmgr_work` (new work inserted by any node) to the
/// engine; reconnects on failure. Wake-ups are hints: discovery and the
/// actors' own timers cover anything missed while disconnected.
pub async fn listen_for_work(pool: PgPool, engine: Engine, chain_id: u64) {
    loop {
        match PgListener::connect_with(&pool).await {
            Ok(mut listener) => {
                if let Err(err) = listener.listen(WORK_CHANNEL).await {
                    tracing::warn!(error = %err, "LISTEN txmgr_work failed");
                } else {
                    loop {
                        match listener.recv().await {
                            Ok(notification) => {
                                match parse_payload(notification.payload(), chain_id) {
                                    Some((address, Hint::Work)) => engine.notify(address),
                                    Some((address, Hint::Resubmit)) => {
                                        engine.notify_resubmit(address)
                                    }
                                    Some((address, Hint::Lease)) => engine.notify_lease(address),
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

fn parse_payload(payload: &str, chain_id: u64) -> Option<(Address, Hint)> {
    let (chain, rest) = payload.split_once(':')?;
    if chain.parse::<u64>().ok()? != chain_id {
        return None;
    }
    let (address, hint) = match rest.split_once(':') {
        Some((address, RESUBMIT_SUFFIX)) => (address, Hint::Resubmit),
        Some((address, LEASE_SUFFIX)) => (address, Hint::Lease),
        Some(_) => return None,
        None => (rest, Hint::Work),
    };
    Some((address.parse().ok()?, hint))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_payload_names_chain_and_address() {
        let address = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266";
        let parsed: Address = address.parse().expect("address");
        assert_eq!(
            parse_payload(&format!("31337:{address}"), 31337),
            Some((parsed, Hint::Work))
        );
        assert_eq!(
            parse_payload(&format!("31337:{address}:resubmit"), 31337),
            Some((parsed, Hint::Resubmit))
        );
        assert_eq!(
            parse_payload(&format!("31337:{address}:lease"), 31337),
            Some((parsed, Hint::Lease))
        );
        assert_eq!(
            parse_payload(&format!("31337:{address}:other"), 31337),
            None
        );
        assert_eq!(parse_payload(&format!("1:{address}"), 31337), None);
        assert_eq!(parse_payload("garbage", 31337), None);
    }
}
