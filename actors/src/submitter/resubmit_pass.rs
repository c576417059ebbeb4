//! The leader's resubmission (README "Resubmission, fee bumps, STUCK and cancel"): claim first (fenced),
//! then STUCK decisions, then re-broadcast the newest attempt's identical
//! bytes, or sign a replacement at the same nonce — a fee bump, or a cancel
//! (0-value self-transfer) — persisted before it is broadcast.
//!
//! Triggers: the resubmit timers, an operator's request, and the leader's
//! slow sweep (anything overdue). All go through the same claim, so no two
//! of them — nor two nodes — act twice on one due time.

use alloy::primitives::{Bytes, B256, U256};
use tracing::Instrument;
use uuid::Uuid;

use super::{
    error::LeaderError,
    escalation::{plan, stuck_reason, Plan},
    fees::{self, Fees},
    leader_lease::LeaderLease,
    settings::MIN_BUMP_MULTIPLIER,
    signing, SubmitterContext, SubmitterSettings,
};
use crate::{
    chain::{classify_send, BroadcastClass, FeeQuote},
    domain::{AttemptKind, Intent, SubState, TxState},
    metrics::{stuck_reason as stuck_label, HEAD_OF_LINE_BLOCKED, RESUBMITS, STUCK},
    store::{
        pipeline::NewAttempt,
        resubmit_claims::{self, ClaimedResubmit},
        tracking, FencedTx,
    },
};

/// Gas of a plain value transfer: the least a cancel (self-transfer) gets.
const TRANSFER_GAS: u64 = 21_000;

/// How many ever larger replacements one resubmit tries when the node
/// answers "replacement transaction underpriced".
const UNDERPRICED_RETRIES: usize = 2;

/// What a resubmit pass did.
#[derive(Debug, Default)]
pub(crate) struct ResubmitOutcome {
    /// Intents claimed (their timers need re-arming).
    pub claimed: Vec<Uuid>,
    /// A node said a nonce is consumed: check the chain now.
    pub sweep_now: bool,
    /// The lowest unmined nonce is STUCK.
    pub head_of_line_blocked: bool,
}

/// One pass: claim due intents (restricted to `only`), mark STUCK ones, and
/// act on each.
pub(crate) async fn run(
    ctx: &SubmitterContext,
    lease: LeaderLease<'_>,
    only: Option<&[Uuid]>,
) -> Result<ResubmitOutcome, LeaderError> {
    let settings = ctx.settings();
    let limit = settings.batch_size.max(1) as usize;
    let mut ftx = FencedTx::begin(&ctx.pool, lease.guard(), "claim_resubmit").await?;
    // Past their deadline and not mined: cancelled now, in this pass.
    let deadline_cancels = resubmit_claims::request_deadline_cancels(&mut ftx).await?;
    let only: Option<Vec<Uuid>> = only.map(|ids| {
        let mut ids = ids.to_vec();
        ids.extend(deadline_cancels.iter().copied());
        ids
    });
    for tx_id in &deadline_cancels {
        tracing::warn!(target: "txmgr::submitter", submitter = %ctx.key, %tx_id, "valid_until passed before it was mined: cancelling");
    }
    let mut claimed =
        resubmit_claims::claim_due(&mut ftx, only.as_deref(), limit, settings.resubmit_interval)
            .await?;
    let mut newly_stuck = Vec::new();
    for item in &mut claimed {
        if let Some((sub_state, reason)) = stuck_reason(item, &settings) {
            tracking::mark_stuck(&mut ftx, item.tx_id, sub_state, &reason).await?;
            item.state = TxState::Stuck;
            newly_stuck.push((item.tx_id, item.nonce, sub_state, reason));
        }
    }
    ftx.commit().await?;
    for (tx_id, nonce, sub_state, reason) in &newly_stuck {
        metrics::counter!(STUCK, "chain" => crate::metrics::chain_label(ctx.key.chain_id), "reason" => stuck_label(*sub_state)).increment(1);
        tracing::error!(target: "txmgr::submitter", submitter = %ctx.key, %tx_id, nonce, reason, "STUCK");
    }
    let mut outcome = ResubmitOutcome {
        claimed: claimed.iter().map(|c| c.tx_id).collect(),
        ..ResubmitOutcome::default()
    };
    let head = resubmit_claims::head_of_line(&ctx.pool, ctx.key).await?;
    outcome.head_of_line_blocked = report_head_of_line(ctx, head);
    if claimed.is_empty() {
        return Ok(outcome);
    }
    let head_nonce = head.map(|(nonce, _)| nonce);
    let mut quote: Option<FeeQuote> = None;
    for (i, item) in claimed.iter().enumerate() {
        let plan = plan(item, &settings, head_nonce);
        let span = tracing::info_span!("resubmit", tx_id = %item.tx_id, nonce = item.nonce);
        let result = resubmit_one(ctx, lease, item, plan, &settings, &mut quote, &mut outcome)
            .instrument(span)
            .await;
        match result {
            Ok(true) => {
                if let Some(action) = item.requested {
                    tracing::info!(target: "txmgr::audit", submitter = %ctx.key, tx_id = %item.tx_id,
                        nonce = item.nonce, action = action.as_str(),
                        by = item.requested_by.as_deref().unwrap_or("unknown"), "operator action carried out");
                }
            }
            Ok(false) => restore_requests(ctx, std::slice::from_ref(item)).await,
            Err(err) => {
                // Claimed but not done: operators' requests go back for the
                // next pass (due resubmits come round again by themselves).
                restore_requests(ctx, &claimed[i..]).await;
                return Err(err);
            }
        }
    }
    Ok(outcome)
}

