//! The leader's chain check: nonce reconciliation on acquiring the lease,
//! then periodically — external use of the key, and receipts of intents whose
//! nonce the chain has consumed (README "How an intent is executed" and "Receipts, finality and reorgs").
//!
//! This is the slow path that never loses a receipt: it asks per hash, only
//! for intents whose nonce is already below the chain's latest nonce.

use uuid::Uuid;

use super::{error::LeaderError, SubmitterContext};
use crate::{
    domain::{ReorgedReceipt, SubState},
    metrics::{stuck_reason, EXTERNAL_NONCE},
    store::{
        audit::{self, AuditEntry, AuditOutcome},
        finality, nonce_cursor, pipeline,
        tracking::{self, MinedReceipt},
        FencedTx, LeaseGuard,
    },
};

/// Run once when this node becomes leader: create the cursor at the chain's
/// pending nonce for a new submitter, make every ALLOCATED intent due for an
/// immediate (identical) re-broadcast, then check the chain. Returns the
/// PROTECT reason, if any.
pub(crate) async fn on_acquired(
    ctx: &SubmitterContext,
    lease: &LeaseGuard,
) -> Result<SweepResult, LeaderError> {
    let nonces = ctx.chain.nonces(ctx.key.address).await?;
    let mut ftx = FencedTx::begin(&ctx.pool, lease, "acquire_reconcile").await?;
    nonce_cursor::init(&mut ftx, nonces.pending).await?;
    pipeline::retry_allocated_now(&mut ftx).await?;
    ftx.commit().await?;
    run(ctx, lease).await
}

/// Final intents at or above the chain's latest nonce are no longer on
/// chain — unless the endpoint read lags. Each one whose block the endpoint
/// knows under another hash was reorged out after finality (a reorg the head
/// watcher did not see, e.g. across a restart): it is re-opened like a
/// reorged receipt. A block the endpoint does not have yet proves nothing
/// and is looked at again on the next sweep.
async fn heal_final_beyond_the_chain(
    ctx: &SubmitterContext,
    lease: &LeaseGuard,
    latest_nonce: u64,
) -> Result<(), LeaderError> {
    let mut lost = Vec::new();
    for intent in finality::final_from_nonce(&ctx.pool, ctx.key, latest_nonce).await? {
        match ctx.chain.block(intent.block_number).await {
            Ok(Some(block)) if block.hash != intent.block_hash => lost.push(ReorgedReceipt {
                tx_id: intent.tx_id,
                block_hash: intent.block_hash,
            }),
            Ok(_) => {}
            Err(err) => {
                tracing::debug!(target: "txmgr::submitter", submitter = %ctx.key, tx_id = %intent.tx_id, error = %err, "block lookup failed; next sweep");
            }
        }
    }
    if lost.is_empty() {
        return Ok(());
    }
    super::tracking_reports::reorged_out(ctx, lease, &lost).await
}

/// What a chain check found.
#[derive(Debug, Default)]
pub(crate) struct SweepResult {
    /// Set when the submitter is (now) in PROTECT.
    pub protect_reason: Option<String>,
    /// Receipts recorded (each may free an in-flight slot).
    pub receipts: usize,
}

