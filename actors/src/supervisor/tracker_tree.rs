//! The chain-following actors as children of the Supervisor: the head
//! watcher and the receipt, finality and resubmit pools are spawned linked
//! to it, and one that fails (or stops unasked) is spawned again in its slot
//! after a backoff, so a panic in a pool worker cannot silently end tracking.
//!
//! ```text
//! Supervisor ─┬─ HeadWatcher
//!             ├─ ReceiptWorker[0..n]   ─┐ senders look the slot up per send
//!             ├─ FinalityWorker[0..n]  ─┤ (WorkerSlots / ResubmitTimers), so
//!             ├─ ResubmitWorker[0..n]  ─┘ they reach a restarted worker
//!             └─ SubmitterActor per submitter (see `actor.rs`)
//! ```

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use ractor::{Actor, ActorCell, ActorId};

use super::restart_backoff::Restarts;
use tokio::sync::watch;

use super::EngineShared;
use crate::{
    chain::{ChainClient, WsTarget},
    metrics::ACTOR_RESTARTS,
    tracker::{
        CanonicalWindow, FinalityMsg, FinalityWorker, FinalityWorkerArgs, HeadWatcher,
        HeadWatcherArgs, ReceiptIndex, ReceiptMsg, ReceiptWorker, ReceiptWorkerArgs,
        ResubmitTimers, SubmitterRouter, TrackerProgress, WorkerSlots,
    },
};

/// One tracking actor, by role and slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TrackerChild {
    /// The head watcher (one per node).
    Head,
    /// Receipt matcher worker of this slot.
    Receipt(usize),
    /// Finality worker of this slot.
    Finality(usize),
    /// Resubmit timer worker of this slot.
    Resubmit(usize),
}

impl TrackerChild {
    /// The `actor` label of the restart metric and the ops view.
    pub fn kind(self) -> &'static str {
        match self {
            TrackerChild::Head => "head_watcher",
            TrackerChild::Receipt(_) => "receipt_worker",
            TrackerChild::Finality(_) => "finality_worker",
            TrackerChild::Resubmit(_) => "resubmit_worker",
        }
    }

    /// Its slot in its pool (0 for the head watcher).
    pub fn slot(self) -> usize {
        match self {
            TrackerChild::Head => 0,
            TrackerChild::Receipt(slot)
            | TrackerChild::Finality(slot)
            | TrackerChild::Resubmit(slot) => slot,
        }
    }
}

/// One tracking actor as the ops view shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackerActorSnapshot {
    /// Which actor.
    pub child: TrackerChild,
    /// An actor runs in this slot now (false while a restart waits).
    pub running: bool,
    /// Restarts since the node started.
    pub restarts: u32,
}

/// The tracking actors of a node: what they are spawned with, which actor
/// runs in each slot, and their restarts. Shared by the Supervisor (spawns,
/// restarts) and the Engine (ops view, stop).
#[derive(Debug)]
pub struct TrackerTree {
    progress: Arc<TrackerProgress>,
    chain: Arc<dyn ChainClient>,
    pool: sqlx::PgPool,
    chain_id: u64,
    poll_interval: Duration,
    window: Arc<CanonicalWindow>,
    index: Arc<ReceiptIndex>,
    timers: Arc<ResubmitTimers>,
    router: Arc<dyn SubmitterRouter>,
    ws: Option<watch::Receiver<Option<WsTarget>>>,
    resubmit_workers: usize,
    receipts: Arc<WorkerSlots<ReceiptMsg>>,
    finality: Arc<WorkerSlots<FinalityMsg>>,
    /// Every running tracking actor, by its id (the supervision events name ids).
    children: Mutex<HashMap<ActorId, TrackerChild>>,
    /// The running actor of each tracking role and slot.
    cells: Mutex<HashMap<TrackerChild, ActorCell>>,
    restarts: Mutex<HashMap<TrackerChild, Restarts>>,
    /// Set by a shutdown or kill: terminations are expected, nothing restarts.
    stopping: AtomicBool,
}

