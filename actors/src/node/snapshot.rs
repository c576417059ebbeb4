//! The status snapshot behind `GET /v1/ops/actors`, read from the handles'
//! shared atomics and the pools' counters, never by calling into an actor,
//! so it answers at once while an actor is busy.

use std::{sync::Arc, time::Duration};

use alloy::primitives::Address;

use super::Engine;
use crate::{
    store::LeaseOwner,
    submitter::{Role, SubmitterSettings},
    supervisor::TrackerActorSnapshot,
};

/// One SubmitterActor as the ops view shows it.
#[derive(Debug, Clone)]
pub struct SubmitterSnapshot {
    /// The submitter.
    pub address: Address,
    /// Its role on this node.
    pub role: Role,
    /// Fencing token while leader (0 otherwise).
    pub fencing_token: i64,
    /// Local lease time left, while leader.
    pub lease_time_left: Option<Duration>,
    /// Messages queued for the actor.
    pub mailbox_depth: usize,
    /// Creates waiting to be persisted.
    pub ingress_depth: usize,
    /// Restarts by the supervisor.
    pub restarts: u32,
    /// The last error reported.
    pub last_error: Option<String>,
    /// Why the submitter is in PROTECT.
    pub protect_reason: Option<String>,
    /// An operator's pause, as this node last read it.
    pub pause: Option<Arc<crate::store::pause::Pause>>,
    /// The lowest unmined nonce is STUCK (known where the leader runs).
    pub head_of_line_blocked: bool,
    /// An actor runs for it on this node.
    pub running: bool,
    /// Removed from the configuration: refuses creates, stops when idle.
    pub draining: bool,
    /// Its current settings.
    pub settings: SubmitterSettings,
    /// Last balance read by the leader here (wei) and whether it was below
    /// `min_balance`; None where no leader with `min_balance` ran.
    pub funds: Option<(u128, bool)>,
    /// Where its key lives: `env`, `keystore`, `remote` or `aws_kms`.
    pub signer_kind: &'static str,
}

/// The tracking pools of this node.
#[derive(Debug, Clone)]
pub struct PoolsSnapshot {
    /// Newest block processed by the head watcher.
    pub head: u64,
    /// Newest head every finality worker has processed.
    pub finality_head: u64,
    /// Attempt hashes the receipt matcher looks for.
    pub receipt_index_size: usize,
    /// Receipt matcher workers.
    pub receipt_workers: usize,
    /// Finality workers.
    pub finality_workers: usize,
    /// The resubmit timers' queue.
    pub resubmit: crate::tracker::ResubmitPoolStats,
    /// Blocks waiting for the receipt matchers.
    pub receipt_queue: crate::tracker::PoolQueue,
    /// Heads waiting for the finality workers.
    pub finality_queue: crate::tracker::PoolQueue,
    /// The head watcher and every pool worker, with their restarts.
    pub actors: Vec<TrackerActorSnapshot>,
}

/// Everything `GET /v1/ops/actors` shows about this node's engine.
#[derive(Debug, Clone)]
pub struct EngineSnapshot {
    /// This node.
    pub node_id: Arc<str>,
    /// This process's instance of it (lease owner = node id + instance).
    pub instance: Arc<str>,
    /// The chain served.
    pub chain_id: u64,
    /// The supervisor is alive.
    pub supervisor_alive: bool,
    /// Times the node's root started the chain's supervisor again.
    pub supervisor_restarts: u32,
    /// Every configured (or still draining) submitter, in address order.
    pub submitters: Vec<SubmitterSnapshot>,
    /// The tracking pools.
    pub pools: PoolsSnapshot,
}

/// What the node's gauges need: messages and creates queued over every
/// submitter, and submitters per role.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineLoad {
    /// Messages queued for submitter actors.
    pub mailbox_depth: usize,
    /// Creates waiting to be persisted.
    pub ingress_depth: usize,
    /// Submitters per role name (roles without any are absent).
    pub roles: std::collections::HashMap<&'static str, usize>,
}

