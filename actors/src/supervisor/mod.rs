//! The Supervisor (one per node) and the [`Engine`] facade the daemon uses.
//!
//! The supervisor spawns SubmitterActors lazily (first create, a `NOTIFY`
//! from another node, or discovery of unfinished work whose lease is free),
//! restarts a failed or fenced one with exponential backoff, and gives up on
//! it (role `failed`) after too many restarts in a window. It also spawns
//! the tracking actors (head watcher, receipt, finality and resubmit pools)
//! linked to itself and restarts a failed one with a bounded backoff
//! (`tracker_tree`). It overrides ractor's default supervision, which would
//! stop the supervisor with its child.

mod actor;
mod discovery;
mod ops;
mod tracker_tree;

use std::{collections::HashMap, sync::Arc, time::Duration};

use alloy::primitives::Address;
use dashmap::DashMap;
use ractor::{Actor, ActorRef};
use sqlx::PgPool;

use crate::{
    chain::ChainClient,
    cluster::{BalanceConfig, Membership},
    domain::{CreateError, CreateOutcome, Finality, NewIntent},
    signer::TxSigner,
    store::{group::GroupCommitter, LeaseOwner},
    submitter::{
        IngressLimits, IngressWriter, LeaseKeeper, LeaseTiming, Role, SubmitterContext,
        SubmitterHandle, SubmitterMsg, SubmitterSettings,
    },
    tracker::{ReceiptIndex, ResubmitTimers, SubmitterRouter, TrackerProgress},
};

pub use actor::{Supervisor, SupervisorArgs, SupervisorMsg};
pub use ops::{EngineSnapshot, OpsError, PoolsSnapshot, SubmitterSnapshot, Unprotected};
pub use tracker_tree::{TrackerActorSnapshot, TrackerChild, TrackerTree};

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

/// Node-wide engine settings.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// This process: its `node_id` and instance (the lease owner).
    pub owner: LeaseOwner,
    /// The chain id served.
    pub chain_id: u64,
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
    /// Restarts allowed within `restart_window` before giving up.
    pub max_restarts: u32,
    /// The window for `max_restarts`.
    pub restart_window: Duration,
}

/// Shared between the supervisor actor and the [`Engine`] facade.
#[derive(Debug)]
pub struct EngineShared {
    config: EngineConfig,
    pool: PgPool,
    contexts: std::sync::RwLock<HashMap<Address, Arc<SubmitterContext>>>,
    handles: DashMap<Address, SubmitterHandle>,
    /// The chain port, for contexts of submitters added on reload.
    chain: Arc<dyn ChainClient>,
    /// The receipt matcher's index, shared by every context.
    index: Arc<ReceiptIndex>,
    /// The resubmit timers, shared by every context.
    timers: Arc<ResubmitTimers>,
    /// Cluster view, shared by every context.
    membership: Arc<Membership>,
    /// Submitters removed from the configuration, draining until idle.
    removed: DashMap<Address, ()>,
    /// The node-wide writer of QUEUED creates (group commit across submitters).
    ingress: IngressWriter,
    /// The node-wide writer of the leaders' hot-path fenced writes.
    committer: GroupCommitter,
    /// Renews every lease this node holds, in one statement per interval.
    keeper: Arc<LeaseKeeper>,
}

/// Creates persisted per ingress transaction at most.
const INGRESS_MAX_BATCH: usize = 1000;

