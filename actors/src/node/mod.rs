//! This node's engine as the daemon sees it: the [`Engine`] facade that
//! starts the actor tree, accepts creates, wakes submitters, answers the
//! ops view and operator actions, and shuts everything down.
//!
//! The actors themselves live elsewhere: the root of the tree is the
//! node's [`NodeRoot`], whose children are one
//! [`Supervisor`](crate::supervisor::Supervisor) per chain, each spawning
//! and restarting its chain's tracking actors and one SubmitterActor per
//! active submitter.

mod ops;
mod snapshot;

use std::{collections::HashMap, sync::Arc, time::Duration};

use alloy::primitives::Address;
use dashmap::{DashMap, DashSet};
use ractor::ActorRef;
use sqlx::PgPool;

use crate::{
    chain::ChainClient,
    cluster::Membership,
    domain::{CreateError, CreateOutcome, NewIntent},
    submitter::{LeaseKeeper, SubmitterHandle, SubmitterMsg},
    supervisor::{EngineShared, SupervisorArgs, SupervisorMsg, TrackerTree},
    tracker::{ReceiptIndex, ResubmitTimers, TrackerProgress},
};

pub use crate::supervisor::NodeRoot;
pub use crate::supervisor::{EngineConfig, NodeServices, SubmitterSpec};
pub use ops::{OpsError, Unprotected};
pub use snapshot::{EngineLoad, EngineSnapshot, PoolsSnapshot, SubmitterSnapshot};

/// What the daemon holds: create intents, wake submitters, see handles, shut down.
#[derive(Debug, Clone)]
pub struct Engine {
    shared: Arc<EngineShared>,
    /// The chain's supervisor under the node's root (replaced on a restart).
    subtree: Arc<crate::supervisor::ChainSubtree>,
    /// The node's root actor, parent of the chain's supervisor.
    root: NodeRoot,
    /// The engine started `root` itself (no node services given): it stops
    /// with the engine.
    owns_root: bool,
    tracker: Arc<TrackerTree>,
    /// The membership refresh task.
    members: Arc<tokio::task::JoinHandle<()>>,
    /// The lease keeper's task.
    keeper: Arc<tokio::task::JoinHandle<()>>,
}

impl Engine {
    /// The root and database writers this engine uses: the node's, when
    /// the daemon shares them between its chains.
    pub fn services(&self) -> NodeServices {
        NodeServices {
            root: self.root.clone(),
            ingress: self.shared.ingress.clone(),
            committer: self.shared.committer.clone(),
            queue: self.shared.queue.clone(),
        }
    }

    /// Starts the supervisor for the configured submitters.
    pub async fn start(
        config: EngineConfig,
        pool: PgPool,
        chain: Arc<dyn ChainClient>,
        submitters: Vec<SubmitterSpec>,
    ) -> Result<Engine, ractor::SpawnErr> {
        crate::metrics::name_chain(config.chain_id.into(), &config.chain_name);
        crate::metrics::initialise_chain_counters(&config.chain_name);
        let index = Arc::new(ReceiptIndex::default());
        let timers = Arc::new(ResubmitTimers::default());
        let membership = Arc::new(Membership::new(config.balance));
        let keeper = Arc::new(LeaseKeeper::new(
            pool.clone(),
            config.owner.clone(),
            config.lease,
            membership.clone(),
            config.chain_id.into(),
        ));
        let owns_root = config.node_services.is_none();
        let services = match config.node_services.clone() {
            Some(services) => services,
            None => NodeServices::start(&pool, config.ingress).await?,
        };
        let root = services.root;
        let shared = Arc::new(EngineShared {
            config,
            ingress: services.ingress,
            committer: services.committer,
            queue: services.queue,
            pool,
            contexts: std::sync::RwLock::new(HashMap::new()),
            handles: DashMap::new(),
            chain: chain.clone(),
            index: index.clone(),
            timers,
            membership: membership.clone(),
            removed: DashSet::new(),
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
        // The chain's subtree under the node's root: its supervisor spawns
        // and restarts the tracking actors and the SubmitterActors; the
        // root starts the supervisor again should it end.
        let subtree = root
            .adopt(args)
            .await
            .map_err(|err| ractor::SpawnErr::StartupFailed(err.into()))?;
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
            subtree,
            root,
            owns_root,
            tracker,
            members: Arc::new(members),
            keeper: Arc::new(keeper),
        })
    }