impl TrackerTree {
    /// The tree for `shared`'s configuration; nothing runs until
    /// [`TrackerTree::spawn_all`].
    pub(crate) fn new(shared: &Arc<EngineShared>) -> Self {
        let config = &shared.config;
        let chain = shared.chain.clone();
        let router: Arc<dyn SubmitterRouter> = shared.clone();
        Self {
            progress: Arc::new(TrackerProgress::new(
                config.receipt_workers,
                config.finality_workers,
            )),
            ws: chain.ws_targets(),
            chain,
            pool: shared.pool.clone(),
            chain_id: config.chain_id,
            poll_interval: config.poll_interval,
            window: Arc::new(CanonicalWindow::new(config.window_blocks)),
            index: shared.index.clone(),
            timers: shared.timers.clone(),
            router,
            resubmit_workers: config.resubmit_workers.max(1),
            receipts: Arc::new(WorkerSlots::new(config.receipt_workers)),
            finality: Arc::new(WorkerSlots::new(config.finality_workers)),
            children: Mutex::new(HashMap::new()),
            cells: Mutex::new(HashMap::new()),
            restarts: Mutex::new(HashMap::new()),
            stopping: AtomicBool::new(false),
        }
    }

    /// How far the head watcher and the finality workers have got.
    pub fn progress(&self) -> &TrackerProgress {
        &self.progress
    }

    /// Every tracking actor, pools in slot order.
    pub fn children(&self) -> Vec<TrackerChild> {
        std::iter::once(TrackerChild::Head)
            .chain((0..self.receipts.len()).map(TrackerChild::Receipt))
            .chain((0..self.finality.len()).map(TrackerChild::Finality))
            .chain((0..self.resubmit_workers).map(TrackerChild::Resubmit))
            .collect()
    }

    /// Spawns every tracking actor linked to `supervisor`, pools first so
    /// the head watcher's first block finds them.
    pub(super) async fn spawn_all(&self, supervisor: &ActorCell) -> Result<(), ractor::SpawnErr> {
        let mut order = self.children();
        order.rotate_left(1);
        for child in order {
            self.spawn(child, supervisor).await?;
        }
        Ok(())
    }

    /// Spawns `child` into its slot, linked to `supervisor`.
    pub(super) async fn spawn(
        &self,
        child: TrackerChild,
        supervisor: &ActorCell,
    ) -> Result<(), ractor::SpawnErr> {
        let parent = supervisor.clone();
        let cell = match child {
            TrackerChild::Head => {
                let args = HeadWatcherArgs {
                    chain: self.chain.clone(),
                    chain_label: crate::metrics::chain_label(self.chain_id.into()),
                    window: self.window.clone(),
                    receipt_workers: self.receipts.clone(),
                    finality_workers: self.finality.clone(),
                    poll_interval: self.poll_interval,
                    progress: self.progress.clone(),
                    ws: self.ws.clone(),
                };
                Actor::spawn_linked(None, HeadWatcher, args, parent)
                    .await?
                    .0
                    .get_cell()
            }
            TrackerChild::Receipt(slot) => {
                self.progress.reset_receipt_slot(slot);
                let args = ReceiptWorkerArgs {
                    chain: self.chain.clone(),
                    chain_label: crate::metrics::chain_label(self.chain_id.into()),
                    index: self.index.clone(),
                    router: self.router.clone(),
                    retry_after: self.poll_interval,
                    slot,
                    progress: self.progress.clone(),
                };
                let (actor, _) = Actor::spawn_linked(None, ReceiptWorker, args, parent).await?;
                self.receipts.set(slot, actor.clone());
                actor.get_cell()
            }
            TrackerChild::Finality(slot) => {
                self.progress.reset_finality_slot(slot);
                let args = FinalityWorkerArgs {
                    chain: self.chain.clone(),
                    pool: self.pool.clone(),
                    chain_id: self.chain_id.into(),
                    window: self.window.clone(),
                    router: self.router.clone(),
                    slot,
                    slots: self.finality.len(),
                    progress: self.progress.clone(),
                };
                let (actor, _) = Actor::spawn_linked(None, FinalityWorker, args, parent).await?;
                self.finality.set(slot, actor.clone());
                actor.get_cell()
            }
            TrackerChild::Resubmit(slot) => self
                .timers
                .spawn_worker(slot, self.resubmit_workers, self.router.clone(), parent)
                .await?
                .get_cell(),
        };
        if let Ok(mut children) = self.children.lock() {
            children.insert(cell.get_id(), child);
        }
        if let Ok(mut cells) = self.cells.lock() {
            cells.insert(child, cell);
        }
        Ok(())
    }