impl Engine {
    /// This node's id.
    pub fn node_id(&self) -> &str {
        &self.shared.config.owner.node_id
    }

    /// This process's lease owner identity (node id + instance).
    pub fn owner(&self) -> &LeaseOwner {
        &self.shared.config.owner
    }

    /// Every submitter with a context on this node, in address order.
    pub fn submitters(&self) -> Vec<Address> {
        self.shared.addresses()
    }

    /// A submitter's current settings.
    pub fn settings(&self, address: Address) -> Option<SubmitterSettings> {
        self.shared.context(&address).map(|ctx| ctx.settings())
    }

    /// The submitter is paused by this node's configuration (`paused = true`).
    pub fn config_paused(&self, address: Address) -> bool {
        self.shared
            .context(&address)
            .and_then(|ctx| ctx.settings.read().ok().map(|s| s.paused))
            .unwrap_or(false)
    }

    /// Every configured submitter with a spend limit, and the limit.
    pub fn spend_limits(&self) -> Vec<(Address, crate::submitter::settings::SpendLimit)> {
        self.shared
            .contexts
            .read()
            .map(|contexts| {
                contexts
                    .iter()
                    .filter_map(|(address, ctx)| {
                        let limit = ctx.settings.read().ok()?.policy.spend_limit?;
                        Some((*address, limit))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The gauges' counts, read from the handles' atomics without building
    /// the ops snapshot (with 10,000 submitters that snapshot allocates ~8 MB,
    /// sorted and with every submitter's settings, each gauge interval).
    pub fn load(&self) -> EngineLoad {
        let mut load = EngineLoad::default();
        for entry in self.shared.handles.iter() {
            let handle = entry.value();
            load.mailbox_depth += handle.mailbox_depth();
            load.ingress_depth += handle.ingress_depth();
            *load
                .roles
                .entry(handle.status().role().as_str())
                .or_default() += 1;
        }
        load
    }

    /// The status of every submitter and pool, from shared state only: never
    /// waits for a busy actor.
    pub fn snapshot(&self) -> EngineSnapshot {
        let submitters = self
            .shared
            .addresses()
            .into_iter()
            .filter_map(|address| {
                let ctx = self.shared.context(&address)?;
                let handle = self.shared.handle(address)?;
                let status = handle.status();
                Some(SubmitterSnapshot {
                    address,
                    role: status.role(),
                    fencing_token: status.fencing_token(),
                    lease_time_left: status.lease_time_left(),
                    mailbox_depth: handle.mailbox_depth(),
                    ingress_depth: handle.ingress_depth(),
                    restarts: status.restarts(),
                    last_error: status.last_error(),
                    protect_reason: status.protect_reason(),
                    pause: status.pause(),
                    head_of_line_blocked: status.head_of_line_blocked(),
                    running: handle.actor().is_some(),
                    draining: self.shared.removed.contains(&address),
                    settings: ctx.settings(),
                    funds: status.funds(),
                    signer_kind: ctx.signer.kind(),
                })
            })
            .collect();
        let progress = self.tracker.progress();
        EngineSnapshot {
            node_id: self.shared.config.owner.node_id.clone(),
            instance: self.shared.config.owner.instance.clone(),
            chain_id: self.shared.config.chain_id,
            supervisor_alive: matches!(
                self.supervisor().get_status(),
                ractor::ActorStatus::Running | ractor::ActorStatus::Upgrading
            ),
            supervisor_restarts: self.supervisor_restarts(),
            submitters,
            pools: PoolsSnapshot {
                head: progress.head(),
                finality_head: progress.finality_head(),
                receipt_index_size: self.shared.index.len(),
                receipt_workers: progress.receipt_workers(),
                finality_workers: progress.finality_workers(),
                actors: self.tracker.snapshot(),
                resubmit: self.shared.timers.stats(),
                receipt_queue: progress.receipt_queue(),
                finality_queue: progress.finality_queue(),
            },
        }
    }
}
