//! Broadcasting attempts and recording the classified answers in one fenced
//! commit (DESIGN.md section 8).

use std::time::{Duration, Instant};

use super::{
    cycle::{CycleError, CycleMemory, CycleOutcome},
    lease_keep::renew_if_due,
    SubmitterContext,
};
use crate::{
    chain::{classify_rpc_error, BroadcastClass, ChainError},
    domain::TxState,
    store::{
        pipeline::{self, NewAttempt, PendingAttempt, RetryLater},
        FencedTx, LeaseGuard,
    },
};

/// Newly persisted attempts, in the shape the broadcaster takes.
pub(crate) fn new_attempts_as_pending(attempts: &[NewAttempt]) -> Vec<PendingAttempt> {
    attempts
        .iter()
        .map(|a| PendingAttempt {
            tx_id: a.tx_id,
            nonce: a.nonce,
            state: TxState::Allocated,
            tx_hash: a.tx_hash,
            raw: a.raw.clone(),
            age: Duration::ZERO,
            maybe_pooled: false,
        })
        .collect()
}

pub(crate) async fn broadcast(
    ctx: &SubmitterContext,
    lease: &mut LeaseGuard,
    attempts: Vec<PendingAttempt>,
    outcome: &mut CycleOutcome,
    memory: &mut CycleMemory,
) -> Result<(), CycleError> {
    if attempts.is_empty() {
        return Ok(());
    }
    // Never let bytes out on a lease this node may already have lost.
    if !lease.is_locally_valid() {
        return Err(CycleError::LeaseExpired);
    }
    let settings = ctx.settings();
    let mut attempts = attempts;
    attempts.sort_by_key(|a| a.nonce);
    // In nonce order, one at a time: nodes that forbid nonce gaps refuse a
    // later nonce that arrives first, and anvil's pool can strand
    // concurrently arriving out-of-order nonces in its queue for good.
    let mut results = Vec::with_capacity(attempts.len());
    for attempt in &attempts {
        // Long batches: keep the lease renewed, and never send on a lapsed one.
        renew_if_due(ctx, lease).await?;
        if !lease.is_locally_valid() {
            return Err(CycleError::LeaseExpired);
        }
        results.push(ctx.chain.send_raw(&attempt.raw).await);
    }
    let mut accepted = Vec::new();
    let mut retries = Vec::new();
    let mut rejects = Vec::new();
    for (attempt, result) in attempts.iter().zip(results) {
        let class = match &result {
            Ok(_) => BroadcastClass::Accepted,
            Err(ChainError::Rpc { code, message }) => classify_rpc_error(Some(*code), message),
            Err(ChainError::Transport(_)) => BroadcastClass::Transient,
        };
        metrics::counter!(crate::metrics::BROADCASTS, "result" => class.label()).increment(1);
        let error = result
            .as_ref()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        let never_accepted = attempt.state == TxState::Allocated;
        // A nonce is released only when no send of it could have reached a
        // pool: an unknown answer, now or earlier, keeps it.
        let releasable = never_accepted && !attempt.maybe_pooled;
        let unknown = matches!(class, BroadcastClass::Transient);
        let retry = |error: String| RetryLater {
            tx_id: attempt.tx_id,
            tx_hash: attempt.tx_hash,
            error,
            unknown,
        };
        match class {
            c if c.counts_as_accepted() => {
                accepted.push((attempt.tx_id, attempt.tx_hash, c.label()))
            }
            BroadcastClass::NonceTooLow => {
                outcome.sweep_now = true;
                retries.push(retry(error));
            }
            c if c.is_definitive_refusal() && releasable => rejects.push((attempt.tx_id, error)),
            BroadcastClass::InsufficientFunds
                if releasable && attempt.age >= settings.reject_after =>
            {
                rejects.push((
                    attempt.tx_id,
                    format!("never accepted within reject_after: {error}"),
                ))
            }
            c => {
                if matches!(c, BroadcastClass::InsufficientFunds) {
                    tracing::warn!(target: "txmgr::submitter", submitter = %ctx.key, tx_id = %attempt.tx_id, "insufficient funds; will retry");
                }
                if c.is_definitive_refusal() && never_accepted {
                    // Refused now, but an earlier send's answer was unknown:
                    // the bytes may still be mined, so the nonce is kept and
                    // the intent escalates (bump, STUCK) like any other.
                    tracing::warn!(target: "txmgr::submitter", submitter = %ctx.key, tx_id = %attempt.tx_id,
                        error, "refused, but an earlier send may have reached a pool; nonce kept");
                    retries.push(retry(format!(
                        "{error} (nonce kept: an earlier send's answer was unknown)"
                    )));
                } else {
                    retries.push(retry(error));
                }
            }
        }
    }
    let mut ftx = FencedTx::begin(&ctx.pool, lease, "record_broadcast").await?;
    // Losing this record in a crash is harmless: recovery re-sends the
    // identical (already persisted) bytes and the node answers "already
    // known". So this commit need not wait for the WAL flush.
    ftx.relax_durability().await?;
    if !accepted.is_empty() {
        pipeline::record_accepted(&mut ftx, &accepted, settings.resubmit_interval).await?;
    }
    if !retries.is_empty() {
        pipeline::record_retry(&mut ftx, &retries, settings.retry_backoff).await?;
        outcome.retry_in = Some(settings.retry_backoff);
        memory.allocated_due_at = Some(Instant::now() + settings.retry_backoff);
    }
    for (tx_id, reason) in &rejects {
        pipeline::reject(&mut ftx, *tx_id, reason).await?;
    }
    ftx.commit().await?;
    if !rejects.is_empty() {
        // A released nonce may sit below allocated ones.
        memory.check_gaps = true;
    }
    ctx.timers.schedule(
        ctx.key.address,
        accepted
            .iter()
            .map(|(id, _, _)| (*id, settings.resubmit_interval))
            .collect(),
    );
    for (tx_id, reason) in &rejects {
        tracing::warn!(target: "txmgr::submitter", submitter = %ctx.key, %tx_id, reason, "broadcast refused definitively; nonce released");
    }
    Ok(())
}
