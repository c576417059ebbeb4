//! The supervisor actor: spawn, restart with backoff, escalate, discover, drain.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    sync::Arc,
    time::{Duration, Instant},
};

use alloy::primitives::Address;
use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};

use super::{
    discovery,
    tracker_tree::{TrackerChild, TrackerTree},
    EngineShared,
};
use crate::{
    store,
    submitter::{Role, SubmitterActor, SubmitterArgs, SubmitterMsg, IDLE_STOP},
    supervisor::restart_backoff::ended_child,
};

const FIRST_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How long a pause waits for the actor's drain, then for its stop.
const PAUSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Messages of the supervisor.
#[derive(Debug)]
pub enum SupervisorMsg {
    /// Make sure a SubmitterActor runs for this address (unless given up on).
    Ensure(Address),
    /// Backoff over: spawn again.
    Respawn(Address),
    /// Timer: the node's lease scan (unfinished work whose lease is free or
    /// can be taken over).
    Discover,
    /// Drain every child and answer when done.
    Shutdown(RpcReplyPort<()>),
    /// Drain this submitter's actor, wait until it stopped, and spawn no new
    /// one until [`SupervisorMsg::Resume`] (operator restart, unprotect,
    /// removal from the configuration).
    Pause(Address, RpcReplyPort<()>),
    /// Lift a pause, forget past restarts (clears `failed`) and spawn.
    Resume(Address),
    /// Backoff over: spawn this tracking actor again.
    RespawnTracker(TrackerChild),
}

/// What the supervisor starts with (again, after the root restarts it).
#[derive(Debug, Clone)]
pub struct SupervisorArgs {
    /// State shared with the Engine facade.
    pub shared: Arc<EngineShared>,
    /// The tracking actors it spawns at start and restarts.
    pub tracker: Arc<TrackerTree>,
}

/// The supervisor actor.
#[derive(Debug, Default)]
pub struct Supervisor;

/// What the supervisor tracks between messages: which submitters run,
/// their restart history and backoff, and when to look for unled work.
#[derive(Debug)]
pub struct SupervisorState {
    shared: Arc<EngineShared>,
    tracker: Arc<TrackerTree>,
    children: HashMap<ActorId, Address>,
    running: HashMap<Address, ActorId>,
    restarts: HashMap<Address, VecDeque<Instant>>,
    /// Submitters whose restart is scheduled (`Respawn` after a backoff):
    /// nothing else spawns them before it fires.
    backing_off: HashSet<Address>,
    paused: HashSet<Address>,
    shutting_down: bool,
}

impl SupervisorState {
    async fn spawn(&mut self, myself: &ActorRef<SupervisorMsg>, address: Address) {
        if self.shutting_down
            || self.paused.contains(&address)
            || self.running.contains_key(&address)
            || self.backing_off.contains(&address)
        {
            return;
        }
        let (Some(ctx), Some(handle)) =
            (self.shared.context(&address), self.shared.handle(address))
        else {
            return;
        };
        if handle.status().role() == Role::Failed {
            return;
        }
        let args = SubmitterArgs {
            ctx,
            handle: handle.clone(),
        };
        match Actor::spawn_linked(None, SubmitterActor, args, myself.get_cell()).await {
            Ok((actor, _)) => {
                self.children.insert(actor.get_id(), address);
                self.running.insert(address, actor.get_id());
                handle.set_actor(Some(actor));
                handle.wake();
            }
            Err(err) => {
                tracing::error!(target: "txmgr::supervisor", %address, error = %err, "spawning submitter actor failed");
                self.schedule_restart(myself, address, &err.to_string());
            }
        }
    }

    fn schedule_restart(&mut self, myself: &ActorRef<SupervisorMsg>, address: Address, why: &str) {
        let config = &self.shared.config;
        let now = Instant::now();
        let window = self.restarts.entry(address).or_default();
        window.push_back(now);
        while window
            .front()
            .is_some_and(|t| now.duration_since(*t) > config.restart_window)
        {
            window.pop_front();
        }
        let count = u32::try_from(window.len()).unwrap_or(u32::MAX);
        let handle = self.shared.handle(address);
        if let Some(handle) = &handle {
            handle.status().count_restart();
            handle.status().set_last_error(Some(why.to_owned()));
        }
        if count > config.max_restarts {
            tracing::error!(target: "txmgr::supervisor", %address, restarts = count, reason = why,
                "submitter actor keeps failing; giving up until an operator restarts it");
            if let Some(handle) = handle {
                handle.status().set_role(Role::Failed);
            }
            return;
        }
        let backoff = FIRST_BACKOFF
            .saturating_mul(1 << count.saturating_sub(1).min(16))
            .min(MAX_BACKOFF);
        tracing::info!(target: "txmgr::supervisor", %address, ?backoff, reason = why, "restarting submitter actor");
        self.backing_off.insert(address);
        myself.send_after(backoff, move || SupervisorMsg::Respawn(address));
    }

