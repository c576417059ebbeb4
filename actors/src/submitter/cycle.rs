//! The leader's work cycle: recover, re-broadcast due attempts, then take the
//! next batch through prepare → allocate → sign → persist → broadcast →
//! record, each write one fenced group commit (DESIGN.md sections 2, 7, 8).

use std::time::Duration;

use futures::future::join_all;
use uuid::Uuid;

use super::{fees, SubmitterContext};
use crate::{
    chain::{classify_rpc_error, BroadcastClass, ChainError},
    domain::{AttemptKind, Intent},
    signer::SignerError,
    store::{
        nonce_cursor,
        pipeline::{self, NewAttempt, PendingAttempt},
        FencedTx, LeaseGuard, StoreError,
    },
};

/// Why a cycle stopped early.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CycleError {
    /// Database failure, or `Fenced` (the lease is gone: stop).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The chain node could not be asked.
    #[error("chain: {0}")]
    Chain(#[from] ChainError),
    /// The signer could not sign.
    #[error("signer: {0}")]
    Signer(#[from] SignerError),
    /// The local lease deadline passed: renew before acting.
    #[error("lease deadline passed; renew first")]
    LeaseExpired,
}

impl CycleError {
    /// The lease is lost: the actor must stop.
    pub(crate) fn is_fenced(&self) -> bool {
        matches!(self, CycleError::Store(e) if e.is_fenced())
    }
}

/// What the actor should do after a cycle.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct CycleOutcome {
    /// More QUEUED work may be waiting: run again right away.
    pub more: bool,
    /// Something waits for a retry (backoff): run again after this.
    pub retry_in: Option<Duration>,
    /// A nonce was reported consumed: check the chain now.
    pub sweep_now: bool,
}

