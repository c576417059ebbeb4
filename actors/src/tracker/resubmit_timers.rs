//! The resubmit pool: one timer per accepted, unmined intent (README
//! "Resubmission, fee bumps, STUCK and cancel").
//!
//! Each worker keeps its intents in a deadline-ordered set and arms a single
//! actor timer for the earliest one. On expiry it tells the owning
//! SubmitterActor, which claims (fenced) before it acts; the timers are only
//! a wake-up, so a lost or duplicated expiry costs nothing. Leaders rebuild
//! their timers from the database when they acquire the lease, and the
//! leader's slow sweep claims anything overdue as a safety net.

use std::{
    collections::{BTreeSet, HashMap},
    hash::{Hash, Hasher},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, RwLock,
    },
    time::{Duration, Instant},
};

use alloy::primitives::Address;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::task::JoinHandle;
use uuid::Uuid;

use super::SubmitterRouter;
use super::TrackerReport;

/// Messages of a resubmit worker.
#[derive(Debug)]
pub enum ResubmitMsg {
    /// (Re)arm the timers of these intents of a submitter: due after each duration.
    Schedule(Address, Vec<(Uuid, Duration)>),
    /// Drop the timers of these intents (final, or no longer ours).
    Forget(Vec<Uuid>),
    /// Drop every timer of a submitter (its leader stopped here).
    ForgetSubmitter(Address),
    /// Internal: the earliest timer may have expired.
    Fire,
}

/// Queue figures a worker publishes for the ops view.
#[derive(Debug, Default)]
pub(crate) struct WorkerGauge {
    pending: AtomicU64,
    /// Milliseconds since the Unix epoch of the earliest deadline (0 = none).
    earliest_ms: AtomicU64,
}

/// The pool's handle: routes a submitter's timers to one worker (by hash), so
/// one submitter's expiries stay in order.
#[derive(Debug, Default)]
pub struct ResubmitTimers {
    workers: RwLock<Vec<ActorRef<ResubmitMsg>>>,
    gauges: RwLock<Vec<Arc<WorkerGauge>>>,
}

/// The pool's queue as the ops view shows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResubmitPoolStats {
    /// Workers running.
    pub workers: usize,
    /// Timers armed (intents waiting for their next resubmit).
    pub pending: u64,
    /// How long the most overdue timer has been due (zero when none is).
    pub oldest_overdue: Duration,
}

impl ResubmitTimers {
    fn worker(&self, submitter: &Address) -> Option<ActorRef<ResubmitMsg>> {
        let workers = self.workers.read().ok()?;
        if workers.is_empty() {
            return None;
        }
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        submitter.hash(&mut hasher);
        let slot = (hasher.finish() % workers.len() as u64) as usize;
        workers.get(slot).cloned()
    }

    /// Arms (or re-arms) timers of a submitter's intents.
    pub fn schedule(&self, submitter: Address, due: Vec<(Uuid, Duration)>) {
        if due.is_empty() {
            return;
        }
        if let Some(worker) = self.worker(&submitter) {
            let _ = worker.send_message(ResubmitMsg::Schedule(submitter, due));
        }
    }

    /// Drops timers of intents that need no more resubmits.
    pub fn forget(&self, submitter: Address, ids: Vec<Uuid>) {
        if ids.is_empty() {
            return;
        }
        if let Some(worker) = self.worker(&submitter) {
            let _ = worker.send_message(ResubmitMsg::Forget(ids));
        }
    }

    /// Drops every timer of a submitter.
    pub fn forget_submitter(&self, submitter: Address) {
        if let Some(worker) = self.worker(&submitter) {
            let _ = worker.send_message(ResubmitMsg::ForgetSubmitter(submitter));
        }
    }

    /// Queue figures of the whole pool.
    pub fn stats(&self) -> ResubmitPoolStats {
        let gauges = self.gauges.read().map(|g| g.clone()).unwrap_or_default();
        let now = unix_ms(std::time::SystemTime::now());
        let earliest = gauges
            .iter()
            .map(|g| g.earliest_ms.load(Ordering::Acquire))
            .filter(|ms| *ms > 0)
            .min();
        ResubmitPoolStats {
            workers: gauges.len(),
            pending: gauges
                .iter()
                .map(|g| g.pending.load(Ordering::Acquire))
                .sum(),
            oldest_overdue: earliest
                .map(|ms| Duration::from_millis(now.saturating_sub(ms)))
                .unwrap_or_default(),
        }
    }

    /// Spawns the worker of `slot` (of `count`), linked to `supervisor`,
    /// reporting expiries through `router`; a restart replaces the slot's
    /// dead worker, whose timers are lost (the leaders' sweep claims what
    /// falls due meanwhile).
    pub(crate) async fn spawn_worker(
        &self,
        slot: usize,
        count: usize,
        router: Arc<dyn SubmitterRouter>,
        supervisor: ractor::ActorCell,
    ) -> Result<ActorRef<ResubmitMsg>, ractor::SpawnErr> {
        let gauge = Arc::new(WorkerGauge::default());
        let args = ResubmitWorkerArgs {
            router,
            gauge: gauge.clone(),
        };
        let (worker, _) = Actor::spawn_linked(None, ResubmitWorker, args, supervisor).await?;
        if let Ok(mut workers) = self.workers.write() {
            set_slot(&mut workers, slot, count, worker.clone());
        }
        if let Ok(mut gauges) = self.gauges.write() {
            set_slot(&mut gauges, slot, count, gauge);
        }
        Ok(worker)
    }
}