async fn restore_requests(ctx: &SubmitterContext, items: &[ClaimedResubmit]) {
    for item in items {
        if let Some(action) = item.requested {
            if let Err(err) = resubmit_claims::restore_request(
                &ctx.pool,
                item.tx_id,
                action,
                item.requested_by.as_deref(),
            )
            .await
            {
                tracing::warn!(target: "txmgr::submitter", submitter = %ctx.key, tx_id = %item.tx_id,
                    action = action.as_str(), error = %err, "an operator's request could not be put back");
            }
        }
    }
}

/// Publishes whether the head of the nonce line is STUCK (metric); returns it
/// for the actor's status.
pub(crate) fn report_head_of_line(ctx: &SubmitterContext, head: Option<(u64, TxState)>) -> bool {
    let blocked = matches!(head, Some((_, TxState::Stuck)));
    metrics::gauge!(HEAD_OF_LINE_BLOCKED, "chain" => crate::metrics::chain_label(ctx.key.chain_id), "submitter" => ctx.key.address_hex()).set(if blocked {
        1.0
    } else {
        0.0
    });
    blocked
}

async fn resubmit_one(
    ctx: &SubmitterContext,
    lease: LeaderLease<'_>,
    item: &ClaimedResubmit,
    plan: Plan,
    settings: &SubmitterSettings,
    quote: &mut Option<FeeQuote>,
    outcome: &mut ResubmitOutcome,
) -> Result<bool, LeaderError> {
    let Plan::Replace {
        kind,
        mut multiplier,
    } = plan
    else {
        rebroadcast(ctx, lease, item, outcome).await?;
        return Ok(true);
    };
    let mut previous = fees::of_attempt(&item.latest_fees);
    for _ in 0..=UNDERPRICED_RETRIES {
        let market = match quote {
            Some(q) => *q,
            None => *quote.insert(ctx.chain.fees().await?),
        };
        let market = fees::market(&market, settings.legacy_fees);
        // Within the policy's max_fee_per_tx at the attempt's gas limit (a
        // cancel uses no more gas than the attempt it replaces).
        let capped = settings.for_gas_limit(item.latest_fees.gas_limit);
        let Some(new_fees) = fees::bump(previous, market, multiplier, &capped) else {
            // The caps leave no room for a replacement the node would take.
            let sub_state = if kind == AttemptKind::Cancel {
                SubState::CancelAtFeeCap
            } else {
                SubState::FeeCapReached
            };
            let mut ftx = FencedTx::begin(&ctx.pool, lease.guard(), "resubmit_sub_state").await?;
            resubmit_claims::set_sub_state(&mut ftx, item.tx_id, sub_state, None).await?;
            ftx.commit().await?;
            tracing::warn!(target: "txmgr::submitter", submitter = %ctx.key, tx_id = %item.tx_id,
                nonce = item.nonce, %sub_state, "fee cap reached: re-broadcasting instead");
            rebroadcast(ctx, lease, item, outcome).await?;
            // An operator's cancel or speed-up that the caps forbid is done
            // as far as it can be: it is not retried.
            return Ok(true);
        };
        let attempt = match sign_replacement(ctx, item, kind, new_fees).await? {
            Some(attempt) => attempt,
            None => return Ok(false),
        };
        lease.renew_if_due().await?;
        let mut ftx = FencedTx::begin(&ctx.pool, lease.guard(), "persist_replacement").await?;
        crate::store::pipeline::insert_attempts(&mut ftx, std::slice::from_ref(&attempt)).await?;
        let sub_state = if kind == AttemptKind::Cancel {
            SubState::Cancelling
        } else {
            SubState::FeeBumped
        };
        resubmit_claims::set_sub_state(&mut ftx, item.tx_id, sub_state, None).await?;
        ftx.commit().await?;
        super::tracking_reports::track(ctx, item.tx_id, attempt.tx_hash);
        let label = if kind == AttemptKind::Cancel {
            "cancel"
        } else {
            "bump"
        };
        metrics::counter!(RESUBMITS, "chain" => crate::metrics::chain_label(ctx.key.chain_id), "kind" => label).increment(1);
        tracing::info!(target: "txmgr::submitter", submitter = %ctx.key, tx_id = %item.tx_id,
            nonce = item.nonce, kind = label, tx_hash = %attempt.tx_hash, fees = ?new_fees, "replacement signed");
        let private = item.intent.private;
        let class = send(
            ctx,
            lease,
            (item.tx_id, private),
            attempt.tx_hash,
            &attempt.raw,
        )
        .await?;
        record(ctx, lease, item.tx_id, attempt.tx_hash, class, outcome).await?;
        if class != BroadcastClass::ReplacementUnderpriced {
            return Ok(true);
        }
        // The pool holds a pricier transaction at this nonce: go higher.
        previous = new_fees;
        multiplier = multiplier.max(MIN_BUMP_MULTIPLIER) * multiplier.max(MIN_BUMP_MULTIPLIER);
    }
    Ok(true)
}