/// Runs one cycle as leader.
pub(crate) async fn run(
    ctx: &SubmitterContext,
    lease: &LeaseGuard,
    protected: bool,
) -> Result<CycleOutcome, CycleError> {
    if !lease.is_locally_valid() {
        return Err(CycleError::LeaseExpired);
    }
    let settings = ctx.settings();
    let batch = settings.batch_size.max(1) as usize;
    let mut outcome = CycleOutcome::default();

    // Crash recovery: allocated but never signed → sign again, same nonce.
    let unsigned = pipeline::load_allocated_unsigned(&ctx.pool, ctx.key).await?;
    if !unsigned.is_empty() {
        let prepared: Vec<(Uuid, u64, Intent)> = unsigned;
        sign_and_persist(ctx, lease, &prepared, &mut outcome).await?;
    }

    // Re-broadcast ALLOCATED attempts that are due (retries, recovery).
    let due = pipeline::load_due_allocated(&ctx.pool, ctx.key, batch).await?;
    if !due.is_empty() {
        broadcast(ctx, lease, due, &mut outcome).await?;
    }
    if protected {
        return Ok(outcome);
    }

    let in_flight =
        pipeline::in_flight_count(&ctx.pool, ctx.key, settings.hold_slot_until_final).await?;
    let free = u64::from(settings.max_in_flight).saturating_sub(in_flight);
    let take = batch.min(usize::try_from(free).unwrap_or(usize::MAX));
    if take == 0 {
        return Ok(outcome);
    }
    let queued = pipeline::load_queued(&ctx.pool, ctx.key, take).await?;
    if queued.is_empty() {
        return Ok(outcome);
    }
    outcome.more = queued.len() == take;

    // Prepare before allocate: a failure here consumes no nonce.
    let estimates = join_all(queued.iter().map(|q| async {
        match q.intent.gas_limit {
            Some(limit) => Ok(limit),
            None => ctx.chain.estimate_gas(ctx.key.address, &q.intent).await,
        }
    }))
    .await;
    let mut rejected: Vec<(Uuid, String)> = Vec::new();
    let mut ready: Vec<(Uuid, Intent, u64)> = Vec::new();
    for (queued, estimate) in queued.into_iter().zip(estimates) {
        match estimate {
            Ok(estimate) => {
                let gas =
                    fees::gas_limit(&queued.intent, Some(estimate), settings.gas_limit_margin);
                ready.push((queued.tx_id, queued.intent, gas));
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

    let mut ftx = FencedTx::begin(&ctx.pool, lease, "allocate").await?;
    for (tx_id, reason) in &rejected {
        pipeline::reject(&mut ftx, *tx_id, reason).await?;
    }
    let nonces = nonce_cursor::allocate(&mut ftx, ready.len()).await?;
    let assignments: Vec<(Uuid, u64)> = ready
        .iter()
        .zip(&nonces)
        .map(|((id, _, _), n)| (*id, *n))
        .collect();
    pipeline::assign_nonces(&mut ftx, &assignments).await?;
    ftx.commit().await?;
    for (tx_id, reason) in &rejected {
        tracing::info!(target: "txmgr::submitter", submitter = %ctx.key, %tx_id, reason, "intent rejected before allocation");
    }

    let prepared: Vec<(Uuid, u64, Intent)> = ready
        .into_iter()
        .zip(nonces)
        .map(|((id, mut intent, gas), nonce)| {
            intent.gas_limit = Some(gas);
            (id, nonce, intent)
        })
        .collect();
    sign_and_persist(ctx, lease, &prepared, &mut outcome).await?;
    let due = pipeline::load_due_allocated(&ctx.pool, ctx.key, batch).await?;
    broadcast(ctx, lease, due, &mut outcome).await?;
    Ok(outcome)
}

/// Signs allocated intents and persists every attempt in one fenced commit
/// before any of them may be broadcast.
async fn sign_and_persist(
    ctx: &SubmitterContext,
    lease: &LeaseGuard,
    prepared: &[(Uuid, u64, Intent)],
    outcome: &mut CycleOutcome,
) -> Result<(), CycleError> {
    if prepared.is_empty() {
        return Ok(());
    }
    let settings = ctx.settings();
    let quote = ctx.chain.fees().await?;
    let signed = join_all(prepared.iter().map(|(tx_id, nonce, intent)| {
        let fees = fees::price(intent, &quote, &settings);
        let settings = &settings;
        async move {
            // Recovered intents lost their estimate with the crash: estimate again.
            let estimate = match intent.gas_limit {
                Some(_) => None,
                None => Some(ctx.chain.estimate_gas(ctx.key.address, intent).await?),
            };
            let gas = fees::gas_limit(intent, estimate, settings.gas_limit_margin);
            let unsigned = fees::build(intent, ctx.key.chain_id, *nonce, gas, fees);
            let result = ctx.signer.sign(unsigned).await;
            Ok::<_, ChainError>((*tx_id, *nonce, gas, fees, result))
        }
    }))
    .await;
    let mut attempts = Vec::new();
    let mut refused = Vec::new();
    for signed in signed {
        let (tx_id, nonce, gas_limit, fee, result) = match signed {
            Ok(signed) => signed,
            Err(err) => {
                tracing::warn!(target: "txmgr::submitter", submitter = %ctx.key, error = %err, "re-estimating gas failed");
                outcome.retry_in = Some(settings.retry_backoff);
                continue;
            }
        };
        match result {
            Ok(raw) => {
                let (max_fee_per_gas, max_priority_fee_per_gas, gas_price) = match fee {
                    fees::Fees::Eip1559 { max_fee, priority } => {
                        (Some(max_fee), Some(priority), None)
                    }
                    fees::Fees::Legacy { gas_price } => (None, None, Some(gas_price)),
                };
                attempts.push(NewAttempt {
                    tx_id,
                    nonce,
                    tx_hash: raw.hash,
                    raw: raw.raw,
                    max_fee_per_gas,
                    max_priority_fee_per_gas,
                    gas_price,
                    gas_limit,
                    kind: AttemptKind::Original,
                });
            }
            // Left ALLOCATED without an attempt: the next cycle signs again.
            Err(err) if err.is_transient() => {
                tracing::warn!(target: "txmgr::submitter", submitter = %ctx.key, %tx_id, error = %err, "signer unavailable");
                outcome.retry_in = Some(settings.retry_backoff);
            }
            Err(err) => refused.push((tx_id, format!("signer refused: {err}"))),
        }
    }
    let mut ftx = FencedTx::begin(&ctx.pool, lease, "persist_attempts").await?;
    if !attempts.is_empty() {
        pipeline::insert_attempts(&mut ftx, &attempts).await?;
    }
    for (tx_id, reason) in &refused {
        pipeline::reject(&mut ftx, *tx_id, reason).await?;
    }
    ftx.commit().await?;
    Ok(())
}

/// Broadcasts attempts concurrently and records every result in one fenced
/// commit.
async fn broadcast(
    ctx: &SubmitterContext,
    lease: &LeaseGuard,
    attempts: Vec<PendingAttempt>,
    outcome: &mut CycleOutcome,
) -> Result<(), CycleError> {
    if attempts.is_empty() {
        return Ok(());
    }
    // Never let bytes out on a lease this node may already have lost.
    if !lease.is_locally_valid() {
        return Err(CycleError::LeaseExpired);
    }
    let settings = ctx.settings();
    let results = join_all(attempts.iter().map(|a| ctx.chain.send_raw(&a.raw))).await;
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
        let never_accepted = attempt.state == crate::domain::TxState::Allocated;
        match class {
            c if c.counts_as_accepted() => {
                accepted.push((attempt.tx_id, attempt.tx_hash, c.label()))
            }
            BroadcastClass::NonceTooLow => {
                outcome.sweep_now = true;
                retries.push((attempt.tx_id, attempt.tx_hash, error));
            }
            c if c.is_definitive_refusal() && never_accepted => {
                rejects.push((attempt.tx_id, error))
            }
            BroadcastClass::InsufficientFunds
                if never_accepted && attempt.age >= settings.reject_after =>
            {
                rejects.push((
                    attempt.tx_id,
                    format!("never accepted within reject_after: {error}"),
                ))
            }
            _ => {
                if matches!(class, BroadcastClass::InsufficientFunds) {
                    tracing::warn!(target: "txmgr::submitter", submitter = %ctx.key, tx_id = %attempt.tx_id, "insufficient funds; will retry");
                }
                retries.push((attempt.tx_id, attempt.tx_hash, error))
            }
        }
    }
    let mut ftx = FencedTx::begin(&ctx.pool, lease, "record_broadcast").await?;
    if !accepted.is_empty() {
        pipeline::record_accepted(&mut ftx, &accepted, settings.resubmit_interval).await?;
    }
    if !retries.is_empty() {
        pipeline::record_retry(&mut ftx, &retries, settings.retry_backoff).await?;
        outcome.retry_in = Some(settings.retry_backoff);
    }
    for (tx_id, reason) in &rejects {
        pipeline::reject(&mut ftx, *tx_id, reason).await?;
    }
    ftx.commit().await?;
    for (tx_id, reason) in &rejects {
        tracing::warn!(target: "txmgr::submitter", submitter = %ctx.key, %tx_id, reason, "broadcast refused definitively; nonce released");
    }
    Ok(())
}
