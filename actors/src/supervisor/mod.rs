//! The Supervisor (one per node) and the [`Engine`] facade the daemon uses.
//!
//! The supervisor spawns SubmitterActors lazily (first create, a `NOTIFY`
//! from another node, or discovery of unfinished work whose lease is free),
//! restarts a failed or fenced one with exponential backoff, and gives up on
//! it (role `failed`) after too many restarts in a window. It overrides
//! ractor's default supervision, which would stop the supervisor with its
//! child.

mod actor;
mod discovery;
mod ops;

use std::{collections::HashMap, sync::Arc, time::Duration};

use alloy::primitives::Address;
use dashmap::DashMap;
use ractor::{Actor, ActorRef};
use sqlx::PgPool;

use crate::{
    chain::ChainClient,
    domain::{CreateError, CreateOutcome, NewIntent},
    signer::TxSigner,
    submitter::{LeaseTiming, SubmitterContext, SubmitterHandle, SubmitterSettings},
};

pub use actor::{Supervisor, SupervisorMsg};
pub use ops::{EngineSnapshot, OpsError, PoolsSnapshot, SubmitterSnapshot, Unprotected};

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
    /// This node's id.
    pub node_id: Arc<str>,
    /// The chain id served.
    pub chain_id: u64,
    /// Lease timing.
    pub lease: LeaseTiming,
    /// Chain check period of leaders.
    pub poll_interval: Duration,
    /// Period of the scan for unfinished work.
    pub discovery_interval: Duration,
    /// How long a create may wait for its commit.
    pub create_timeout: Duration,
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
    /// Submitters removed from the configuration, draining until idle.
    removed: DashMap<Address, ()>,
}

impl EngineShared {
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
                        self.pool.clone(),
                        settings.ingress_capacity as usize,
                        settings.batch_size as usize,
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
}

impl Engine {
    /// Starts the supervisor for the configured submitters.
    pub async fn start(
        config: EngineConfig,
        pool: PgPool,
        chain: Arc<dyn ChainClient>,
        submitters: Vec<SubmitterSpec>,
    ) -> Result<Engine, ractor::SpawnErr> {
        let contexts = submitters
            .into_iter()
            .map(|spec| {
                let ctx = SubmitterContext {
                    key: crate::SubmitterKey::new(config.chain_id, spec.address),
                    node_id: config.node_id.clone(),
                    pool: pool.clone(),
                    chain: chain.clone(),
                    signer: spec.signer,
                    settings: std::sync::RwLock::new(spec.settings),
                    lease: config.lease,
                    poll_interval: config.poll_interval,
                };
                (spec.address, Arc::new(ctx))
            })
            .collect();
        let shared = Arc::new(EngineShared {
            config,
            pool,
            contexts: std::sync::RwLock::new(contexts),
            handles: DashMap::new(),
            chain: chain.clone(),
            index: index.clone(),
            removed: DashMap::new(),
        });
        let (supervisor, _) = Actor::spawn(None, Supervisor, shared.clone()).await?;
        Ok(Engine { shared, supervisor })
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
        handle.create(intent).await
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
        self.supervisor.kill();
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
    }
}
