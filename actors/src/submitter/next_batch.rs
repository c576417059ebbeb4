//! One batch of the leader's cycle (`cycle`, steps 2–4): read the next
//! QUEUED intents that fit the free in-flight slots, prepare and price them,
//! draw nonces, sign, and persist every attempt in one fenced write before
//! anything is sent; and the fillers that take released nonces when nothing
//! queued does.

use std::time::{Duration, Instant};

use futures::future::join_all;
use uuid::Uuid;

use super::{
    allocation::{allocate_presigned, allocate_then_sign, AllocateThenSign, Batch},
    broadcast::new_attempts_as_pending,
    cycle::{CycleMemory, CycleOutcome, ESTIMATE_REUSE},
    error::LeaderError,
    fees,
    leader_lease::LeaderLease,
    presign,
    signing::Signed,
    SubmitterContext,
};
use crate::{
    domain::Intent,
    store::{filler, group::Write, pipeline::PendingAttempt, queue_read::QueueRequest, FencedTx},
};

/// Reads the next QUEUED intents, prices, draws, signs and writes them
/// (one fenced write, committed before anything is sent); returns the
/// attempts to broadcast, `None` when nothing was queued.
pub(super) async fn next_batch(
    ctx: &SubmitterContext,
    lease: LeaderLease<'_>,
    memory: &mut CycleMemory,
    outcome: &mut CycleOutcome,
) -> Result<Option<Vec<PendingAttempt>>, LeaderError> {
    let settings = ctx.settings();
    let batch = settings.batch_size.max(1) as usize;
    let queued = ctx
        .queue
        .read(QueueRequest {
            key: ctx.key,
            batch,
            max_in_flight: settings.max_in_flight,
            count_mined: settings.hold_slot_until_final,
        })
        .await?;
    if queued.is_empty() {
        if memory.check_gaps {
            fill_gaps(ctx, lease, memory, outcome).await?;
        }
        return Ok(None);
    }
    outcome.more = queued.len() == batch;

    // Past their deadline: not estimated, handed to the allocation to reject.
    let now = chrono::Utc::now();
    let (expired, queued): (Vec<_>, Vec<_>) =
        queued.into_iter().partition(|q| q.intent.expired_at(now));
    let expired: Vec<Uuid> = expired.into_iter().map(|q| q.tx_id).collect();
    // The policy again before a nonce is drawn: intents stored before a
    // rule was tightened, and the engine's own (a top-up counts against its
    // funder's policy), are REJECTED rather than sent against it.
    let mut policy_refused: Vec<(Uuid, String)> = Vec::new();
    let queued: Vec<_> = queued
        .into_iter()
        .filter(|q| match settings.policy.check(&q.intent) {
            Ok(()) => true,
            Err(violation) => {
                metrics::counter!(crate::metrics::POLICY_REFUSALS,
                    "chain" => crate::metrics::chain_label(ctx.key.chain_id), "rule" => violation.rule)
                .increment(1);
                policy_refused.push((q.tx_id, format!("policy_violation: {violation}")));
                false
            }
        })
        .collect();

    // Prepare before allocate: a failure here consumes no nonce. An
    // estimate kept from an earlier cycle (the intent waited for spend
    // room) is reused while fresh; the others are forgotten.
    let now_instant = Instant::now();
    if !memory.estimates.is_empty() {
        let read: std::collections::HashSet<Uuid> = queued.iter().map(|q| q.tx_id).collect();
        memory.estimates.retain(|id, (_, at)| {
            now_instant.duration_since(*at) < ESTIMATE_REUSE && read.contains(id)
        });
    }
    let estimates = join_all(queued.iter().map(|q| {
        let kept = memory.estimates.get(&q.tx_id).map(|(gas, _)| *gas);
        async move {
            match (q.intent.gas_limit, kept) {
                (Some(limit), _) => Ok(limit),
                (None, Some(gas)) => Ok(gas),
                (None, None) => ctx.chain.estimate_gas(ctx.key.address, &q.intent).await,
            }
        }
    }))
    .await;
    let mut estimated: Vec<(Uuid, u64)> = Vec::new();
    let mut rejected: Vec<(Uuid, String)> = policy_refused;
    let mut ready: Vec<(Uuid, Intent)> = Vec::new();
    for (queued, estimate) in queued.into_iter().zip(estimates) {
        match estimate {
            Ok(estimate) => {
                if queued.intent.gas_limit.is_none() {
                    estimated.push((queued.tx_id, estimate));
                }
                let mut intent = queued.intent;
                intent.gas_limit = Some(fees::gas_limit(
                    &intent,
                    Some(estimate),
                    settings.gas_limit_margin,
                ));
                ready.push((queued.tx_id, intent));
            }
            Err(err) if err.is_revert() => {
                rejected.push((queued.tx_id, format!("gas estimation failed: {err}")))
            }
            // Keep acceptance order: stop at the first intent we could not price.
            Err(err) => {
                tracing::warn!(target: "txmgr::submitter", submitter = %ctx.key, error = %err, "gas estimation unavailable");
                outcome.retry_in = Some(settings.retry_backoff);
                outcome.more = false;
                break;
            }
        }
    }
    let quote = ctx.chain.fees().await?;

    // One fenced write draws the nonces; signing happens after its commit
    // (a remote signer may take as long as its timeout, and nothing may hold
    // the lease row's lock that long); a second fenced write persists the
    // attempts. Nothing leaves the process before that commit. Both go
    // through the node's group committer, merged with other leaders' writes.
    // A crash in between leaves ALLOCATED intents without an attempt, which
    // the next leader signs again with the same nonces.
    lease.renew_if_due().await?;
    let mut ids: Vec<Uuid> = ready.iter().map(|(id, _)| *id).collect();
    // Past their deadline already: the allocation rejects them (by the
    // database's clock) without a nonce.
    ids.extend(expired.iter().copied());
    let traces = crate::store::trace_context::parents(&ctx.pool, &ids).await;
    // A deadline earlier than the first resubmit: the timer fires at the
    // deadline, and that pass cancels the intent if it is not mined.
    let now = chrono::Utc::now();
    let first_check: std::collections::HashMap<Uuid, Duration> = ready
        .iter()
        .map(|(id, intent)| {
            let until_deadline = intent
                .valid_until
                .and_then(|until| (until - now).to_std().ok())
                .unwrap_or(settings.resubmit_interval);
            (*id, until_deadline.min(settings.resubmit_interval))
        })
        .collect();
    let mut by_id: std::collections::HashMap<Uuid, Intent> = ready.into_iter().collect();
    // Under a spend limit the allocation admits what fits the window; the
    // rest waits QUEUED, and this leader looks again after a backoff.
    let spend = settings
        .policy
        .spend_limit
        .map(|limit| crate::store::group::SpendBudget {
            value_limit: limit.value,
            fees_limit: limit.fees,
            window: limit.window,
            wait: settings.policy.spend_wait,
            costs: by_id
                .iter()
                .map(|(id, intent)| (*id, spend_cost(intent, &quote, &settings)))
                .collect(),
        });
    // Without a spend limit: drawn from the leader's copy of the cursor and
    // signed first, then one fenced write (`presign`). Under one, the
    // database admits what fits the window before anything is signed.
    let cursor = match spend {
        None => presign::usable_cursor(ctx, &mut memory.cursor).await?,
        Some(_) => None,
    };
    let batch = Batch {
        rejected: &rejected,
        expired: &expired,
        traces: &traces,
    };
    let (assigned, signed) = match cursor {
        Some(cursor) => {
            let ready: Vec<(Uuid, Intent)> = ids
                .iter()
                .filter_map(|id| Some((*id, by_id.remove(id)?)))
                .collect();
            let drawn = presign::draw_and_sign(ctx, cursor, ready, &quote).await;
            lease.renew_if_due().await?;
            allocate_presigned(ctx, lease, memory, outcome, drawn, batch).await?
        }
        None => {
            let batch = AllocateThenSign {
                batch,
                ids,
                spend,
                by_id,
                estimated,
                estimated_at: now_instant,
                quote: &quote,
            };
            allocate_then_sign(ctx, lease, memory, outcome, batch).await?
        }
    };
    for (tx_id, reason) in &rejected {
        tracing::info!(target: "txmgr::submitter", submitter = %ctx.key, %tx_id, reason, "intent rejected before allocation");
    }
    // A refused top-up is a failed one, in the audit table.
    if let Err(err) =
        crate::store::funds::record_refused_top_ups(&ctx.pool, &rejected, &ctx.owner.node_id).await
    {
        tracing::warn!(target: "txmgr::funds", submitter = %ctx.key, error = %err, "refused top-ups not audited");
    }
    signed.track(ctx);
    ctx.timers.schedule(
        ctx.key.address,
        assigned
            .iter()
            .map(|(id, _)| {
                let first = first_check.get(id).copied();
                (*id, first.unwrap_or(settings.resubmit_interval))
            })
            .collect(),
    );
    if signed.transient_failure {
        // Left QUEUED (or, under a spend limit, ALLOCATED without an
        // attempt): signed again after the backoff.
        outcome.retry_in = Some(settings.retry_backoff);
    }
    if signed.signer_unavailable.is_some() {
        outcome.signer_unavailable = signed.signer_unavailable.clone();
    }
    Ok(Some(new_attempts_as_pending(&signed.attempts)))
}