/// Puts `item` at `slot` of a pool of `count`, growing the pool up to
/// `count` on first spawns (a slot not spawned yet gets a copy of `item`
/// until its own spawn replaces it, so hashing sees the final size).
fn set_slot<T: Clone>(items: &mut Vec<T>, slot: usize, count: usize, item: T) {
    while items.len() < count.max(slot + 1) {
        items.push(item.clone());
    }
    items[slot] = item;
}

fn unix_ms(at: std::time::SystemTime) -> u64 {
    at.duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The actor timer armed for the earliest deadline.
type Timer = JoinHandle<Result<(), ractor::MessagingErr<ResubmitMsg>>>;

/// One worker of the pool.
#[derive(Debug, Default)]
pub struct ResubmitWorker;

/// What a worker is started with.
#[derive(Debug)]
pub struct ResubmitWorkerArgs {
    router: Arc<dyn SubmitterRouter>,
    gauge: Arc<WorkerGauge>,
}

/// A worker's timers.
#[derive(Debug)]
pub struct ResubmitWorkerState {
    router: Arc<dyn SubmitterRouter>,
    gauge: Arc<WorkerGauge>,
    due: BTreeSet<(Instant, Uuid)>,
    entries: HashMap<Uuid, (Instant, Address)>,
    armed: Option<(Instant, Timer)>,
}

impl ResubmitWorkerState {
    fn remove(&mut self, id: &Uuid) {
        if let Some((at, _)) = self.entries.remove(id) {
            self.due.remove(&(at, *id));
        }
    }

    fn insert(&mut self, submitter: Address, id: Uuid, at: Instant) {
        self.remove(&id);
        self.entries.insert(id, (at, submitter));
        self.due.insert((at, id));
    }

    /// Hands every expired timer to its SubmitterActor, grouped per submitter.
    fn fire_expired(&mut self, now: Instant) {
        let mut fired: HashMap<Address, Vec<Uuid>> = HashMap::new();
        while let Some(&(at, id)) = self.due.first() {
            if at > now {
                break;
            }
            self.due.pop_first();
            if let Some((_, submitter)) = self.entries.remove(&id) {
                fired.entry(submitter).or_default().push(id);
            }
        }
        for (submitter, ids) in fired {
            // No actor here any more: its successor rebuilds the timers.
            self.router
                .deliver(submitter, TrackerReport::ResubmitDue(ids));
        }
    }

    fn rearm(&mut self, myself: &ActorRef<ResubmitMsg>, now: Instant) {
        let next = self.due.first().map(|(at, _)| *at);
        let earliest_ms = next.map_or(0, |at| {
            let wall = std::time::SystemTime::now();
            unix_ms(if at >= now {
                wall + (at - now)
            } else {
                wall - (now - at)
            })
        });
        self.gauge
            .pending
            .store(self.entries.len() as u64, Ordering::Release);
        self.gauge.earliest_ms.store(earliest_ms, Ordering::Release);
        match (next, &self.armed) {
            (Some(at), Some((armed_at, _))) if *armed_at == at => {}
            (Some(at), _) => {
                if let Some((_, old)) = self.armed.take() {
                    old.abort();
                }
                let timer =
                    myself.send_after(at.saturating_duration_since(now), || ResubmitMsg::Fire);
                self.armed = Some((at, timer));
            }
            (None, _) => {
                if let Some((_, old)) = self.armed.take() {
                    old.abort();
                }
            }
        }
    }
}

impl Actor for ResubmitWorker {
    type Msg = ResubmitMsg;
    type State = ResubmitWorkerState;
    type Arguments = ResubmitWorkerArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<ResubmitMsg>,
        args: ResubmitWorkerArgs,
    ) -> Result<ResubmitWorkerState, ActorProcessingErr> {
        Ok(ResubmitWorkerState {
            router: args.router,
            gauge: args.gauge,
            due: BTreeSet::new(),
            entries: HashMap::new(),
            armed: None,
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<ResubmitMsg>,
        state: &mut ResubmitWorkerState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some((_, timer)) = state.armed.take() {
            timer.abort();
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<ResubmitMsg>,
        msg: ResubmitMsg,
        state: &mut ResubmitWorkerState,
    ) -> Result<(), ActorProcessingErr> {
        let now = Instant::now();
        match msg {
            ResubmitMsg::Schedule(submitter, due) => {
                for (id, after) in due {
                    state.insert(submitter, id, now + after);
                }
            }
            ResubmitMsg::Forget(ids) => {
                for id in &ids {
                    state.remove(id);
                }
            }
            ResubmitMsg::ForgetSubmitter(submitter) => {
                let ids: Vec<Uuid> = state
                    .entries
                    .iter()
                    .filter(|(_, (_, s))| *s == submitter)
                    .map(|(id, _)| *id)
                    .collect();
                for id in &ids {
                    state.remove(id);
                }
            }
            ResubmitMsg::Fire => {
                state.armed = None;
            }
        }
        state.fire_expired(now);
        state.rearm(&myself, now);
        Ok(())
    }
}
