//! The leader's work cycle (README "How an intent is executed"), built for few round
//! trips per batch:
//!
//! 1. recovery, only when there can be something to recover: ALLOCATED
//!    intents without an attempt (re-sign, same nonce) and due re-broadcasts;
//! 2. one read: the next QUEUED intents that fit the free in-flight slots;
//! 3. prepare (gas estimate) before any nonce is used;
//! 4. draw nonces from the leader's copy of the cursor, sign outside any
//!    transaction, and one fenced write allocates and persists every
//!    attempt — committed before any byte is broadcast (`presign`; under a
//!    spend limit the database allocates first and a second write persists,
//!    `allocation`);
//! 5. broadcast in nonce order — the whole batch in one JSON-RPC batch
//!    request where the chain's endpoints allow it (`chain.batch_sends`),
//!    else one request at a time — then one fenced write records the
//!    results. While a full batch is sent, steps 2–4 run for the next one
//!    (up to [`PIPELINED_BATCHES`] per cycle) and the previous batch's
//!    results are recorded; the next batch's sends start once this batch's
//!    sends are answered, so sends stay in nonce order.
//!
//! The fenced writes go through the node's group committer
//! (`store::group`), merged with other leaders' writes into one transaction.

use std::time::{Duration, Instant};

use futures::future::join_all;
use uuid::Uuid;

use super::{
    allocation::{allocate_presigned, allocate_then_sign, AllocateThenSign, Batch},
    broadcast::{broadcast, new_attempts_as_pending, record_judged, send_and_judge, Judged},
    error::LeaderError,
    fees,
    leader_lease::LeaderLease,
    presign,
    signing::{sign_all, Signed},
    SubmitterContext,
};
use crate::{
    domain::Intent,
    store::{
        filler,
        group::Write,
        nonce_cursor::NonceCursor,
        pipeline::{self, PendingAttempt},
        queue_read::QueueRequest,
        FencedTx,
    },
};

/// What the actor should do after a cycle.
#[derive(Debug, Default, Clone)]
pub(crate) struct CycleOutcome {
    /// More QUEUED work may be waiting: run again right away.
    pub(crate) more: bool,
    /// Something waits for a retry (backoff): run again after this.
    pub(crate) retry_in: Option<Duration>,
    /// A nonce was reported consumed: check the chain now.
    pub(crate) sweep_now: bool,
    /// The signer was unavailable: intents wait unsigned (shown in the ops view).
    pub(crate) signer_unavailable: Option<String>,
}

/// What the leader remembers between cycles, so it skips reads that cannot
/// find anything. Reset to "look everywhere" whenever the lease is acquired.
#[derive(Debug, Clone)]
pub(crate) struct CycleMemory {
    /// Gas estimates of intents estimated but not given a nonce (waiting
    /// for room under a spend limit), with when: reused for
    /// [`ESTIMATE_REUSE`], so a leader retrying every second does not
    /// estimate its whole waiting batch again each time.
    pub(crate) estimates: std::collections::HashMap<Uuid, (u64, Instant)>,
    /// Look for ALLOCATED intents without an attempt.
    pub(crate) recover_unsigned: bool,
    /// Earliest time an ALLOCATED attempt may be due for re-broadcast.
    pub(crate) allocated_due_at: Option<Instant>,
    /// A nonce may have been released below allocated ones: look for gaps
    /// a filler must take, once the queue has nothing to take them.
    pub(crate) check_gaps: bool,
    /// The leader's copy of its nonce cursor (`presign`); `None`: read it
    /// before the next draw.
    pub(crate) cursor: Option<NonceCursor>,
    /// Draws in a row that no longer held at their write.
    pub(crate) presign_conflicts: u32,
}

impl CycleOutcome {
    /// Folds in the outcome of a later batch of the same cycle: its `more`
    /// stands, retries keep the earliest, flags accumulate.
    fn merge(&mut self, later: CycleOutcome) {
        self.more = later.more;
        self.retry_in = match (self.retry_in, later.retry_in) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.sweep_now |= later.sweep_now;
        if later.signer_unavailable.is_some() {
            self.signer_unavailable = later.signer_unavailable;
        }
    }
}

impl CycleMemory {
    /// After acquiring the lease: anything may be pending.
    pub(crate) fn fresh() -> Self {
        Self {
            estimates: std::collections::HashMap::new(),
            recover_unsigned: true,
            allocated_due_at: Some(Instant::now()),
            check_gaps: true,
            cursor: None,
            presign_conflicts: 0,
        }
    }
}

/// How long a waiting intent's gas estimate is reused.
const ESTIMATE_REUSE: Duration = Duration::from_secs(60);

