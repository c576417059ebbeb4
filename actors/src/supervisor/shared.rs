//! What the supervisor and the [`Engine`](crate::node::Engine) facade
//! share: the node's configuration, every submitter's context and handle,
//! and the node-wide ports (chain, ingress writer, group committer, lease
//! keeper). It is also the router the tracking pools deliver through.

use std::{collections::HashMap, sync::Arc, time::Duration};

use alloy::primitives::Address;
use dashmap::{DashMap, DashSet};
use sqlx::PgPool;

use super::NodeRoot;
use crate::{
    chain::ChainClient,
    cluster::{BalanceConfig, Membership},
    domain::{Finality, SubmitterKey},
    signer::TxSigner,
    store::{group::GroupCommitter, queue_read::QueueReader, LeaseOwner},
    submitter::{
        IngressLimits, IngressWriter, LeaseKeeper, LeaseTiming, Role, SubmitterContext,
        SubmitterHandle, SubmitterSettings,
    },
    tracker::{ReceiptIndex, ResubmitTimers, SubmitterRouter, TrackerReport},
};

/// One configured submitter.
#[derive(Debug, Clone)]
pub struct SubmitterSpec {
    /// Its address.
    pub address: Address,
    /// Its signer (address already verified).
    pub signer: Arc<dyn TxSigner>,
    /// Its settings.
    pub settings: SubmitterSettings,
}

/// What a node's chains share: the root of the actor tree, which holds each
/// chain's supervisor and starts it again if it ends, and the database
/// writers and queue reader. These only talk to PostgreSQL (no chain's RPC
/// can hold their batches), so every chain's engine may share them. Cheap
/// to clone.
#[derive(Debug, Clone)]
pub struct NodeServices {
    /// The node's root actor: every chain's supervisor is its child.
    pub root: NodeRoot,
    /// Persists creates, batched.
    pub ingress: IngressWriter,
    /// Commits pipeline records (broadcasts, allocations), batched.
    pub committer: crate::store::group::GroupCommitter,
    /// Reads queued intents for many submitters at once, through the
    /// committer (in its transactions when writes wait).
    pub queue: crate::store::queue_read::QueueReader,
}

impl NodeServices {
    /// Starts the root actor, and the writers on `pool` with `ingress` as
    /// the node's bound of creates waiting to be persisted.
    pub async fn start(pool: &PgPool, ingress: IngressLimits) -> Result<Self, ractor::SpawnErr> {
        let committer = crate::store::group::GroupCommitter::spawn(pool.clone());
        Ok(Self {
            root: NodeRoot::start().await?,
            ingress: IngressWriter::for_node(pool.clone(), ingress),
            queue: crate::store::queue_read::QueueReader::new(committer.clone()),
            committer,
        })
    }
}

/// Node-wide engine settings.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// This process: its `node_id` and instance (the lease owner).
    pub owner: LeaseOwner,
    /// The chain id served.
    pub chain_id: u64,
    /// The chain's name: the `chain` label of its metrics, and in logs.
    pub chain_name: String,
    /// Lease timing.
    pub lease: LeaseTiming,
    /// Head polling period.
    pub poll_interval: Duration,
    /// Leaders' slow sweep period (external nonces, missed receipts).
    pub sweep_interval: Duration,
    /// Receipt matcher workers.
    pub receipt_workers: usize,
    /// Finality workers.
    pub finality_workers: usize,
    /// Resubmit timer workers.
    pub resubmit_workers: usize,
    /// Lease balancing over live nodes.
    pub balance: BalanceConfig,
    /// Blocks of canonical history kept for reorg detection and finality.
    pub window_blocks: usize,
    /// Period of the scan for unfinished work.
    pub discovery_interval: Duration,
    /// How long a create may wait for its commit.
    pub create_timeout: Duration,
    /// Node-wide bound of creates waiting to be persisted.
    pub ingress: IngressLimits,
    /// The node's root actor and database writers, shared by every chain's
    /// engine: each chain's supervisor is a child of the one root, and all
    /// chains' creates and broadcast records go through the same group
    /// commits, so `ingress` bounds the node, not each chain. `None`: the
    /// engine starts its own.
    pub node_services: Option<NodeServices>,
    /// Restarts allowed within `restart_window` before giving up.
    pub max_restarts: u32,
    /// The window for `max_restarts`.
    pub restart_window: Duration,
}