    /// One lease scan: wakes (or starts) the actors of submitters with open
    /// work whose lease can be taken now, and says when to scan again.
    async fn discover(&mut self, myself: &ActorRef<SupervisorMsg>) -> Duration {
        let config = &self.shared.config;
        let interval = config.discovery_interval;
        let rows = match discovery::scan(&self.shared).await {
            Ok(rows) => rows,
            Err(err) => {
                tracing::warn!(target: "txmgr::supervisor", error = %err, "lease scan failed");
                return interval;
            }
        };
        let membership = self.shared.membership.clone();
        let me = config.owner.node_id.clone();
        let plan = discovery::plan(&rows, config.lease.clock_skew, |address, owner| {
            membership.defer_for(address, &me, owner)
        });
        let mut woke = false;
        for address in plan.wake {
            woke |= self.wake(myself, address).await;
        }
        self.refresh_standby_protect().await;
        self.refresh_pauses().await;
        let mut next = plan.next_in.unwrap_or(interval).min(interval);
        if woke {
            next = next.min(discovery::AFTER_WAKING);
        }
        next.max(Duration::from_millis(20))
    }

    /// Tells a running actor to try for the lease, or starts one. False when
    /// neither was possible (paused, backing off, given up on).
    async fn wake(&mut self, myself: &ActorRef<SupervisorMsg>, address: Address) -> bool {
        let actor = self.shared.handle(address).and_then(|h| h.actor());
        if let Some(actor) = actor {
            return actor.send_message(SubmitterMsg::LeaseTick).is_ok();
        }
        self.spawn(myself, address).await;
        self.running.contains_key(&address)
    }

    /// Standbys show PROTECT so this node answers 423 too; the leader's node
    /// may have cleared it (unprotect): re-read those few reasons.
    async fn refresh_standby_protect(&self) {
        let shown: Vec<Address> = self
            .shared
            .handles
            .iter()
            .filter(|h| h.status().role() == Role::Standby && h.status().protect_reason().is_some())
            .map(|h| *h.key())
            .collect();
        match discovery::protect_reasons(&self.shared, &shown).await {
            Ok(reasons) => {
                for (address, reason) in reasons {
                    if let Some(handle) = self.shared.handle(address) {
                        handle.status().set_protect_reason(reason);
                    }
                }
            }
            Err(err) => {
                tracing::debug!(target: "txmgr::supervisor", error = %err, "re-reading PROTECT reasons failed")
            }
        }
    }

    /// Re-reads the operators' pauses of this chain (one query), so every
    /// node shows them, refuses creates where `pause_accepts_creates` is
    /// off, and a leader keeps its lease and halts resubmits as asked.
    async fn refresh_pauses(&self) {
        let chain_id = self.shared.config.chain_id.into();
        match store::pause::paused_on(&self.shared.pool, chain_id).await {
            Ok(rows) => {
                let paused: HashMap<Address, Arc<store::pause::Pause>> = rows
                    .into_iter()
                    .map(|(address, pause)| (address, Arc::new(pause)))
                    .collect();
                for handle in self.shared.handles.iter() {
                    handle.status().set_pause(paused.get(handle.key()).cloned());
                }
            }
            Err(err) => {
                tracing::debug!(target: "txmgr::supervisor", error = %err, "re-reading pauses failed")
            }
        }
    }

    /// Spawns a failed tracking actor again; a failed spawn is retried after
    /// the next (longer) backoff.
    async fn respawn_tracker(&mut self, myself: &ActorRef<SupervisorMsg>, child: TrackerChild) {
        if self.shutting_down || self.tracker.is_stopping() {
            return;
        }
        if let Err(err) = self.tracker.spawn(child, &myself.get_cell()).await {
            tracing::error!(target: "txmgr::supervisor", actor = child.kind(), slot = child.slot(),
                error = %err, "respawning tracking actor failed");
            if let Some(delay) = self.tracker.respawn_failed(child) {
                myself.send_after(delay, move || SupervisorMsg::RespawnTracker(child));
            }
        }
    }