/// Runs one cycle as leader.
pub(crate) async fn run(
    ctx: &SubmitterContext,
    lease: LeaderLease<'_>,
    protected: bool,
    memory: &mut CycleMemory,
) -> Result<CycleOutcome, LeaderError> {
    lease.check_valid()?;
    let settings = ctx.settings();
    let batch = settings.batch_size.max(1) as usize;
    let mut outcome = CycleOutcome::default();

    if memory.recover_unsigned {
        let unsigned = pipeline::load_allocated_unsigned(&ctx.pool, ctx.key).await?;
        if !unsigned.is_empty() {
            let quote = ctx.chain.fees().await?;
            let signed = sign_all(ctx, &unsigned, &quote).await;
            lease.renew_if_due().await?;
            persist(ctx, lease, &signed).await?;
            signed.track(ctx);
            memory.check_gaps |= !signed.refused.is_empty();
            if !signed.refused.is_empty() {
                // Their nonces went back to the cursor row.
                memory.cursor = None;
            }
            memory.allocated_due_at = Some(Instant::now());
            // Cleared only once persisted: an error above leaves it set.
            memory.recover_unsigned = signed.transient_failure;
            outcome.signer_unavailable = signed.signer_unavailable.clone();
        } else {
            memory.recover_unsigned = false;
        }
    }
    if memory
        .allocated_due_at
        .is_some_and(|due| due <= Instant::now())
    {
        memory.allocated_due_at = None;
        let due = pipeline::load_due_allocated(&ctx.pool, ctx.key, batch).await?;
        let full = due.len() == batch;
        if !due.is_empty() {
            broadcast(ctx, lease, due)
                .await?
                .apply(&mut outcome, memory);
        }
        // Remember the next ALLOCATED retry that was not due yet (or that
        // did not fit the batch), whatever this batch's answers were.
        let next = if full {
            Some(Duration::ZERO)
        } else {
            pipeline::next_allocated_retry(&ctx.pool, ctx.key).await?
        };
        if let Some(wait) = next {
            let at = Instant::now() + wait;
            memory.allocated_due_at = Some(memory.allocated_due_at.map_or(at, |m| m.min(at)));
            outcome.retry_in = Some(outcome.retry_in.map_or(wait, |r| r.min(wait)));
        }
    }
    if protected {
        return Ok(outcome);
    }

    // Batch k is sent while batch k+1 is read, priced, signed and written
    // and batch k-1's answers are recorded; k+1's sends start only once
    // k's are done, so a submitter's sends stay in nonce order.
    let mut sending = next_batch(ctx, lease, memory, &mut outcome).await?;
    let mut batches = 1;
    let mut smooth = true;
    let mut unrecorded: Option<Judged> = None;
    while let Some(attempts) = sending.take() {
        let prepare_next = outcome.more && batches < PIPELINED_BATCHES && smooth;
        batches += 1;
        let mut later = CycleOutcome::default();
        let (sent, recorded, next) = tokio::join!(
            send_and_judge(ctx, lease, attempts),
            record_judged(ctx, lease, unrecorded.take()),
            async {
                if prepare_next {
                    next_batch(ctx, lease, memory, &mut later).await
                } else {
                    Ok(None)
                }
            }
        );
        if sent.is_err() || recorded.is_err() || next.is_err() {
            // Attempts durable but not sent, or sent and not recorded, if
            // this cycle stops here: the next one looks for due ALLOCATED
            // attempts first (a re-send of identical bytes is answered
            // "already known").
            memory.allocated_due_at = Some(Instant::now());
        }
        recorded?.apply(&mut outcome, memory);
        let sent = sent?;
        let next = match next {
            Ok(next) => next,
            Err(err) => {
                // What was sent is recorded before the error is returned.
                record_judged(ctx, lease, sent)
                    .await?
                    .apply(&mut outcome, memory);
                return Err(err);
            }
        };
        // A send that must be retried, a nonce released or consumed, a
        // signer that failed: the batch already written is sent, then the
        // cycle returns as a sequential one would (the mailbox, the sweep
        // and the backoff get their turn) instead of preparing more.
        smooth = sent.as_ref().is_none_or(Judged::clean)
            && later.retry_in.is_none()
            && later.signer_unavailable.is_none();
        if prepare_next {
            // `later` says whether more is queued; when no next batch was
            // prepared it says nothing (and must not clear `more`).
            outcome.merge(later);
        }
        unrecorded = sent;
        sending = next;
    }
    record_judged(ctx, lease, unrecorded)
        .await?
        .apply(&mut outcome, memory);
    Ok(outcome)
}

/// Batches one cycle writes before it returns to the actor's mailbox (the
/// last one's sends are not overlapped).
const PIPELINED_BATCHES: usize = 4;

/// Reads the next QUEUED intents, prices, draws, signs and writes them
/// (one fenced write, committed before anything is sent); returns the
/// attempts to broadcast, `None` when nothing was queued.
async fn next_batch(
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