/// Re-sends the newest attempt a node accepted (else the newest).
async fn rebroadcast(
    ctx: &SubmitterContext,
    lease: LeaderLease<'_>,
    item: &ClaimedResubmit,
    outcome: &mut ResubmitOutcome,
) -> Result<(), LeaderError> {
    let target = (item.tx_id, item.intent.private);
    let class = send(ctx, lease, target, item.resend_hash, &item.resend_raw).await?;
    metrics::counter!(RESUBMITS, "chain" => crate::metrics::chain_label(ctx.key.chain_id), "kind" => "rebroadcast").increment(1);
    record(ctx, lease, item.tx_id, item.resend_hash, class, outcome).await
}

/// Signs a replacement at the intent's nonce; `None` when the signer refused
/// (logged; the next resubmit tries again).
async fn sign_replacement(
    ctx: &SubmitterContext,
    item: &ClaimedResubmit,
    kind: AttemptKind,
    new_fees: Fees,
) -> Result<Option<NewAttempt>, LeaderError> {
    let (intent, gas_limit) = if kind == AttemptKind::Cancel {
        let mut cancel = Intent::transfer(ctx.key.address, U256::ZERO);
        // 21000 on L1; chains that charge more for a plain transfer (L1
        // data fees on some rollups) answer more. Unanswered: 21000.
        let gas = ctx
            .chain
            .estimate_gas(ctx.key.address, &cancel)
            .await
            .map_or(TRANSFER_GAS, |estimate| estimate.max(TRANSFER_GAS));
        cancel.gas_limit = Some(gas);
        (cancel, gas)
    } else {
        (item.intent.clone(), item.latest_fees.gas_limit)
    };
    let unsigned = fees::build(
        &intent,
        ctx.key.chain_id.get(),
        item.nonce,
        gas_limit,
        new_fees,
    );
    let raw = match ctx.signer.sign(unsigned).await {
        Ok(raw) => raw,
        Err(err) => {
            tracing::warn!(target: "txmgr::submitter", submitter = %ctx.key, tx_id = %item.tx_id, error = %err, "signing a replacement failed");
            return Ok(None);
        }
    };
    Ok(Some(signing::attempt_row(
        item.tx_id,
        item.nonce,
        raw,
        &new_fees,
        gas_limit,
        kind,
        item.intent.private,
    )))
}

/// Broadcasts once on a lease this node still holds; returns the class.
/// `(tx_id, private)`: a private intent (or submitter) is re-sent to the
/// send-only endpoints alone, bumps and re-broadcasts included.
async fn send(
    ctx: &SubmitterContext,
    lease: LeaderLease<'_>,
    (tx_id, private): (Uuid, bool),
    hash: B256,
    raw: &Bytes,
) -> Result<BroadcastClass, LeaderError> {
    lease.check_may_send().await?;
    // A re-broadcast or bump is more broadcast spans of the intent's trace.
    let trace = crate::store::trace_context::parents(&ctx.pool, &[tx_id])
        .await
        .remove(&tx_id);
    let sent = crate::intent_trace::broadcasting(trace, async {
        if private || ctx.settings().private_sends {
            ctx.chain.send_raw_private(raw).await
        } else {
            ctx.chain.send_raw(raw).await
        }
    })
    .await;
    let class = classify_send(&sent);
    metrics::counter!(crate::metrics::BROADCASTS, "chain" => crate::metrics::chain_label(ctx.key.chain_id), "result" => class.label()).increment(1);
    tracing::debug!(target: "txmgr::submitter", submitter = %ctx.key, %tx_id, %hash, result = class.label(), "resubmitted");
    Ok(class)
}

/// Records a resubmit's answer (fenced).
async fn record(
    ctx: &SubmitterContext,
    lease: LeaderLease<'_>,
    tx_id: Uuid,
    hash: B256,
    class: BroadcastClass,
    outcome: &mut ResubmitOutcome,
) -> Result<(), LeaderError> {
    let mut ftx = FencedTx::begin(&ctx.pool, lease.guard(), "record_resubmit").await?;
    ftx.relax_durability().await?;
    if class.counts_as_accepted() {
        resubmit_claims::record_resubmitted(&mut ftx, &[(tx_id, hash, class.label().to_string())])
            .await?;
    } else {
        if class == BroadcastClass::NonceTooLow {
            outcome.sweep_now = true;
        }
        if class == BroadcastClass::Transient {
            resubmit_claims::mark_maybe_pooled(&mut ftx, tx_id).await?;
        }
        crate::store::pipeline::record_attempt_results(
            &mut ftx,
            std::iter::once((tx_id, hash, class.label().to_string())),
        )
        .await?;
    }
    ftx.commit().await?;
    Ok(())
}
