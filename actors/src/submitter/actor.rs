//! The SubmitterActor: lease life cycle and scheduling; the work itself is in
//! `cycle` and `sweep`.

use std::{sync::Arc, time::Duration};

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::task::JoinHandle;
use tracing::Instrument;

use uuid::Uuid;

use super::{
    cycle, error::LeaderError, leader_lease::LeaderLease, status::Role, SubmitterContext,
    SubmitterHandle,
};
mod idle;
mod leadership;
mod tracking;
mod upkeep;

pub(crate) use idle::IDLE_STOP;
use idle::{arm_idle, on_idle_tick};
use leadership::{on_lease_tick, ready_to_lead};
use tracking::{on_tracking, Tracking};
use upkeep::{on_resubmit, on_sweep};

use crate::{
    domain::{FinalDecision, ReorgedReceipt},
    store::{self, tracking::MinedReceipt, LeaseGuard, LeaseRequest},
    tracker::TrackerReport,
};

/// Messages a SubmitterActor handles.
#[derive(Debug)]
pub enum SubmitterMsg {
    /// New work may be waiting (sent through the handle, coalesced).
    Work,
    /// Timer: run the work cycle again (retry or continuation).
    WorkTimer,
    /// Check the lease now: a standby tries to acquire it (woken by the
    /// node's lease scan or a hand-over); a leader renews it and hands it
    /// over if asked (the node's lease keeper found it lost, or preferred
    /// elsewhere).
    LeaseTick,
    /// Timer: a leader with nothing open for a while releases its lease.
    IdleTick,
    /// Timer: check the chain (receipts, external nonce use).
    SweepTick,
    /// Release the lease and stop (graceful shutdown, removal, restart).
    Drain(RpcReplyPort<()>),
    /// Receipts the block matcher found for our attempts.
    Receipts(Vec<(Uuid, MinedReceipt)>),
    /// Intents whose receipt reached finality.
    Finalize(Vec<FinalDecision>),
    /// Receipts whose block (the hash given) is no longer canonical.
    ReorgedOut(Vec<ReorgedReceipt>),
    /// Resubmit timers expired for these intents; empty = look for anything
    /// due or requested by an operator.
    ResubmitDue(Vec<Uuid>),
}

impl SubmitterMsg {
    /// Sent through [`SubmitterHandle::send`], so counted in the mailbox
    /// depth (timers and the supervisor's `Drain` call go straight to the actor).
    pub(crate) fn is_counted(&self) -> bool {
        !matches!(
            self,
            SubmitterMsg::WorkTimer
                | SubmitterMsg::LeaseTick
                | SubmitterMsg::IdleTick
                | SubmitterMsg::SweepTick
                | SubmitterMsg::Drain(_)
        )
    }
}

impl From<TrackerReport> for SubmitterMsg {
    fn from(report: TrackerReport) -> Self {
        match report {
            TrackerReport::Receipts(found) => SubmitterMsg::Receipts(found),
            TrackerReport::Finalize(decided) => SubmitterMsg::Finalize(decided),
            TrackerReport::ReorgedOut(lost) => SubmitterMsg::ReorgedOut(lost),
            TrackerReport::ResubmitDue(ids) => SubmitterMsg::ResubmitDue(ids),
        }
    }
}

/// The actor (stateless; everything is in [`SubmitterState`]).
#[derive(Debug, Default)]
pub struct SubmitterActor;

/// What the actor is started with.
#[derive(Debug)]
pub struct SubmitterArgs {
    /// Shared context.
    pub ctx: Arc<SubmitterContext>,
    /// The handle whose status the actor keeps current.
    pub handle: SubmitterHandle,
}

/// What one submitter's actor knows between messages: its lease, its timers, and
/// what its last cycles found (so the next one skips reads that cannot find anything).
#[derive(Debug)]
pub struct SubmitterState {
    ctx: Arc<SubmitterContext>,
    handle: SubmitterHandle,
    lease: Option<LeaseGuard>,
    protect_reason: Option<String>,
    memory: cycle::CycleMemory,
    lease_timer: Option<Timer>,
    work_timer: Option<Timer>,
    sweep_timer: Option<Timer>,
    idle_timer: Option<Timer>,
    /// When the actor last handled work or a tracking report (idle release).
    last_activity: std::time::Instant,
    /// The stored funds state as of the last check, with the fencing token it
    /// was read under: while the token holds, only this leader can change
    /// it, so an unchanged check needs no database transaction.
    funds_stored: Option<(i64, bool)>,
    /// Standby: until when the foreign lease last seen is live (by the local
    /// clock, skew included); a wake-up after that tries to acquire it.
    foreign_until: Option<std::time::Instant>,
    /// When this node last became leader (hand-over hysteresis).
    leader_since: Option<std::time::Instant>,
    /// The lease holder last seen (lease balancing).
    last_owner: Option<String>,
    /// The steps after acquiring the lease (nonce reconciliation, receipt
    /// index, resubmit timers) have completed for the current lease.
    taken_up: bool,
}