/// Checks the chain: external nonce use and receipts of consumed nonces.
pub(crate) async fn run(
    ctx: &SubmitterContext,
    lease: &LeaseGuard,
) -> Result<SweepResult, LeaderError> {
    let settings = ctx.settings();
    let nonces = ctx.chain.nonces(ctx.key.address).await?;
    let Some(cursor) = nonce_cursor::load(&ctx.pool, ctx.key).await? else {
        return Ok(SweepResult::default());
    };
    let mut protect_reason = cursor.protect_reason.clone();
    metrics::gauge!(crate::metrics::SUBMITTER_NONCE_LAG,
        "chain" => crate::metrics::chain_label(ctx.key.chain_id), "submitter" => ctx.key.address_hex())
    .set(cursor.next_nonce.saturating_sub(nonces.latest) as f64);

    if nonces.pending > cursor.next_nonce && protect_reason.is_none() {
        let ahead = nonces.pending - cursor.next_nonce;
        let reason = format!(
            "external use of the key: chain pending nonce {} is {ahead} above txmgr's next nonce {} \
             (the key signed elsewhere, or the database was restored from an older backup)",
            nonces.pending, cursor.next_nonce
        );
        let mut ftx = FencedTx::begin(&ctx.pool, lease, "external_nonce").await?;
        let action = if settings.protect_on_external_nonce {
            nonce_cursor::set_protect(&mut ftx, &reason).await?;
            protect_reason = Some(reason.clone());
            metrics::counter!(EXTERNAL_NONCE, "chain" => crate::metrics::chain_label(ctx.key.chain_id), "action" => "protect").increment(1);
            tracing::error!(target: "txmgr::submitter", submitter = %ctx.key, ahead, reason, "PROTECT: submitter stopped");
            "external_nonce_protect"
        } else {
            nonce_cursor::adopt_chain_nonce(&mut ftx, nonces.pending).await?;
            metrics::counter!(EXTERNAL_NONCE, "chain" => crate::metrics::chain_label(ctx.key.chain_id), "action" => "adopt").increment(1);
            tracing::warn!(target: "txmgr::submitter", submitter = %ctx.key, ahead, reason, "adopting the chain's nonce");
            "external_nonce_adopted"
        };
        // The operator's record, committed with the change it explains.
        let submitter = ctx.key.address_hex();
        audit::insert(
            ftx.conn(),
            &AuditEntry {
                actor: "txmgr",
                action,
                chain_id: Some(ctx.key.chain_id),
                submitter: Some(&submitter),
                reason: Some(&reason),
                node_id: Some(&lease.owner.node_id),
                tx_id: None,
            },
            AuditOutcome::Done,
        )
        .await?;
        ftx.commit().await?;
    }

    // Final intents can lie beyond the chain's latest nonce only while it is
    // below the cursor: an idle submitter costs no query here.
    if nonces.latest < cursor.next_nonce {
        heal_final_beyond_the_chain(ctx, lease, nonces.latest).await?;
    }

    let unmined = tracking::load_unmined_below(&ctx.pool, ctx.key, nonces.latest).await?;
    if unmined.is_empty() {
        return Ok(SweepResult {
            protect_reason,
            receipts: 0,
        });
    }
    let mut mined = Vec::new();
    let mut consumed_by_others = Vec::new();
    'intents: for intent in unmined {
        let mut found = None;
        for hash in &intent.attempt_hashes {
            match ctx.chain.receipt(*hash).await {
                Ok(Some(receipt)) => {
                    found = Some(receipt);
                    break;
                }
                Ok(None) => {}
                // One failed lookup skips this intent until the next sweep;
                // the others are still checked.
                Err(err) => {
                    tracing::debug!(target: "txmgr::submitter", submitter = %ctx.key, tx_id = %intent.tx_id, error = %err, "receipt lookup failed; next sweep");
                    continue 'intents;
                }
            }
        }
        match found {
            Some(receipt) => {
                let Some(receipt) = mined_receipt(&receipt) else {
                    continue;
                };
                mined.push((intent.tx_id, receipt));
            }
            None => {
                // Another of our intents may hold this nonce's mined bytes
                // (e.g. a released nonce whose first bytes were mined after
                // all): then it was not external use, and that intent gets
                // the receipt from the matcher or this sweep.
                let Ok(ours) = other_attempt_mined(ctx, &intent).await else {
                    continue;
                };
                consumed_by_others.push((intent, ours));
            }
        }
    }
    let consumed_by_others = confirmed_consumed(ctx, consumed_by_others).await?;
    let mut ftx = FencedTx::begin(&ctx.pool, lease, "record_receipts").await?;
    if !consumed_by_others.is_empty() {
        // Requeues and PROTECT below change the cursor: its lock before the
        // intents' rows (the store's lock order).
        nonce_cursor::lock_before_rows(&mut ftx).await?;
    }
    for (tx_id, receipt) in &mined {
        tracking::record_receipt(&mut ftx, *tx_id, receipt).await?;
    }
    for (intent, ours) in &consumed_by_others {
        if let Some((owner, receipt)) = ours {
            let reason = format!("nonce {} went to another of our intents", intent.nonce);
            tracking::requeue(&mut ftx, intent.tx_id, &reason).await?;
            ctx.index.remove_intent(intent.tx_id);
            tracing::warn!(target: "txmgr::submitter", submitter = %ctx.key, tx_id = %intent.tx_id, reason, "intent requeued");
            // The owner may be an intent rejected with its nonce released
            // whose bytes were in a pool after all: it executed, so it is
            // no longer REJECTED.
            if tracking::revive_released(&mut ftx, *owner, intent.nonce, receipt).await? {
                metrics::counter!(crate::metrics::RELEASED_MINED, "chain" => crate::metrics::chain_label(ctx.key.chain_id)).increment(1);
                tracing::error!(target: "txmgr::submitter", submitter = %ctx.key, tx_id = %owner,
                    nonce = intent.nonce, tx_hash = %receipt.tx_hash,
                    "a REJECTED intent was mined after all; it will end CONFIRMED or FAILED_FINAL");
            }
            continue;
        }
        let reason = format!(
            "nonce {} was consumed by a transaction that is not ours",
            intent.nonce
        );
        if settings.protect_on_external_nonce {
            let lost = SubState::NonceConsumedExternally;
            if tracking::mark_stuck(&mut ftx, intent.tx_id, lost, &reason).await? {
                metrics::counter!(crate::metrics::STUCK, "chain" => crate::metrics::chain_label(ctx.key.chain_id), "reason" => stuck_reason(lost))
                    .increment(1);
            }
            // An operator's unprotect covered every external use known when
            // it ran: a nonce below that is no new evidence.
            let covered = cursor
                .protect_covered_below
                .is_some_and(|below| intent.nonce < below);
            if protect_reason.is_none() && !covered {
                nonce_cursor::set_protect(&mut ftx, &reason).await?;
                protect_reason = Some(reason.clone());
                metrics::counter!(EXTERNAL_NONCE, "chain" => crate::metrics::chain_label(ctx.key.chain_id), "action" => "protect").increment(1);
                tracing::error!(target: "txmgr::submitter", submitter = %ctx.key, reason, "PROTECT: submitter stopped");
            }
        } else {
            tracking::requeue(&mut ftx, intent.tx_id, &reason).await?;
            ctx.index.remove_intent(intent.tx_id);
        }
        tracing::warn!(target: "txmgr::submitter", submitter = %ctx.key, tx_id = %intent.tx_id, reason, "intent lost its nonce to external use");
    }
    ftx.commit().await?;
    Ok(SweepResult {
        protect_reason,
        receipts: mined.len() + consumed_by_others.len(),
    })
}