    /// The chain's supervisor now (a new one after the root restarted it).
    fn supervisor(&self) -> ActorRef<SupervisorMsg> {
        self.subtree.supervisor()
    }

    /// Times the node's root started this chain's supervisor again.
    pub fn supervisor_restarts(&self) -> u32 {
        self.subtree.restarts()
    }

    /// Ends the chain's supervisor as a panic in one of its handlers would
    /// (with its subtree): the node's root starts it again. For tests of
    /// the actor tree.
    #[doc(hidden)]
    pub fn crash_supervisor(&self) {
        self.supervisor().kill();
    }

    /// Accepts a create for a configured submitter (any node, leader or not).
    pub async fn create(&self, intent: NewIntent) -> Result<CreateOutcome, CreateError> {
        let address = intent.submitter.address;
        let Some(handle) = self.shared.handle(address) else {
            return Err(CreateError::UnknownSubmitter(address));
        };
        if let Some(ctx) = self.shared.context(&address) {
            if let Some(reason) = ctx.pause_refusal(handle.status().pause().as_deref()) {
                return Err(CreateError::Paused(reason));
            }
            if let Err(violation) = ctx.check_policy(&intent.intent) {
                metrics::counter!(crate::metrics::POLICY_REFUSALS,
                    "chain" => crate::metrics::chain_label(ctx.key.chain_id), "rule" => violation.rule)
                .increment(1);
                return Err(violation.into());
            }
        }
        if handle.actor().is_none() {
            let _ = self
                .supervisor()
                .send_message(SupervisorMsg::Ensure(address));
        }
        let outcome = handle.create(intent).await;
        // The actor may have stopped idle between the first look and the
        // commit, and the wake-up after the commit found none: start one.
        // (One that was still there then got the wake-up, or its stop is
        // followed by the supervisor's look for open work.)
        if outcome.is_ok() && handle.actor().is_none() {
            let _ = self
                .supervisor()
                .send_message(SupervisorMsg::Ensure(address));
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
                let _ = self
                    .supervisor()
                    .send_message(SupervisorMsg::Ensure(address));
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
                let _ = self
                    .supervisor()
                    .send_message(SupervisorMsg::Ensure(address));
            }
        }
    }

    /// The preferred node of every configured submitter and the live nodes,
    /// as this node sees them (lease balancing).
    pub fn membership(&self) -> &Membership {
        &self.shared.membership
    }

    /// [`Engine::membership`] as a shared handle (the webhooks balance over it too).
    pub fn membership_handle(&self) -> Arc<Membership> {
        self.shared.membership.clone()
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
                let _ = self
                    .supervisor()
                    .send_message(SupervisorMsg::Ensure(address));
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
        self.subtree.retire();
        self.supervisor().kill();
        if self.owns_root {
            self.root.stop();
        }
        self.tracker.stop();
        for handle in self.shared.handles.iter() {
            if let Some(actor) = handle.actor() {
                actor.kill();
            }
        }
    }

    /// Drains every SubmitterActor (releasing leases) and stops the supervisor.
    pub async fn shutdown(&self, timeout: Duration) {
        self.subtree.retire();
        let supervisor = self.supervisor();
        let result = ractor::call_t!(
            supervisor,
            SupervisorMsg::Shutdown,
            timeout.as_millis() as u64
        );
        if let Err(err) = result {
            tracing::warn!(target: "txmgr::supervisor", error = %err, "supervisor shutdown incomplete");
        }
        supervisor.stop(None);
        self.tracker.stop();
        self.members.abort();
        self.keeper.abort();
        if self.owns_root {
            self.root.stop();
        }
    }
}