/// What an intent draws from its submitter's spend window at allocation:
/// its value, and the worst case of the attempt it will be signed as (the
/// same quote and caps the signing uses; gas limit already estimated).
fn spend_cost(
    intent: &Intent,
    quote: &crate::chain::FeeQuote,
    settings: &super::SubmitterSettings,
) -> crate::store::group::SpendCost {
    let gas = intent.gas_limit.unwrap_or(21_000);
    let price = fees::price(intent, quote, &settings.for_gas_limit(gas));
    crate::store::group::SpendCost {
        value: intent.value,
        fees: price.worst_case(gas),
    }
}

/// Released nonces below allocated ones hold every later nonce of the
/// submitter; with nothing queued to take them, fillers do (README
/// "How an intent is executed"). They are made ALLOCATED without an attempt, so the next cycle
/// signs and broadcasts them through the recovery path.
async fn fill_gaps(
    ctx: &SubmitterContext,
    lease: LeaderLease<'_>,
    memory: &mut CycleMemory,
    outcome: &mut CycleOutcome,
) -> Result<(), LeaderError> {
    let gaps = filler::gaps(&ctx.pool, ctx.key).await?;
    if gaps.is_empty() {
        memory.check_gaps = false;
        return Ok(());
    }
    let settings = ctx.settings();
    lease.renew_if_due().await?;
    let mut ftx = FencedTx::begin(&ctx.pool, lease.guard(), "fill_gaps").await?;
    // Fillers take released nonces from the cursor row.
    memory.cursor = None;
    let made = filler::create(
        &mut ftx,
        &gaps,
        settings.resubmit_interval,
        settings.resubmit_interval,
    )
    .await?;
    ftx.commit().await?;
    if made.len() < gaps.len() {
        // Some gap's last filler is too recent: look again later.
        outcome.retry_in = Some(settings.retry_backoff);
    } else {
        memory.check_gaps = false;
    }
    for (tx_id, nonce) in &made {
        metrics::counter!(crate::metrics::FILLERS, "chain" => crate::metrics::chain_label(ctx.key.chain_id)).increment(1);
        tracing::warn!(target: "txmgr::submitter", submitter = %ctx.key, %tx_id, nonce,
            "released nonce below allocated ones: a filler takes it");
    }
    if !made.is_empty() {
        memory.recover_unsigned = true;
        outcome.more = true;
        ctx.timers.schedule(
            ctx.key.address,
            made.iter()
                .map(|(id, _)| (*id, settings.resubmit_interval))
                .collect(),
        );
    }
    Ok(())
}

/// Persists signed attempts and rejects refused intents through the group
/// committer; returns once committed (nothing is broadcast before).
pub(super) async fn persist(
    ctx: &SubmitterContext,
    lease: LeaderLease<'_>,
    signed: &Signed,
) -> Result<(), LeaderError> {
    if signed.attempts.is_empty() && signed.refused.is_empty() {
        return Ok(());
    }
    let write = Write::PersistAttempts {
        attempts: signed.attempts.clone(),
        refused: signed.refused.clone(),
    };
    ctx.write(lease.guard(), write).await?;
    Ok(())
}
