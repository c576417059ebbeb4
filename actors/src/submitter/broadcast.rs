//! Broadcasting attempts in nonce order and recording the judged answers
//! through the group committer (README "How an intent is executed").

use std::time::{Duration, Instant};

use super::{
    cycle::{CycleMemory, CycleOutcome},
    error::LeaderError,
    leader_lease::LeaderLease,
    verdict::{judge, Verdict},
    SubmitterContext,
};
use crate::{
    chain::{classify_send, BroadcastClass},
    domain::TxState,
    store::{
        group::{BroadcastRecord, Write},
        pipeline::{NewAttempt, PendingAttempt, RetryLater},
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
            private: a.private,
        })
        .collect()
}

/// What a broadcast found that the cycle must act on.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BroadcastReport {
    /// Some attempt waits for a retry after this delay.
    pub(crate) retry_in: Option<Duration>,
    /// A node said a nonce is consumed: the sweep must look now.
    pub(crate) sweep_now: bool,
    /// A nonce was released, maybe below allocated ones: look for gaps.
    pub(crate) released_nonce: bool,
}

impl BroadcastReport {
    /// Folds the report into the cycle's outcome and memory.
    pub(crate) fn apply(self, outcome: &mut CycleOutcome, memory: &mut CycleMemory) {
        outcome.sweep_now |= self.sweep_now;
        memory.check_gaps |= self.released_nonce;
        if self.released_nonce {
            // The cursor row took the nonce back: the leader's copy is stale.
            memory.cursor = None;
        }
        if let Some(wait) = self.retry_in {
            outcome.retry_in = Some(outcome.retry_in.map_or(wait, |r| r.min(wait)));
            let at = Instant::now() + wait;
            memory.allocated_due_at = Some(memory.allocated_due_at.map_or(at, |m| m.min(at)));
        }
    }
}

/// A batch sent and its answers judged, not yet recorded. Everything the
/// cycle decides on (a retry, a refusal, a consumed nonce) is known here;
/// recording it is a write only this batch's intents depend on, so the
/// cycle records it while the next batch is sent (README "How an intent is
/// executed").
#[derive(Debug)]
pub(crate) struct Judged {
    record: BroadcastRecord,
    sweep_now: bool,
}

impl Judged {
    /// No retry, no refusal, no consumed nonce: the cycle may keep going.
    pub(crate) fn clean(&self) -> bool {
        !self.sweep_now && self.record.retries.is_empty() && self.record.rejects.is_empty()
    }

    /// Records the answers in one fenced write through the group committer;
    /// returns what the cycle must act on.
    pub(crate) async fn record(
        self,
        ctx: &SubmitterContext,
        lease: LeaderLease<'_>,
    ) -> Result<BroadcastReport, LeaderError> {
        let settings = ctx.settings();
        let Judged { record, sweep_now } = self;
        let mut report = BroadcastReport {
            sweep_now,
            ..BroadcastReport::default()
        };
        // The record's accepted and retried answers commit without waiting
        // for the WAL flush (the committer decides): losing them in a crash
        // is harmless, recovery re-sends the identical persisted bytes and
        // the node answers "already known".
        let retried = !record.retries.is_empty();
        let accepted: Vec<_> = record.accepted.iter().map(|(id, _, _)| *id).collect();
        let rejected = record.rejects.clone();
        ctx.write(lease.guard(), Write::RecordBroadcast(record))
            .await?;
        if retried {
            report.retry_in = Some(settings.retry_backoff);
        }
        report.released_nonce = !rejected.is_empty();
        ctx.timers.schedule(
            ctx.key.address,
            accepted
                .iter()
                .map(|id| (*id, settings.resubmit_interval))
                .collect(),
        );
        for (tx_id, reason) in &rejected {
            tracing::warn!(target: "txmgr::submitter", submitter = %ctx.key, %tx_id, reason, "broadcast refused definitively; nonce released");
        }
        Ok(report)
    }
}

/// Records `judged` when there is one.
pub(crate) async fn record_judged(
    ctx: &SubmitterContext,
    lease: LeaderLease<'_>,
    judged: Option<Judged>,
) -> Result<BroadcastReport, LeaderError> {
    match judged {
        Some(judged) => judged.record(ctx, lease).await,
        None => Ok(BroadcastReport::default()),
    }
}

/// Sends `attempts` in nonce order, judges every answer and records them
/// through the group committer; returns what the cycle must act on.
pub(crate) async fn broadcast(
    ctx: &SubmitterContext,
    lease: LeaderLease<'_>,
    attempts: Vec<PendingAttempt>,
) -> Result<BroadcastReport, LeaderError> {
    let judged = send_and_judge(ctx, lease, attempts).await?;
    record_judged(ctx, lease, judged).await
}