type Timer = JoinHandle<Result<(), ractor::MessagingErr<SubmitterMsg>>>;

fn rearm(slot: &mut Option<Timer>, timer: Timer) {
    if let Some(old) = slot.replace(timer) {
        old.abort();
    }
}

impl SubmitterState {
    fn request(&self) -> LeaseRequest {
        LeaseRequest {
            submitter: self.ctx.key,
            owner: self.ctx.owner.clone(),
            duration: self.ctx.lease.duration,
            clock_skew: self.ctx.lease.clock_skew,
        }
    }

    fn set_role(&self) {
        let role = match (&self.lease, &self.protect_reason) {
            (Some(_), Some(_)) => Role::Protected,
            (Some(_), None) => Role::Leader,
            (None, _) => Role::Standby,
        };
        let status = self.handle.status();
        status.set_role(role);
        status.set_fencing_token(self.lease.as_ref().map_or(0, |l| l.token));
        status.set_lease_deadline(self.lease.as_ref().map(|l| l.deadline.clone()));
        status.set_protect_reason(self.protect_reason.clone());
    }

    fn schedule_work(&mut self, myself: &ActorRef<SubmitterMsg>, after: Duration) {
        rearm(
            &mut self.work_timer,
            myself.send_after(after, || SubmitterMsg::WorkTimer),
        );
    }

    /// The lease ran out under a step: look at it now (renew, or step
    /// down) instead of at the next tick.
    fn check_lease_now(&mut self, myself: &ActorRef<SubmitterMsg>) {
        rearm(
            &mut self.lease_timer,
            myself.send_after(Duration::ZERO, || SubmitterMsg::LeaseTick),
        );
    }
}

/// Turns a cycle error into the actor's reaction: `Err` stops the actor (the
/// supervisor restarts it); anything else is logged and retried.
fn fatal(state: &SubmitterState, err: LeaderError) -> Result<(), ActorProcessingErr> {
    state.handle.status().set_last_error(Some(err.to_string()));
    if err.is_fenced() {
        tracing::warn!(target: "txmgr::submitter", submitter = %state.ctx.key, "fenced: lease lost, stopping");
        return Err(Box::new(err));
    }
    tracing::warn!(target: "txmgr::submitter", submitter = %state.ctx.key, error = %err, "work cycle failed; will retry");
    Ok(())
}

