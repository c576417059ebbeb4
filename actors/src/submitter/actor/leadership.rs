//! Leadership of one SubmitterActor: acquiring, renewing and handing over
//! the lease, and taking up the work of a new leader.

use std::time::Duration;

use ractor::{ActorProcessingErr, ActorRef};

use super::{fatal, rearm, SubmitterMsg, SubmitterState};
use crate::{
    store::{self, LeaseGuard, LeaseOutcome},
    submitter::{
        cycle::{self, CycleError},
        follow, sweep,
    },
};

/// Margin after a foreign lease becomes takeable before a standby retries.
const STANDBY_SLACK: Duration = Duration::from_millis(50);

/// The lease timer (or a hand-over hint): a leader renews — and may hand the
/// lease to its preferred node; a standby tries to acquire, deferring to the
/// preferred node when it is not that node. A lapsed or lost lease stops the
/// actor (the supervisor starts a fresh one).
pub(super) async fn on_lease_tick(
    myself: &ActorRef<SubmitterMsg>,
    state: &mut SubmitterState,
) -> Result<(), ActorProcessingErr> {
    let ctx = state.ctx.clone();
    let was_leader = state.lease.is_some();
    let defer = if was_leader {
        Duration::ZERO
    } else {
        ctx.membership.defer_for(
            &ctx.key.address,
            &ctx.owner.node_id,
            state.last_owner.as_deref(),
        )
    };
    match store::acquire_or_renew_deferring(&ctx.pool, &state.request(), defer).await {
        Ok(outcome) => match outcome.lease().cloned() {
            Some(lease) => {
                let fresh = !was_leader || !matches!(outcome, LeaseOutcome::Renewed(_));
                if was_leader && fresh {
                    // Our lease expired and we re-took it: the token changed and
                    // someone may have worked in between. Start over cleanly.
                    return Err(format!("lease of {} lapsed and was re-acquired", ctx.key).into());
                }
                state.lease = Some(lease.clone());
                state.last_owner = Some(ctx.owner.node_id.to_string());
                if !fresh && hand_over_if_preferred_elsewhere(myself, state, &lease).await {
                    return Ok(());
                }
                rearm(
                    &mut state.lease_timer,
                    myself.send_after(ctx.lease.renew_interval, || SubmitterMsg::LeaseTick),
                );
                if fresh {
                    state.leader_since = Some(std::time::Instant::now());
                    tracing::info!(target: "txmgr::submitter", submitter = %ctx.key, fencing_token = lease.token, outcome = outcome.label(), "leader");
                    state.memory = cycle::CycleMemory::fresh();
                    state.taken_up = false;
                    // A transient failure here (RPC, database) is retried by
                    // the next work, sweep or resubmit message.
                    if let Err(err) = take_up(state).await {
                        fatal(state, err)?;
                    }
                    rearm(
                        &mut state.sweep_timer,
                        myself.send_after(ctx.sweep_interval, || SubmitterMsg::SweepTick),
                    );
                    state.schedule_work(myself, Duration::ZERO);
                }
                state.set_role();
                Ok(())
            }
            None => {
                if was_leader {
                    return Err(format!("lease of {} lost to another node", ctx.key).into());
                }
                if let LeaseOutcome::NotLeader(info) = &outcome {
                    state.last_owner = Some(info.owner_node.clone());
                }
                // Standby: keep the PROTECT flag visible so this node answers 423 too.
                if let Ok(Some(cursor)) = store::nonce_cursor::load(&ctx.pool, ctx.key).await {
                    state.protect_reason = cursor.protect_reason;
                }
                state.set_role();
                // Try again just after the holder's lease could be taken over
                // (a live holder will have renewed by then): fail-over takes
                // about expiry + skew, not a whole extra period.
                let retry = match &outcome {
                    LeaseOutcome::NotLeader(info) => {
                        (info.expires_in + ctx.lease.clock_skew + STANDBY_SLACK)
                            .min(ctx.lease.duration)
                    }
                    _ => ctx.lease.duration,
                };
                rearm(
                    &mut state.lease_timer,
                    myself.send_after(retry, || SubmitterMsg::LeaseTick),
                );
                Ok(())
            }
        },
        Err(err) => {
            state.handle.status().set_last_error(Some(err.to_string()));
            if state.lease.as_ref().is_some_and(|l| !l.is_locally_valid()) {
                return Err(
                    format!("lease of {} could not be renewed in time: {err}", ctx.key).into(),
                );
            }
            tracing::warn!(target: "txmgr::submitter", submitter = %ctx.key, error = %err, "lease query failed; retrying");
            let retry = if was_leader {
                ctx.lease.renew_interval / 2
            } else {
                ctx.lease.duration
            };
            rearm(
                &mut state.lease_timer,
                myself.send_after(retry, || SubmitterMsg::LeaseTick),
            );
            Ok(())
        }
    }
}

