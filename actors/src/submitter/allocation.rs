//! The two ways a leader's batch gets its nonces and attempts (README "How
//! an intent is executed"):
//!
//! - drawn from the leader's copy of the cursor and signed, then written in
//!   one fenced write with the attempts ([`allocate_presigned`], see
//!   `presign`) — the usual way;
//! - under a spend limit, allocated by the database first (which admits
//!   what fits the window), then signed and persisted in a second fenced
//!   write ([`allocate_then_sign`]).
//!
//! Either way every attempt is committed before any byte is broadcast.

use std::{
    collections::HashMap,
    time::{Duration, Instant, SystemTime},
};

use uuid::Uuid;

use super::{
    cycle::{CycleMemory, CycleOutcome},
    error::LeaderError,
    leader_lease::LeaderLease,
    next_batch::persist,
    presign::Drawn,
    signing::{sign_all, Signed},
    SubmitterContext,
};
use crate::{
    chain::FeeQuote,
    domain::Intent,
    intent_trace::TraceParent,
    store::group::{Answer, SpendBudget, Write},
};

/// How soon a leader whose intents wait for room under its spend limit
/// looks again.
const SPEND_RETRY: Duration = Duration::from_secs(1);

/// What both ways share: the intents rejected before allocation and those
/// past their deadline, and the trace contexts of the batch.
pub(super) struct Batch<'a> {
    /// Rejected before allocation (policy, failed estimate), with why.
    pub(super) rejected: &'a [(Uuid, String)],
    /// Past their deadline by this node's clock: rejected by the
    /// database's, or left for the next cycle — never drawn for here.
    pub(super) expired: &'a [Uuid],
    /// Trace contexts of the batch's sampled intents.
    pub(super) traces: &'a HashMap<Uuid, TraceParent>,
}

/// Writes a drawn and signed batch in one fenced write; returns the intents
/// allocated and their signing (whose attempts are now committed).
pub(super) async fn allocate_presigned(
    ctx: &SubmitterContext,
    lease: LeaderLease<'_>,
    memory: &mut CycleMemory,
    outcome: &mut CycleOutcome,
    drawn: Drawn,
    batch: Batch<'_>,
) -> Result<(Vec<(Uuid, u64)>, Signed), LeaderError> {
    let settings = ctx.settings();
    let Drawn {
        presigned,
        after,
        mut signed,
        left_queued,
    } = drawn;
    let drawn_count = presigned.attempts.len();
    // The signer's refusals are rejected without a nonce.
    let mut reject = batch.rejected.to_vec();
    reject.append(&mut signed.refused);
    let mut tx_ids: Vec<Uuid> = presigned.attempts.iter().map(|a| a.tx_id).collect();
    tx_ids.extend(batch.expired.iter().copied());
    let write = Write::Allocate {
        reject,
        tx_ids,
        resubmit_interval: settings.resubmit_interval,
        spend: None,
        expire_only: batch.expired.to_vec(),
        presigned: Some(Box::new(presigned)),
    };
    let allocating = SystemTime::now();
    let answer = ctx.write(lease.guard(), write).await;
    let assigned = match answer {
        Ok(Answer::Allocated(assigned)) => assigned,
        Ok(Answer::Done) => Vec::new(),
        Err(err) => {
            // Committed or not, the copy may be stale now: read it again.
            memory.cursor = None;
            return Err(err.into());
        }
    };
    record_allocations(
        ctx,
        batch.traces,
        &assigned,
        allocating,
        lease.guard().token,
    );
    if assigned.len() == drawn_count {
        memory.cursor = Some(after);
        memory.presign_conflicts = 0;
    } else {
        // The cursor moved, or an intent left QUEUED (cancelled, past its
        // deadline) or the submitter was paused: nothing of the draw was
        // written. Read the cursor and the queue again — at once the first
        // time, after a backoff if it happens again in a row.
        tracing::debug!(target: "txmgr::submitter", submitter = %ctx.key, drawn = drawn_count,
            "drawn nonces no longer held; drawing again");
        metrics::counter!(crate::metrics::PRESIGN_CONFLICTS,
            "chain" => crate::metrics::chain_label(ctx.key.chain_id))
        .increment(1);
        memory.cursor = None;
        memory.presign_conflicts += 1;
        signed.attempts.clear();
        if memory.presign_conflicts > 1 {
            outcome.more = false;
            let wait = settings.retry_backoff;
            outcome.retry_in = Some(outcome.retry_in.map_or(wait, |r| r.min(wait)));
        } else {
            outcome.more = true;
        }
    }
    // Intents after one not signed wait QUEUED: next cycle, unless the
    // signer is unavailable (then after the backoff).
    if left_queued > 0 && !signed.transient_failure && memory.presign_conflicts <= 1 {
        outcome.more = true;
    }
    Ok((assigned, signed))
}