/// Keeps only the intents whose nonce is really consumed by something other
/// than their own attempts: the chain's nonce is read again *after* the
/// receipt lookups (a reorg in between takes our transaction out of the chain
/// and the nonce back), and the observation must repeat on two consecutive
/// sweeps. Acting on a false "consumed" would requeue an intent and leave a
/// nonce gap.
async fn confirmed_consumed(
    ctx: &SubmitterContext,
    candidates: Vec<(tracking::Unmined, OwnAttemptMined)>,
) -> Result<Vec<(tracking::Unmined, OwnAttemptMined)>, LeaderError> {
    if candidates.is_empty() {
        if let Ok(mut suspects) = ctx.consumed_suspects.lock() {
            suspects.clear();
        }
        return Ok(candidates);
    }
    let latest = ctx.chain.nonces(ctx.key.address).await?.latest;
    let still: Vec<(tracking::Unmined, OwnAttemptMined)> = candidates
        .into_iter()
        .filter(|(intent, _)| intent.nonce < latest)
        .collect();
    let Ok(mut suspects) = ctx.consumed_suspects.lock() else {
        return Ok(Vec::new());
    };
    let (confirmed, first_seen): (Vec<_>, Vec<_>) = still
        .into_iter()
        .partition(|(intent, _)| suspects.contains(&intent.tx_id));
    *suspects = first_seen.iter().map(|(intent, _)| intent.tx_id).collect();
    Ok(confirmed)
}

/// Another of our intents whose attempt the chain holds at a nonce, with its
/// receipt.
type OwnAttemptMined = Option<(Uuid, MinedReceipt)>;

/// Whether the chain holds, at this intent's nonce, the bytes of another of
/// our intents' attempts: which intent, and the receipt.
async fn other_attempt_mined(
    ctx: &SubmitterContext,
    intent: &tracking::Unmined,
) -> Result<OwnAttemptMined, LeaderError> {
    for (owner, hash) in
        tracking::other_attempts_at_nonce(&ctx.pool, ctx.key, intent.nonce, intent.tx_id).await?
    {
        if let Some(receipt) = ctx.chain.receipt(hash).await? {
            if let Some(mined) = mined_receipt(&receipt) {
                return Ok(Some((owner, mined)));
            }
        }
    }
    Ok(None)
}

/// The receipt as recorded; `None` while it names no block (pending).
fn mined_receipt(receipt: &alloy::rpc::types::TransactionReceipt) -> Option<MinedReceipt> {
    Some(MinedReceipt {
        tx_hash: receipt.transaction_hash,
        block_number: receipt.block_number?,
        block_hash: receipt.block_hash?,
        receipt: serde_json::to_value(receipt).unwrap_or(serde_json::Value::Null),
    })
}