/// Shared between the supervisor actor and the [`Engine`] facade.
#[derive(Debug)]
pub struct EngineShared {
    pub(crate) config: EngineConfig,
    pub(crate) pool: PgPool,
    pub(crate) contexts: std::sync::RwLock<HashMap<Address, Arc<SubmitterContext>>>,
    pub(crate) handles: DashMap<Address, SubmitterHandle>,
    /// The chain port, for contexts of submitters added on reload.
    pub(crate) chain: Arc<dyn ChainClient>,
    /// The receipt matcher's index, shared by every context.
    pub(crate) index: Arc<ReceiptIndex>,
    /// The resubmit timers, shared by every context.
    pub(crate) timers: Arc<ResubmitTimers>,
    /// Cluster view, shared by every context.
    pub(crate) membership: Arc<Membership>,
    /// Submitters removed from the configuration, draining until idle.
    pub(crate) removed: DashSet<Address>,
    /// The node-wide writer of QUEUED creates (group commit across submitters).
    pub(crate) ingress: IngressWriter,
    /// The node-wide writer of the leaders' hot-path fenced writes.
    pub(crate) committer: GroupCommitter,
    /// The node-wide reader of the leaders' next QUEUED intents.
    pub(crate) queue: QueueReader,
    /// Renews every lease this node holds, in one statement per interval.
    pub(crate) keeper: Arc<LeaseKeeper>,
}

impl EngineShared {
    /// Every configured submitter (draining ones excluded).
    pub(crate) fn configured_submitters(&self) -> Vec<Address> {
        self.contexts
            .read()
            .map(|c| {
                c.keys()
                    .filter(|a| !self.removed.contains(*a))
                    .copied()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Configured submitters with `min_balance` set (lower-case hex): led
    /// even when idle, so their funds are watched.
    pub(crate) fn funds_monitored(&self) -> Vec<String> {
        self.contexts
            .read()
            .map(|c| {
                c.iter()
                    .filter(|(a, ctx)| {
                        !self.removed.contains(*a) && ctx.settings().min_balance.is_some()
                    })
                    .map(|(_, ctx)| ctx.key.address_hex())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The context of a configured submitter.
    pub(crate) fn context(&self, address: &Address) -> Option<Arc<SubmitterContext>> {
        self.contexts
            .read()
            .ok()
            .and_then(|c| c.get(address).cloned())
    }

    /// The handle of a configured submitter, created on first use.
    pub(crate) fn handle(&self, address: Address) -> Option<SubmitterHandle> {
        if let Some(handle) = self.handles.get(&address) {
            return Some(handle.clone());
        }
        let ctx = self.context(&address)?;
        let settings = ctx.settings();
        Some(
            self.handles
                .entry(address)
                .or_insert_with(|| {
                    SubmitterHandle::new(
                        ctx.key,
                        self.ingress.clone(),
                        settings.ingress_capacity as usize,
                        self.config.create_timeout,
                    )
                })
                .clone(),
        )
    }

    /// A submitter's context: its spec plus the node-wide ports and pools.
    pub(crate) fn new_context(&self, spec: SubmitterSpec) -> Arc<SubmitterContext> {
        Arc::new(SubmitterContext {
            key: SubmitterKey::new(self.config.chain_id, spec.address),
            owner: self.config.owner.clone(),
            pool: self.pool.clone(),
            chain: self.chain.clone(),
            signer: spec.signer,
            settings: std::sync::RwLock::new(spec.settings),
            lease: self.config.lease,
            sweep_interval: self.config.sweep_interval,
            index: self.index.clone(),
            timers: self.timers.clone(),
            membership: self.membership.clone(),
            committer: self.committer.clone(),
            write_turn: tokio::sync::Mutex::new(()),
            queue: self.queue.clone(),
            keeper: self.keeper.clone(),
            consumed_suspects: Default::default(),
        })
    }

    /// Every submitter with a context here, in address order.
    pub(crate) fn addresses(&self) -> Vec<Address> {
        let mut addresses: Vec<Address> = self
            .contexts
            .read()
            .map(|c| c.keys().copied().collect())
            .unwrap_or_default();
        addresses.sort();
        addresses
    }
}

impl SubmitterRouter for EngineShared {
    fn deliver(&self, submitter: Address, report: TrackerReport) -> bool {
        self.handles
            .get(&submitter)
            .is_some_and(|handle| handle.send(report.into()))
    }

    fn deliver_repeating(&self, submitter: Address, report: TrackerReport) -> bool {
        self.handles
            .get(&submitter)
            .is_some_and(|handle| handle.send_repeating(report.into()))
    }

    fn led(&self) -> Vec<(Address, Finality)> {
        self.handles
            .iter()
            .filter(|h| matches!(h.status().role(), Role::Leader | Role::Protected))
            .filter_map(|h| {
                let ctx = self.context(h.key())?;
                Some((*h.key(), ctx.settings().finality))
            })
            .collect()
    }
}