/// A spend-limited batch: what `allocate_then_sign` needs.
pub(super) struct AllocateThenSign<'a> {
    /// Rejections, deadlines and traces.
    pub(super) batch: Batch<'a>,
    /// Intents to allocate (in acceptance order), then the expired ones.
    pub(super) ids: Vec<Uuid>,
    /// The spend limit and the batch's costs.
    pub(super) spend: Option<SpendBudget>,
    /// The intents, priced.
    pub(super) by_id: HashMap<Uuid, Intent>,
    /// Gas estimates made this cycle, kept for intents left waiting.
    pub(super) estimated: Vec<(Uuid, u64)>,
    /// When they were made.
    pub(super) estimated_at: Instant,
    /// The fee quote to sign with.
    pub(super) quote: &'a FeeQuote,
}

/// Allocates in the database (admitting what fits the spend window), then
/// signs and persists in a second fenced write.
pub(super) async fn allocate_then_sign(
    ctx: &SubmitterContext,
    lease: LeaderLease<'_>,
    memory: &mut CycleMemory,
    outcome: &mut CycleOutcome,
    batch: AllocateThenSign<'_>,
) -> Result<(Vec<(Uuid, u64)>, Signed), LeaderError> {
    let settings = ctx.settings();
    let AllocateThenSign {
        batch: Batch {
            rejected,
            expired,
            traces,
        },
        ids,
        spend,
        mut by_id,
        estimated,
        estimated_at,
        quote,
    } = batch;
    // This way moves the cursor in the database: the leader's copy is stale.
    memory.cursor = None;
    let limited = spend.is_some();
    let asked = ids.len();
    let allocate = Write::Allocate {
        reject: rejected.to_vec(),
        tx_ids: ids,
        resubmit_interval: settings.resubmit_interval,
        spend,
        expire_only: expired.to_vec(),
        presigned: None,
    };
    let allocating = SystemTime::now();
    let assigned = match ctx.write(lease.guard(), allocate).await? {
        Answer::Allocated(assigned) => assigned,
        Answer::Done => Vec::new(),
    };
    record_allocations(ctx, traces, &assigned, allocating, lease.guard().token);
    if limited && assigned.len() + expired.len() < asked {
        // Some wait for room in the spend window (or were taken meanwhile):
        // their estimates are kept for the next look.
        outcome.more = false;
        outcome.retry_in = Some(outcome.retry_in.map_or(SPEND_RETRY, |r| r.min(SPEND_RETRY)));
        let given: std::collections::HashSet<Uuid> = assigned.iter().map(|(id, _)| *id).collect();
        for (id, gas) in estimated.into_iter().filter(|(id, _)| !given.contains(id)) {
            memory.estimates.entry(id).or_insert((gas, estimated_at));
        }
    }
    // Until the attempts are persisted, the next cycle looks for unsigned
    // intents (this one may stop early on an error).
    let recover_before = memory.recover_unsigned;
    memory.recover_unsigned = true;
    let prepared: Vec<(Uuid, u64, Intent)> = assigned
        .iter()
        .filter_map(|(id, nonce)| Some((*id, *nonce, by_id.remove(id)?)))
        .collect();
    let signed = sign_all(ctx, &prepared, quote).await;
    lease.renew_if_due().await?;
    persist(ctx, lease, &signed).await?;
    memory.recover_unsigned = recover_before || signed.transient_failure;
    // A signer's refusal released a nonce, maybe below others just drawn.
    memory.check_gaps |= !signed.refused.is_empty();
    Ok((assigned, signed))
}

/// One `txmgr.allocate` span per traced intent that drew a nonce: the
/// fenced group commit it rode in, from hand-over to answer.
fn record_allocations(
    ctx: &SubmitterContext,
    traces: &HashMap<Uuid, TraceParent>,
    assigned: &[(Uuid, u64)],
    started: SystemTime,
    fencing_token: i64,
) {
    if traces.is_empty() {
        return;
    }
    let ended = SystemTime::now();
    for (tx_id, nonce) in assigned {
        if let Some(parent) = traces.get(tx_id) {
            crate::intent_trace::record(
                "txmgr.allocate",
                parent,
                started,
                ended,
                vec![
                    opentelemetry::KeyValue::new("txmgr.submitter", ctx.key.address_hex()),
                    opentelemetry::KeyValue::new("txmgr.chain_id", ctx.key.chain_id.get() as i64),
                    opentelemetry::KeyValue::new("txmgr.nonce", *nonce as i64),
                    opentelemetry::KeyValue::new("txmgr.fencing_token", fencing_token),
                ],
                None,
            );
        }
    }
}
