//! The leader's upkeep between work cycles: the slow sweep (receipts the
//! block matcher missed, nonces used outside txmgr) and the resubmit pass
//! (re-broadcasts, fee bumps, cancels, STUCK).

use std::time::Duration;

use ractor::{ActorProcessingErr, ActorRef};
use uuid::Uuid;

use super::{fatal, ready_to_lead, rearm, SubmitterMsg, SubmitterState};
use crate::{
    store,
    submitter::{error::LeaderError, funds, leader_lease::LeaderLease, resubmit_pass, sweep},
};

/// How soon a fired resubmit timer of a submitter paused with
/// `halt_resubmits` fires again.
const HALTED_RECHECK: Duration = Duration::from_secs(5);

pub(super) async fn on_sweep(
    myself: &ActorRef<SubmitterMsg>,
    state: &mut SubmitterState,
) -> Result<(), ActorProcessingErr> {
    if !ready_to_lead(myself, state).await? {
        if state.lease.is_some() {
            rearm(
                &mut state.sweep_timer,
                myself.send_after(state.ctx.sweep_interval, || SubmitterMsg::SweepTick),
            );
        }
        return Ok(());
    }
    let Some(lease) = state.lease.clone() else {
        return Ok(());
    };
    rearm(
        &mut state.sweep_timer,
        myself.send_after(state.ctx.sweep_interval, || SubmitterMsg::SweepTick),
    );
    match sweep::run(&state.ctx, &lease).await {
        Ok(found) => {
            state.protect_reason = found.protect_reason;
            state.set_role();
            // Receipts free in-flight slots: let the cycle take more.
            if found.receipts > 0 {
                state.schedule_work(myself, Duration::ZERO);
            }
        }
        Err(err) => return fatal(state, err),
    }
    let known = state
        .funds_stored
        .and_then(|(token, low)| (token == lease.token).then_some(low));
    match funds::check(&state.ctx, &lease, known).await {
        Ok(Some((balance, low))) => {
            state.handle.status().set_funds(balance, low);
            state.funds_stored = Some((lease.token, low));
        }
        Ok(None) => {}
        Err(err) if err.is_fenced() => return fatal(state, err),
        // A chain or database hiccup: the next sweep reads again.
        Err(err) => {
            tracing::warn!(target: "txmgr::funds", submitter = %state.ctx.key, error = %err, "funds check failed")
        }
    }
    if state.handle.status().pause().is_some() || state.ctx.paused_by_config() {
        expire_while_paused(myself, state, &lease).await?;
    }
    // Safety net for the timers: claim anything overdue.
    on_resubmit(myself, state, Vec::new()).await
}

/// Paused: the allocation does not see the QUEUED intents, so deadlines
/// are kept here — those past their `valid_until` are REJECTED `expired`,
/// and the next sweep comes no later than the next deadline.
async fn expire_while_paused(
    myself: &ActorRef<SubmitterMsg>,
    state: &mut SubmitterState,
    lease: &store::LeaseGuard,
) -> Result<(), ActorProcessingErr> {
    let ctx = &state.ctx;
    let result = async {
        let mut ftx = store::FencedTx::begin(&ctx.pool, lease, "expire_paused").await?;
        let expiry = store::pipeline::expire_queued(&mut ftx).await?;
        ftx.commit().await?;
        Ok::<_, store::StoreError>(expiry)
    }
    .await;
    match result {
        Ok(expiry) => {
            if expiry.expired > 0 {
                tracing::info!(target: "txmgr::submitter", submitter = %ctx.key, expired = expiry.expired,
                    "paused: intents past their valid_until rejected");
            }
            if let Some(next) = expiry.next_deadline.filter(|d| *d < ctx.sweep_interval) {
                // Just past the deadline, by the database clock.
                let at = next + Duration::from_millis(50);
                rearm(
                    &mut state.sweep_timer,
                    myself.send_after(at, || SubmitterMsg::SweepTick),
                );
            }
            Ok(())
        }
        Err(err) if err.is_fenced() => fatal(state, err.into()),
        Err(err) => {
            tracing::warn!(target: "txmgr::submitter", submitter = %ctx.key, error = %err, "paused expiry failed; the next sweep tries again");
            Ok(())
        }
    }
}

/// Resubmits what is due (claim first), then re-arms the timers of the
/// intents looked at.
pub(super) async fn on_resubmit(
    myself: &ActorRef<SubmitterMsg>,
    state: &mut SubmitterState,
    ids: Vec<Uuid>,
) -> Result<(), ActorProcessingErr> {
    if !ready_to_lead(myself, state).await? {
        return Ok(());
    }
    let Some(lease) = state.lease.clone() else {
        return Ok(());
    };
    // Paused with `halt_resubmits`: in-flight intents are neither
    // re-broadcast nor bumped until the resume (README "Guardrails").
    if let Some(pause) = state.handle.status().pause() {
        if pause.halt_resubmits {
            tracing::debug!(target: "txmgr::submitter", submitter = %state.ctx.key, "paused with halt_resubmits: no resubmit pass");
            // Their timers fired: look again soon, so a resume is followed
            // by the pass without waiting for a sweep.
            let again: Vec<(Uuid, Duration)> =
                ids.into_iter().map(|id| (id, HALTED_RECHECK)).collect();
            if !again.is_empty() {
                state.ctx.timers.schedule(state.ctx.key.address, again);
            }
            return Ok(());
        }
    }
    let only = (!ids.is_empty()).then_some(ids.as_slice());
    let result = resubmit_pass::run(&state.ctx, LeaderLease::new(&state.ctx, &lease), only).await;
    state.set_role();
    match result {
        Ok(outcome) => {
            state
                .handle
                .status()
                .set_head_of_line_blocked(outcome.head_of_line_blocked);
            if outcome.sweep_now {
                rearm(
                    &mut state.sweep_timer,
                    myself.send_after(Duration::ZERO, || SubmitterMsg::SweepTick),
                );
            }
            let mut looked_at = outcome.claimed;
            looked_at.extend(ids);
            if !looked_at.is_empty() {
                let ctx = &state.ctx;
                match store::resubmit_claims::schedule(&ctx.pool, ctx.key, Some(&looked_at)).await {
                    Ok(due) => ctx.timers.schedule(ctx.key.address, due),
                    Err(err) => return fatal(state, err.into()),
                }
            }
            Ok(())
        }
        Err(LeaderError::LeaseExpired) => {
            state.check_lease_now(myself);
            Ok(())
        }
        Err(err) => fatal(state, err),
    }
}