/// Sends `attempts` in nonce order and judges every answer; `None` when
/// there was nothing to send.
pub(crate) async fn send_and_judge(
    ctx: &SubmitterContext,
    lease: LeaderLease<'_>,
    attempts: Vec<PendingAttempt>,
) -> Result<Option<Judged>, LeaderError> {
    let mut sweep_now = false;
    if attempts.is_empty() {
        return Ok(None);
    }
    // Never let bytes out on a lease this node may already have lost.
    lease.check_valid()?;
    let settings = ctx.settings();
    let mut attempts = attempts;
    attempts.sort_by_key(|a| a.nonce);
    let ids: Vec<uuid::Uuid> = attempts.iter().map(|a| a.tx_id).collect();
    let traces = crate::store::trace_context::parents(&ctx.pool, &ids).await;
    let private = settings.private_sends || attempts.iter().any(|a| a.private);
    let mut batched = None;
    if attempts.len() > 1 && !private && ctx.chain.sends_in_batches() {
        // One JSON-RPC batch, its calls in nonce order: one lease check
        // covers it (one request's timeout bounds it). Each traced intent's
        // call answered by an endpoint is a span of its own, as a single
        // send's; a batch the endpoint refused goes one by one below.
        lease.check_may_send().await?;
        let raws: Vec<_> = attempts.iter().map(|a| a.raw.clone()).collect();
        let parents = attempts
            .iter()
            .map(|a| traces.get(&a.tx_id).copied())
            .collect();
        batched =
            crate::intent_trace::broadcasting_batch(parents, ctx.chain.send_raw_batch(&raws)).await;
    }
    let results = match batched {
        Some(results) if results.len() == attempts.len() => results,
        _ => send_one_by_one(ctx, lease, &attempts, &traces).await?,
    };
    let mut record = BroadcastRecord {
        resubmit_interval: settings.resubmit_interval,
        retry_after: settings.retry_backoff,
        ..BroadcastRecord::default()
    };
    for (attempt, result) in attempts.iter().zip(results) {
        let class = classify_send(&result);
        metrics::counter!(crate::metrics::BROADCASTS, "chain" => crate::metrics::chain_label(ctx.key.chain_id), "result" => class.label()).increment(1);
        if matches!(class, BroadcastClass::InsufficientFunds) {
            tracing::warn!(target: "txmgr::submitter", submitter = %ctx.key, tx_id = %attempt.tx_id, "insufficient funds");
            // The sweep reads the balance: a LOW_BALANCE (and top-up) now,
            // not at the next sweep interval.
            sweep_now = true;
        }
        let error = result.err().map(|e| e.to_string()).unwrap_or_default();
        match judge(attempt, &class, error, settings.reject_after) {
            Verdict::Accepted(label) => {
                record
                    .accepted
                    .push((attempt.tx_id, attempt.tx_hash, label))
            }
            Verdict::Retry {
                error,
                unknown,
                nonce_too_low,
            } => {
                sweep_now |= nonce_too_low;
                record.retries.push(RetryLater {
                    tx_id: attempt.tx_id,
                    tx_hash: attempt.tx_hash,
                    error,
                    unknown,
                });
            }
            Verdict::Reject(reason) => record.rejects.push((attempt.tx_id, reason)),
        }
    }
    Ok(Some(Judged { record, sweep_now }))
}

/// Sends `attempts` one request at a time, in nonce order: nodes that
/// forbid nonce gaps refuse a later nonce that arrives first, and anvil's
/// pool can strand concurrently arriving out-of-order nonces in its queue
/// for good.
async fn send_one_by_one(
    ctx: &SubmitterContext,
    lease: LeaderLease<'_>,
    attempts: &[PendingAttempt],
    traces: &std::collections::HashMap<uuid::Uuid, crate::intent_trace::TraceParent>,
) -> Result<Vec<Result<alloy::primitives::B256, crate::chain::ChainError>>, LeaderError> {
    let settings = ctx.settings();
    let mut results = Vec::with_capacity(attempts.len());
    for attempt in attempts {
        // Long batches: keep the lease renewed, and never send on a lapsed one.
        lease.check_may_send().await?;
        // A private intent (or submitter) goes to the send-only endpoints
        // alone; their refusal is an unknown answer, never a public send.
        // Each endpoint's answer becomes a span of the intent's trace.
        let sent = crate::intent_trace::broadcasting(traces.get(&attempt.tx_id).copied(), async {
            if settings.private_sends || attempt.private {
                ctx.chain.send_raw_private(&attempt.raw).await
            } else {
                ctx.chain.send_raw(&attempt.raw).await
            }
        })
        .await;
        results.push(sent);
    }
    Ok(results)
}