    /// Drains the actor (it releases its lease), waits for it to stop, kills
    /// it if it does not within [`PAUSE_TIMEOUT`], and forgets it so the
    /// later termination event triggers no restart.
    async fn pause(&mut self, address: Address) {
        self.paused.insert(address);
        self.backing_off.remove(&address);
        let Some(handle) = self.shared.handle(address) else {
            return;
        };
        if let Some(actor) = handle.actor() {
            let millis = u64::try_from(PAUSE_TIMEOUT.as_millis()).unwrap_or(u64::MAX);
            if let Err(err) = ractor::call_t!(actor, SubmitterMsg::Drain, millis) {
                tracing::warn!(target: "txmgr::supervisor", %address, error = %err, "drain did not answer; killing the actor");
            }
            if actor.get_cell().wait(Some(PAUSE_TIMEOUT)).await.is_err() {
                let _ = actor.kill_and_wait(Some(PAUSE_TIMEOUT)).await;
            }
            self.children.remove(&actor.get_id());
            handle.set_actor(None);
        }
        self.running.remove(&address);
    }
}

impl Actor for Supervisor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = SupervisorArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<SupervisorMsg>,
        SupervisorArgs { shared, tracker }: SupervisorArgs,
    ) -> Result<SupervisorState, ActorProcessingErr> {
        // After a restart by the node's root: the submitters' actors ended
        // with the previous supervisor; they are spawned again on demand.
        for handle in shared.handles.iter() {
            handle.set_actor(None);
        }
        tracker.spawn_all(&myself.get_cell()).await?;
        myself.send_message(SupervisorMsg::Discover)?;
        Ok(SupervisorState {
            shared,
            tracker,
            children: HashMap::new(),
            running: HashMap::new(),
            restarts: HashMap::new(),
            backing_off: HashSet::new(),
            paused: HashSet::new(),
            shutting_down: false,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<SupervisorMsg>,
        msg: SupervisorMsg,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SupervisorMsg::Ensure(address) => state.spawn(&myself, address).await,
            SupervisorMsg::Respawn(address) => {
                state.backing_off.remove(&address);
                state.spawn(&myself, address).await;
            }
            SupervisorMsg::Discover => {
                if !state.shutting_down {
                    let next = state.discover(&myself).await;
                    myself.send_after(next, || SupervisorMsg::Discover);
                }
            }
            SupervisorMsg::Shutdown(reply) => {
                state.shutting_down = true;
                let drains =
                    state
                        .shared
                        .handles
                        .iter()
                        .filter_map(|h| h.actor())
                        .map(|actor| async move {
                            let _ = ractor::call_t!(actor, SubmitterMsg::Drain, 5_000);
                        });
                futures::future::join_all(drains).await;
                let _ = reply.send(());
            }
            SupervisorMsg::Pause(address, reply) => {
                state.pause(address).await;
                let _ = reply.send(());
            }
            SupervisorMsg::Resume(address) => {
                state.paused.remove(&address);
                state.backing_off.remove(&address);
                state.restarts.remove(&address);
                if let Some(handle) = state.shared.handle(address) {
                    if handle.status().role() == Role::Failed {
                        handle.status().set_role(Role::Idle);
                    }
                }
                state.spawn(&myself, address).await;
            }
            SupervisorMsg::RespawnTracker(child) => state.respawn_tracker(&myself, child).await,
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<SupervisorMsg>,
        event: SupervisionEvent,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        let Some((cell, why)) = ended_child(event) else {
            return Ok(());
        };
        if let Some((child, delay)) = state.tracker.exited(cell.get_id()) {
            tracing::error!(target: "txmgr::supervisor", actor = child.kind(), slot = child.slot(),
                reason = %why, ?delay, "tracking actor ended; restarting it");
            myself.send_after(delay, move || SupervisorMsg::RespawnTracker(child));
            return Ok(());
        }
        let Some(address) = state.children.remove(&cell.get_id()) else {
            return Ok(());
        };
        state.running.remove(&address);
        if let Some(handle) = state.shared.handle(address) {
            handle.set_actor(None);
        }
        if state.shutting_down || why == "drained" {
            return Ok(());
        }
        if why == IDLE_STOP {
            // Idle: started again by new work. A create committed while it
            // stopped woke nobody (its wake-up found the old actor); one more
            // look, after the handle was detached above, finds it.
            let pool = state.shared.pool.clone();
            let key = crate::SubmitterKey::new(state.shared.config.chain_id, address);
            tokio::spawn(async move {
                if store::intents::open_count(&pool, key)
                    .await
                    .map_or(true, |n| n > 0)
                {
                    let _ = myself.send_message(SupervisorMsg::Ensure(address));
                }
            });
            return Ok(());
        }
        state.schedule_restart(&myself, address, &why);
        Ok(())
    }
}