    /// The tracking actor `id` ended: which one it was (None: not one of
    /// these, or ended by a stop), and the delay before its restart, counted
    /// in the metric and the ops view.
    pub(super) fn exited(&self, id: ActorId) -> Option<(TrackerChild, Duration)> {
        let child = self.children.lock().ok()?.remove(&id)?;
        if let Ok(mut cells) = self.cells.lock() {
            if cells.get(&child).is_some_and(|cell| cell.get_id() == id) {
                cells.remove(&child);
            }
        }
        if self.stopping.load(Ordering::SeqCst) {
            return None;
        }
        let delay = self.next_restart_delay(child)?;
        Some((child, delay))
    }

    /// Counts a restart of `child` (in the ops view and the metric alike,
    /// whether it follows an exit or a failed respawn) and answers its
    /// backoff delay.
    fn next_restart_delay(&self, child: TrackerChild) -> Option<Duration> {
        let delay = self
            .restarts
            .lock()
            .ok()?
            .entry(child)
            .or_default()
            .next_delay(Instant::now());
        metrics::counter!(ACTOR_RESTARTS, "chain" => crate::metrics::chain_label(self.chain_id.into()), "actor" => child.kind()).increment(1);
        Some(delay)
    }

    /// A respawn of `child` failed: the delay before the next try (None
    /// while stopping).
    pub(super) fn respawn_failed(&self, child: TrackerChild) -> Option<Duration> {
        if self.is_stopping() {
            return None;
        }
        self.next_restart_delay(child)
    }

    /// Whether the tree is being stopped (no restart then).
    pub(super) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// The running actor of `child`, if any (tests stop one through it).
    pub fn cell(&self, child: TrackerChild) -> Option<ActorCell> {
        self.cells.lock().ok()?.get(&child).cloned()
    }

    /// Every tracking actor with its restarts, in [`TrackerTree::children`] order.
    pub fn snapshot(&self) -> Vec<TrackerActorSnapshot> {
        // By the actor's own status too: after the supervisor is gone no
        // termination event removes a stopped actor from `cells`.
        let running: Vec<TrackerChild> = self
            .cells
            .lock()
            .map(|c| {
                c.iter()
                    .filter(|(_, cell)| {
                        matches!(
                            cell.get_status(),
                            ractor::ActorStatus::Starting
                                | ractor::ActorStatus::Running
                                | ractor::ActorStatus::Upgrading
                        )
                    })
                    .map(|(child, _)| *child)
                    .collect()
            })
            .unwrap_or_default();
        let restarts = self.restarts.lock().map(|r| r.clone()).unwrap_or_default();
        self.children()
            .into_iter()
            .map(|child| TrackerActorSnapshot {
                child,
                running: running.contains(&child),
                restarts: restarts.get(&child).map_or(0, |r| r.total),
            })
            .collect()
    }

    /// Stops every tracking actor; none is restarted afterwards.
    pub(crate) fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        let cells: Vec<ActorCell> = self
            .cells
            .lock()
            .map(|mut c| c.drain().map(|(_, cell)| cell).collect())
            .unwrap_or_default();
        for cell in cells {
            cell.stop(None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_name_the_role_and_slot() {
        assert_eq!(TrackerChild::Head.kind(), "head_watcher");
        assert_eq!(TrackerChild::Finality(2).kind(), "finality_worker");
        assert_eq!(TrackerChild::Resubmit(3).slot(), 3);
    }
}
