//! Leadership of one SubmitterActor: acquiring, renewing and handing over
//! the lease, and taking up the work of a new leader.

use std::time::{Duration, Instant};

use ractor::{ActorProcessingErr, ActorRef};

use super::{arm_idle, fatal, rearm, SubmitterMsg, SubmitterState};
use crate::{
    store::{self, LeaseGuard, LeaseOutcome},
    submitter::{cycle, error::LeaderError, sweep, tracking_reports},
};

/// The lease check (first message of a new actor, the node's lease scan, a
/// hand-over hint, the lease keeper): a leader renews — and may hand the
/// lease to its preferred node; a standby tries to acquire, deferring to the
/// preferred node when it is not that node. A lapsed or lost lease stops the
/// actor (the supervisor starts a fresh one). No timer is armed here: the
/// node's lease keeper renews held leases, and its lease scan wakes
/// standbys when a lease can be taken.
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
                if let Some(held) = state.lease.clone() {
                    // A renewal lands in the deadline the keeper shares.
                    if !held.absorb_renewal(&lease) || !held.is_locally_valid() {
                        return Err(format!("lease of {} lost", ctx.key).into());
                    }
                    if !hand_over_if_preferred_elsewhere(state, &held).await {
                        state.set_role();
                    }
                    return Ok(());
                }
                become_leader(myself, state, lease, outcome.label()).await
            }
            None => {
                if was_leader {
                    return Err(format!("lease of {} lost to another node", ctx.key).into());
                }
                if let LeaseOutcome::NotLeader(info) = &outcome {
                    state.last_owner = Some(info.owner_node.clone());
                    state.foreign_until =
                        Some(Instant::now() + info.expires_in + ctx.lease.clock_skew + defer);
                }
                // Standby: keep the PROTECT flag visible so this node answers 423 too.
                if let Ok(Some(cursor)) = store::nonce_cursor::load(&ctx.pool, ctx.key).await {
                    state.protect_reason = cursor.protect_reason;
                }
                state.set_role();
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
            // A leader's lease is renewed by the keeper; a standby is woken
            // again by the lease scan or by new work.
            tracing::warn!(target: "txmgr::submitter", submitter = %ctx.key, error = %err, "lease query failed");
            Ok(())
        }
    }
}

/// This node now holds the lease: the keeper renews it from here on, the
/// work is taken up, and the sweep and idle timers start.
async fn become_leader(
    myself: &ActorRef<SubmitterMsg>,
    state: &mut SubmitterState,
    lease: LeaseGuard,
    how: &'static str,
) -> Result<(), ActorProcessingErr> {
    let ctx = state.ctx.clone();
    ctx.keeper.hold(&lease, myself.clone());
    state.lease = Some(lease.clone());
    state.last_owner = Some(ctx.owner.node_id.to_string());
    state.foreign_until = None;
    state.leader_since = Some(Instant::now());
    state.last_activity = Instant::now();
    tracing::info!(target: "txmgr::submitter", submitter = %ctx.key, fencing_token = lease.token, outcome = how, "leader");
    state.memory = cycle::CycleMemory::fresh();
    state.taken_up = false;
    // A transient failure here (RPC, database) is retried by the next work,
    // sweep or resubmit message.
    if let Err(err) = take_up(state).await {
        fatal(state, err)?;
    }
    rearm(
        &mut state.sweep_timer,
        myself.send_after(ctx.sweep_interval, || SubmitterMsg::SweepTick),
    );
    arm_idle(myself, state, ctx.lease.idle_release_after);
    state.schedule_work(myself, Duration::ZERO);
    state.set_role();
    Ok(())
}

/// Lease balancing: after a renewal (the keeper asks for one when the lease
/// is preferred elsewhere), a leader that has held the lease for `min_hold`
/// and is not the submitter's preferred node hands the lease to the
/// preferred node (between messages, so no fenced transaction is in flight)
/// and becomes standby. Returns true when it did.
async fn hand_over_if_preferred_elsewhere(state: &mut SubmitterState, lease: &LeaseGuard) -> bool {
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
    ctx.keeper.forget(lease);
    metrics::counter!(crate::metrics::LEASE_HANDOVERS, "chain" => crate::metrics::chain_label(ctx.key.chain_id)).increment(1);
    tracing::info!(target: "txmgr::cluster", submitter = %ctx.key, to = %to, fencing_token = lease.token, "lease handed over to the preferred node");
    if let Err(err) = store::notify_handover(&ctx.pool, ctx.key).await {
        tracing::debug!(target: "txmgr::cluster", error = %err, "hand-over notification failed; the new owner finds it on its next lease tick");
    }
    state.lease = None;
    state.leader_since = None;
    state.taken_up = false;
    state.last_owner = Some(to);
    // The new owner takes it at once; a wake-up here tries again only after
    // a whole lease period, as the old standby timer did.
    state.foreign_until = Some(Instant::now() + ctx.lease.duration);
    ctx.index.remove_submitter(ctx.key.address);
    ctx.timers.forget_submitter(ctx.key.address);
    state.handle.status().set_head_of_line_blocked(false);
    for slot in [
        &mut state.work_timer,
        &mut state.sweep_timer,
        &mut state.idle_timer,
    ] {
        if let Some(timer) = slot.take() {
            timer.abort();
        }
    }
    state.set_role();
    true
}

/// What a new leader does before any work: reconcile the nonce cursor with
/// the chain (creating it for a new submitter), index every open attempt for
/// the block matcher, rebuild the resubmit timers, and ask for an immediate
/// resubmit pass (anything overdue, or requested by an operator meanwhile).
async fn take_up(state: &mut SubmitterState) -> Result<(), LeaderError> {
    let Some(lease) = state.lease.clone() else {
        return Ok(());
    };
    let ctx = state.ctx.clone();
    let found = sweep::on_acquired(&ctx, &lease).await?;
    state.protect_reason = found.protect_reason;
    tracking_reports::index_open_attempts(&ctx).await?;
    let due = store::resubmit_claims::schedule(&ctx.pool, ctx.key, None).await?;
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
        // Woken by work while another node's lease was last seen live: that
        // node was told too. Past it (or never asked), the lease may be free
        // — released by an idle leader, or its holder gone: try now.
        if state
            .foreign_until
            .is_some_and(|until| Instant::now() < until)
        {
            return Ok(false);
        }
        on_lease_tick(myself, state).await?;
        if state.lease.is_none() {
            return Ok(false);
        }
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
