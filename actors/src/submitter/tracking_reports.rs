//! The leader's side of tracking: it writes what the tracking pools found —
//! receipts, finality, reorged-out receipts — under its fence, and keeps the
//! receipt index in step with its attempts.

use alloy::primitives::{Bytes, B256};
use opentelemetry::KeyValue;
use uuid::Uuid;

use super::{error::LeaderError, leader_lease::LeaderLease, SubmitterContext};
use crate::{
    domain::{FinalDecision, ReorgedReceipt},
    metrics::FINALITY_VIOLATIONS,
    store::{
        tracking::{self, MinedReceipt},
        FencedTx, LeaseGuard,
    },
    tracker::Tracked,
};

/// Puts every open attempt of the submitter in the receipt index (new leader).
pub(crate) async fn index_open_attempts(ctx: &SubmitterContext) -> Result<(), LeaderError> {
    for (tx_id, hash) in tracking::open_attempt_hashes(&ctx.pool, ctx.key).await? {
        track(ctx, tx_id, hash);
    }
    Ok(())
}

/// Tracks one attempt hash.
pub(crate) fn track(ctx: &SubmitterContext, tx_id: Uuid, hash: B256) {
    ctx.index.insert(
        hash,
        Tracked {
            submitter: ctx.key.address,
            tx_id,
        },
    );
}

/// Records receipts found by the block matcher. Returns how many were new.
pub(crate) async fn record_receipts(
    ctx: &SubmitterContext,
    lease: &LeaseGuard,
    found: &[(Uuid, MinedReceipt)],
) -> Result<usize, LeaderError> {
    let started = std::time::SystemTime::now();
    let mut ftx = FencedTx::begin(&ctx.pool, lease, "record_receipts").await?;
    for (tx_id, receipt) in found {
        tracking::record_receipt(&mut ftx, *tx_id, receipt).await?;
    }
    ftx.commit().await?;
    if crate::intent_trace::enabled() {
        let ids: Vec<Uuid> = found.iter().map(|(id, _)| *id).collect();
        let traces = crate::store::trace_context::parents(&ctx.pool, &ids).await;
        let ended = std::time::SystemTime::now();
        for (tx_id, mined) in found {
            if let Some(parent) = traces.get(tx_id) {
                let status = mined
                    .receipt
                    .get("status")
                    .and_then(|s| s.as_str())
                    .unwrap_or("");
                crate::intent_trace::record(
                    "txmgr.receipt",
                    parent,
                    started,
                    ended,
                    vec![
                        KeyValue::new("txmgr.tx_hash", mined.tx_hash.to_string()),
                        KeyValue::new("txmgr.block_number", mined.block_number as i64),
                        KeyValue::new("txmgr.receipt_status", status.to_owned()),
                    ],
                    None,
                );
            }
        }
    }
    Ok(found.len())
}

/// Makes intents CONFIRMED / FAILED_FINAL and stops tracking them.
pub(crate) async fn finalize(
    ctx: &SubmitterContext,
    lease: &LeaseGuard,
    decided: &[FinalDecision],
) -> Result<usize, LeaderError> {
    let started = std::time::SystemTime::now();
    let mut ftx = FencedTx::begin(&ctx.pool, lease, "finalize").await?;
    let mut done = Vec::new();
    for decision in decided {
        if let Some(state) =
            tracking::finalize(&mut ftx, decision.tx_id, decision.succeeded).await?
        {
            done.push((decision.tx_id, state));
        }
    }
    ftx.commit().await?;
    if crate::intent_trace::enabled() {
        let ids: Vec<Uuid> = done.iter().map(|(id, _)| *id).collect();
        let traces = crate::store::trace_context::parents(&ctx.pool, &ids).await;
        let ended = std::time::SystemTime::now();
        for (tx_id, state) in &done {
            if let Some(parent) = traces.get(tx_id) {
                crate::intent_trace::record(
                    "txmgr.finality",
                    parent,
                    started,
                    ended,
                    vec![KeyValue::new("txmgr.state", state.as_str())],
                    None,
                );
            }
        }
    }
    for (tx_id, state) in &done {
        ctx.index.remove_intent(*tx_id);
        tracing::info!(target: "txmgr::submitter", submitter = %ctx.key, %tx_id,
            state = state.as_str(), "final");
    }
    ctx.timers
        .forget(ctx.key.address, done.iter().map(|(id, _)| *id).collect());
    Ok(done.len())
}

/// Clears receipts whose block was reorged out, back to TRACKING/`reorged`,
/// and re-broadcasts the bytes that had been mined so they are included again.
/// A final intent among them (a reorg deeper than finality) is re-opened the
/// same way, with a `REORGED_OUT` feed row, an error log and
/// `txmgr_finality_violations_total`; its attempts go back in the receipt
/// index so the block matcher sees it mined again.
pub(crate) async fn reorged_out(
    ctx: &SubmitterContext,
    lease: &LeaseGuard,
    lost: &[ReorgedReceipt],
) -> Result<(), LeaderError> {
    let mut ftx = FencedTx::begin(&ctx.pool, lease, "clear_reorged_receipt").await?;
    let mut rebroadcast = Vec::new();
    let mut reopened = 0;
    for lost in lost {
        if let Some(cleared) =
            tracking::clear_receipt(&mut ftx, lost.tx_id, lost.block_hash).await?
        {
            if cleared.was_final {
                reopened += 1;
                metrics::counter!(FINALITY_VIOLATIONS, "chain" => crate::metrics::chain_label(ctx.key.chain_id)).increment(1);
                tracing::error!(target: "txmgr::finality", submitter = %ctx.key, tx_id = %lost.tx_id,
                    block_hash = %lost.block_hash,
                    "reorg deeper than finality: a final transaction's block left the canonical chain; re-opened and re-broadcast");
            }
            rebroadcast.push((lost.tx_id, Bytes::from(cleared.raw), cleared.private));
        }
    }
    ftx.commit().await?;
    if reopened > 0 {
        index_open_attempts(ctx).await?;
    }
    let every = ctx.settings().resubmit_interval;
    ctx.timers.schedule(
        ctx.key.address,
        lost.iter().map(|r| (r.tx_id, every)).collect(),
    );
    LeaderLease::new(ctx, lease).check_valid()?;
    for (tx_id, raw, private) in rebroadcast {
        tracing::warn!(target: "txmgr::submitter", submitter = %ctx.key, %tx_id, "receipt reorged out; re-broadcasting");
        // "already known" / "nonce too low" are fine: the block matcher and
        // the sweep take it from here.
        // A private intent (or submitter) keeps to the send-only endpoints.
        let trace = crate::store::trace_context::parents(&ctx.pool, &[tx_id])
            .await
            .remove(&tx_id);
        let sent = crate::intent_trace::broadcasting(trace, async {
            if private || ctx.settings().private_sends {
                ctx.chain.send_raw_private(&raw).await
            } else {
                ctx.chain.send_raw(&raw).await
            }
        })
        .await;
        if let Err(err) = sent {
            tracing::debug!(target: "txmgr::submitter", %tx_id, error = %err, "re-broadcast after reorg answered");
        }
    }
    Ok(())
}
