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

use uuid::Uuid;

use super::{
    broadcast::{broadcast, record_judged, send_and_judge, Judged},
    error::LeaderError,
    leader_lease::LeaderLease,
    next_batch::{next_batch, persist},
    signing::sign_all,
    SubmitterContext,
};
use crate::store::{nonce_cursor::NonceCursor, pipeline};

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
pub(super) const ESTIMATE_REUSE: Duration = Duration::from_secs(60);

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