impl Actor for SubmitterActor {
    type Msg = SubmitterMsg;
    type State = SubmitterState;
    type Arguments = SubmitterArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<SubmitterMsg>,
        args: SubmitterArgs,
    ) -> Result<SubmitterState, ActorProcessingErr> {
        args.handle.status().set_role(Role::Idle);
        // Uncounted: the first lease attempt comes straight from the actor.
        myself.send_message(SubmitterMsg::LeaseTick)?;
        Ok(SubmitterState {
            ctx: args.ctx,
            handle: args.handle,
            lease: None,
            protect_reason: None,
            memory: cycle::CycleMemory::fresh(),
            lease_timer: None,
            work_timer: None,
            sweep_timer: None,
            idle_timer: None,
            last_activity: std::time::Instant::now(),
            funds_stored: None,
            foreign_until: None,
            leader_since: None,
            last_owner: None,
            taken_up: false,
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<SubmitterMsg>,
        state: &mut SubmitterState,
    ) -> Result<(), ActorProcessingErr> {
        for timer in [
            state.lease_timer.take(),
            state.work_timer.take(),
            state.sweep_timer.take(),
            state.idle_timer.take(),
        ]
        .into_iter()
        .flatten()
        {
            timer.abort();
        }
        // A stopped actor's lease is renewed no more: it lapses unless the
        // actor released it first.
        if let Some(lease) = state.lease.take() {
            state.ctx.keeper.forget(&lease);
        }
        state.ctx.index.remove_submitter(state.ctx.key.address);
        state.ctx.timers.forget_submitter(state.ctx.key.address);
        state.handle.status().set_head_of_line_blocked(false);
        state.handle.status().set_role(Role::Idle);
        state.handle.status().set_fencing_token(0);
        state.handle.status().set_lease_deadline(None);
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<SubmitterMsg>,
        msg: SubmitterMsg,
        state: &mut SubmitterState,
    ) -> Result<(), ActorProcessingErr> {
        if msg.is_counted() {
            state.handle.message_taken(&msg);
            state.last_activity = std::time::Instant::now();
        }
        let span = tracing::info_span!(
            "submitter",
            submitter = %state.ctx.key,
            node_id = %state.ctx.owner.node_id,
            instance = %state.ctx.owner.instance,
            fencing_token = state.lease.as_ref().map_or(0, |l| l.token),
        );
        dispatch(myself, msg, state).instrument(span).await
    }
}

/// One message, inside the actor's span.
async fn dispatch(
    myself: ActorRef<SubmitterMsg>,
    msg: SubmitterMsg,
    state: &mut SubmitterState,
) -> Result<(), ActorProcessingErr> {
    match msg {
        SubmitterMsg::LeaseTick => on_lease_tick(&myself, state).await,
        SubmitterMsg::IdleTick => on_idle_tick(&myself, state).await,
        SubmitterMsg::Work | SubmitterMsg::WorkTimer => on_work(&myself, state).await,
        SubmitterMsg::SweepTick => on_sweep(&myself, state).await,
        SubmitterMsg::Drain(reply) => {
            state.handle.status().set_role(Role::Stopping);
            if let Some(lease) = state.lease.take() {
                state.ctx.keeper.forget(&lease);
                if let Err(err) = store::release(&state.ctx.pool, &lease).await {
                    tracing::warn!(target: "txmgr::submitter", submitter = %state.ctx.key, error = %err, "lease release failed; it will expire");
                }
            }
            let _ = reply.send(());
            myself.stop(Some("drained".into()));
            Ok(())
        }
        SubmitterMsg::Receipts(found) => {
            on_tracking(&myself, state, Tracking::Receipts(found)).await
        }
        SubmitterMsg::Finalize(decided) => {
            on_tracking(&myself, state, Tracking::Finalize(decided)).await
        }
        SubmitterMsg::ReorgedOut(lost) => {
            on_tracking(&myself, state, Tracking::Reorged(lost)).await
        }
        SubmitterMsg::ResubmitDue(ids) => on_resubmit(&myself, state, ids).await,
    }
}

async fn on_work(
    myself: &ActorRef<SubmitterMsg>,
    state: &mut SubmitterState,
) -> Result<(), ActorProcessingErr> {
    if !ready_to_lead(myself, state).await? {
        return Ok(());
    }
    let Some(lease) = state.lease.clone() else {
        return Ok(());
    };
    // PROTECT, and a pause by the configuration, allocate nothing (an
    // operator's pause is obeyed by the allocation itself).
    let hold = state.protect_reason.is_some() || state.ctx.paused_by_config();
    let result = cycle::run(
        &state.ctx,
        LeaderLease::new(&state.ctx, &lease),
        hold,
        &mut state.memory,
    )
    .await;
    state.set_role();
    match result {
        Ok(outcome) => {
            if let Some(why) = &outcome.signer_unavailable {
                state.handle.status().set_last_error(Some(why.clone()));
            }
            if outcome.sweep_now {
                rearm(
                    &mut state.sweep_timer,
                    myself.send_after(Duration::ZERO, || SubmitterMsg::SweepTick),
                );
            }
            // A cycle that ran early (woken by new work or a receipt) must
            // not forget a pending broadcast retry: the timer it replaced
            // was the only reminder of it.
            let allocated_due = state
                .memory
                .allocated_due_at
                .map(|due| due.saturating_duration_since(std::time::Instant::now()));
            let retry = match (outcome.retry_in, allocated_due) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if outcome.more {
                state.schedule_work(myself, Duration::ZERO);
            } else if let Some(delay) = retry {
                state.schedule_work(myself, delay);
            }
            Ok(())
        }
        Err(LeaderError::LeaseExpired) => {
            state.check_lease_now(myself);
            state.schedule_work(myself, state.ctx.lease.renew_interval / 4);
            Ok(())
        }
        Err(err) => {
            let backoff = state.ctx.settings().retry_backoff;
            fatal(state, err)?;
            state.schedule_work(myself, backoff);
            Ok(())
        }
    }
}