/// Lease balancing: after a renewal, a leader that has held the lease for
/// `min_hold` and is not the submitter's preferred node hands the lease to
/// the preferred node (between messages, so no fenced transaction is in
/// flight) and becomes standby. Returns true when it did.
async fn hand_over_if_preferred_elsewhere(
    myself: &ActorRef<SubmitterMsg>,
    state: &mut SubmitterState,
    lease: &LeaseGuard,
) -> bool {
    let ctx = state.ctx.clone();
    let held = state.leader_since.map(|t| t.elapsed()).unwrap_or_default();
    let Some(to) = ctx
        .membership
        .hand_over_to(&ctx.key.address, &ctx.owner.node_id, held)
    else {
        return false;
    };
    match store::hand_over(&ctx.pool, lease, &to).await {
        Ok(true) => {}
        Ok(false) => return false,
        Err(err) => {
            tracing::warn!(target: "txmgr::cluster", submitter = %ctx.key, error = %err, "hand-over failed; keeping the lease");
            return false;
        }
    }
    metrics::counter!(crate::metrics::LEASE_HANDOVERS).increment(1);
    tracing::info!(target: "txmgr::cluster", submitter = %ctx.key, to = %to, fencing_token = lease.token, "lease handed over to the preferred node");
    if let Err(err) = store::notify_handover(&ctx.pool, ctx.key).await {
        tracing::debug!(target: "txmgr::cluster", error = %err, "hand-over notification failed; the new owner finds it on its next lease tick");
    }
    state.lease = None;
    state.leader_since = None;
    state.taken_up = false;
    state.last_owner = Some(to);
    ctx.index.remove_submitter(ctx.key.address);
    ctx.timers.forget_submitter(ctx.key.address);
    state.handle.status().set_head_of_line_blocked(false);
    for slot in [&mut state.work_timer, &mut state.sweep_timer] {
        if let Some(timer) = slot.take() {
            timer.abort();
        }
    }
    state.set_role();
    rearm(
        &mut state.lease_timer,
        myself.send_after(ctx.lease.duration, || SubmitterMsg::LeaseTick),
    );
    true
}

/// What a new leader does before any work: reconcile the nonce cursor with
/// the chain (creating it for a new submitter), index every open attempt for
/// the block matcher, rebuild the resubmit timers, and ask for an immediate
/// resubmit pass (anything overdue, or requested by an operator meanwhile).
async fn take_up(state: &mut SubmitterState) -> Result<(), CycleError> {
    let Some(lease) = state.lease.clone() else {
        return Ok(());
    };
    let ctx = state.ctx.clone();
    let found = sweep::on_acquired(&ctx, &lease).await?;
    state.protect_reason = found.protect_reason;
    follow::index_open_attempts(&ctx).await?;
    let due = store::resubmit::schedule(&ctx.pool, ctx.key, None).await?;
    ctx.timers.schedule(ctx.key.address, due);
    state.handle.send(SubmitterMsg::ResubmitDue(Vec::new()));
    state.taken_up = true;
    state.set_role();
    Ok(())
}

/// Leader and taken up (retrying [`take_up`] if it failed before). `false`:
/// nothing to do now (standby, or still not taken up: retried later).
pub(super) async fn ready_to_lead(
    myself: &ActorRef<SubmitterMsg>,
    state: &mut SubmitterState,
) -> Result<bool, ActorProcessingErr> {
    if state.lease.is_none() {
        return Ok(false);
    }
    if state.taken_up {
        return Ok(true);
    }
    match take_up(state).await {
        Ok(()) => Ok(true),
        Err(err) => {
            let backoff = state.ctx.settings().retry_backoff;
            fatal(state, err)?;
            state.schedule_work(myself, backoff);
            Ok(false)
        }
    }
}