impl EngineShared {
    /// Every configured submitter (draining ones excluded).
    fn configured_submitters(&self) -> Vec<Address> {
        self.contexts
            .read()
            .map(|c| {
                c.keys()
                    .filter(|a| !self.removed.contains_key(*a))
                    .copied()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The context of a configured submitter.
    fn context(&self, address: &Address) -> Option<Arc<SubmitterContext>> {
        self.contexts
            .read()
            .ok()
            .and_then(|c| c.get(address).cloned())
    }

    /// The handle of a configured submitter, created on first use.
    fn handle(&self, address: Address) -> Option<SubmitterHandle> {
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
}

/// What the daemon holds: create intents, wake submitters, see handles, shut down.
#[derive(Debug, Clone)]
pub struct Engine {
    shared: Arc<EngineShared>,
    supervisor: ActorRef<SupervisorMsg>,
    tracker: Arc<TrackerTree>,
    /// The membership refresh task.
    members: Arc<tokio::task::JoinHandle<()>>,
    /// The lease keeper's task.
    keeper: Arc<tokio::task::JoinHandle<()>>,
}

impl SubmitterRouter for EngineShared {
    fn deliver(&self, submitter: Address, msg: SubmitterMsg) -> bool {
        self.handles
            .get(&submitter)
            .is_some_and(|handle| handle.send(msg))
    }

    fn deliver_repeating(&self, submitter: Address, msg: SubmitterMsg) -> bool {
        self.handles
            .get(&submitter)
            .is_some_and(|handle| handle.send_repeating(msg))
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

impl Engine {
    /// Starts the supervisor for the configured submitters.
    pub async fn start(
        config: EngineConfig,
        pool: PgPool,
        chain: Arc<dyn ChainClient>,
        submitters: Vec<SubmitterSpec>,
    ) -> Result<Engine, ractor::SpawnErr> {
        let index = Arc::new(ReceiptIndex::default());
        let timers = Arc::new(ResubmitTimers::default());
        let membership = Arc::new(Membership::new(config.balance));
        let keeper = Arc::new(LeaseKeeper::new(
            pool.clone(),
            config.owner.clone(),
            config.lease,
            membership.clone(),
        ));
        let ingress = IngressWriter::start(pool.clone(), INGRESS_MAX_BATCH, config.ingress);
        let shared = Arc::new(EngineShared {
            config,
            ingress,
            committer: GroupCommitter::spawn(pool.clone()),
            pool,
            contexts: std::sync::RwLock::new(HashMap::new()),
            handles: DashMap::new(),
            chain: chain.clone(),
            index: index.clone(),
            timers,
            membership: membership.clone(),
            removed: DashMap::new(),
            keeper: keeper.clone(),
        });
        if let Ok(mut contexts) = shared.contexts.write() {
            for spec in submitters {
                contexts.insert(spec.address, shared.new_context(spec));
            }
        }
        let tracker = Arc::new(TrackerTree::new(&shared));
        let args = SupervisorArgs {
            shared: shared.clone(),
            tracker: tracker.clone(),
        };
        // The root of the node's actor tree: it spawns and restarts the
        // tracking actors and the SubmitterActors.
        let (supervisor, _) = Actor::spawn(None, Supervisor, args).await?;
        let members = {
            let shared = shared.clone();
            tokio::spawn(crate::cluster::refresh_loop(
                shared.pool.clone(),
                shared.membership.clone(),
                move || shared.configured_submitters(),
            ))
        };
        let keeper = tokio::spawn(keeper.run());
        Ok(Engine {
            shared,
            supervisor,
            tracker,
            members: Arc::new(members),
            keeper: Arc::new(keeper),
        })
    }

    /// Accepts a create for a configured submitter (any node, leader or not).
    pub async fn create(&self, intent: NewIntent) -> Result<CreateOutcome, CreateError> {
        let address = intent.submitter.address;
        let Some(handle) = self.shared.handle(address) else {
            return Err(CreateError::UnknownSubmitter(address));
        };
        if handle.actor().is_none() {
            let _ = self.supervisor.send_message(SupervisorMsg::Ensure(address));
        }
        let outcome = handle.create(intent).await;
        // The actor may have stopped idle between the first look and the
        // commit, and the wake-up after the commit found none: start one.
        // (One that was still there then got the wake-up, or its stop is
        // followed by the supervisor's look for open work.)
        if outcome.is_ok() && handle.actor().is_none() {
            let _ = self.supervisor.send_message(SupervisorMsg::Ensure(address));
        }
        outcome
    }

    /// Another node (or this one) reported new work for a submitter.
    pub fn notify(&self, address: Address) {
        if self.shared.context(&address).is_none() {
            return;
        }
        match self.shared.handle(address) {
            Some(handle) if handle.actor().is_some() => handle.wake(),
            _ => {
                let _ = self.supervisor.send_message(SupervisorMsg::Ensure(address));
            }
        }
    }

    /// Another node handed this node the submitter's lease: try to take it now.
    pub fn notify_lease(&self, address: Address) {
        if self.shared.context(&address).is_none() {
            return;
        }
        match self.shared.handle(address).and_then(|h| h.actor()) {
            Some(actor) => {
                let _ = actor.send_message(SubmitterMsg::LeaseTick);
            }
            None => {
                let _ = self.supervisor.send_message(SupervisorMsg::Ensure(address));
            }
        }
    }

    /// The preferred node of every configured submitter and the live nodes,
    /// as this node sees them (lease balancing).
    pub fn membership(&self) -> &Membership {
        &self.shared.membership
    }

    /// An operator asked for an action on one of the submitter's
    /// transactions: the leader (if it runs here) claims it now.
    pub fn notify_resubmit(&self, address: Address) {
        if self.shared.context(&address).is_none() {
            return;
        }
        match self.shared.handle(address) {
            Some(handle) if handle.actor().is_some() => {
                handle.send(SubmitterMsg::ResubmitDue(Vec::new()));
            }
            _ => {
                let _ = self.supervisor.send_message(SupervisorMsg::Ensure(address));
            }
        }
    }

    /// Leases this node holds and its lease keeper renews (one statement
    /// per renew interval for all of them; none while this is zero).
    pub fn leases_held(&self) -> usize {
        self.shared.keeper.held_count()
    }

    /// How far the head watcher and the finality workers have got.
    pub fn progress(&self) -> &TrackerProgress {
        self.tracker.progress()
    }

    /// The tracking actors (head watcher, pools) and their restarts.
    pub fn tracker(&self) -> &TrackerTree {
        &self.tracker
    }

    /// Every submitter handle on this node.
    pub fn handles(&self) -> Vec<SubmitterHandle> {
        self.shared
            .handles
            .iter()
            .map(|h| h.value().clone())
            .collect()
    }

    /// Stops everything at once without releasing leases or finishing work:
    /// what a crash looks like to the rest of the cluster (tests, and the
    /// last resort of a shutdown that timed out).
    pub fn kill(&self) {
        // Renewals first: a dead process renews nothing.
        self.keeper.abort();
        self.members.abort();
        self.supervisor.kill();
        self.tracker.stop();
        for handle in self.shared.handles.iter() {
            if let Some(actor) = handle.actor() {
                actor.kill();
            }
        }
    }

    /// Drains every SubmitterActor (releasing leases) and stops the supervisor.
    pub async fn shutdown(&self, timeout: Duration) {
        let result = ractor::call_t!(
            self.supervisor,
            SupervisorMsg::Shutdown,
            timeout.as_millis() as u64
        );
        if let Err(err) = result {
            tracing::warn!(target: "txmgr::supervisor", error = %err, "supervisor shutdown incomplete");
        }
        self.supervisor.stop(None);
        self.tracker.stop();
        self.members.abort();
        self.keeper.abort();
    }
}
