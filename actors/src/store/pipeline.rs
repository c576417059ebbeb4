//! The submitter pipeline's reads and fenced writes: allocation, attempts,
//! broadcast results, receipts, rejections (DESIGN.md sections 6-8).

use std::time::Duration;

use alloy::primitives::{Bytes, B256};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use super::{millis, nonce_cursor, FencedTx, StoreError, StoreResult};
use crate::domain::{AttemptKind, Intent, SubmitterKey, TxState};

/// A QUEUED intent waiting for a nonce.
#[derive(Debug, Clone)]
pub struct QueuedTx {
    /// Its id.
    pub tx_id: Uuid,
    /// What to send.
    pub intent: Intent,
}

pub(super) fn corrupt(e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

pub(super) fn nonce_db(nonce: u64) -> StoreResult<i64> {
    i64::try_from(nonce).map_err(corrupt)
}

fn nonce_of(n: i64) -> StoreResult<u64> {
    u64::try_from(n).map_err(corrupt)
}

/// The oldest QUEUED intents that fit the free in-flight slots, in one
/// round trip: at most `batch`, and at most `max_in_flight` minus the intents
/// occupying a slot (ALLOCATED, STUCK, and TRACKING — with a receipt only
/// when `count_mined`, i.e. strict mode counts until final).
pub async fn load_queued_within(
    pool: &PgPool,
    key: SubmitterKey,
    batch: usize,
    max_in_flight: u32,
    count_mined: bool,
) -> StoreResult<Vec<QueuedTx>> {
    let rows: Vec<(Uuid, serde_json::Value)> = sqlx::query_as(
        "SELECT tx_id, intent FROM managed_tx
          WHERE chain_id = $1 AND submitter = $2 AND state = 'QUEUED'
          ORDER BY ingress_seq
          LIMIT GREATEST(0, LEAST($3, $4 - (
                SELECT count(*) FROM managed_tx
                 WHERE chain_id = $1 AND submitter = $2
                   AND state IN ('ALLOCATED', 'TRACKING', 'STUCK')
                   AND ($5 OR receipt IS NULL))))",
    )
    .bind(key.chain_id_db())
    .bind(key.address_hex())
    .bind(i64::try_from(batch).unwrap_or(i64::MAX))
    .bind(i64::from(max_in_flight))
    .bind(count_mined)
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|(tx_id, intent)| {
            Ok(QueuedTx {
                tx_id,
                intent: serde_json::from_value(intent).map_err(corrupt)?,
            })
        })
        .collect()
}

/// REJECTED: the intent never used a nonce on chain. When it held one (no
/// node ever accepted any attempt, and no send had an unknown answer) the
/// nonce goes back to the cursor. Returns false (and changes nothing) when
/// the intent is no longer rejectable — an attempt was accepted meanwhile,
/// or its bytes may be in a pool (`maybe_pooled`).
pub async fn reject(ftx: &mut FencedTx, tx_id: Uuid, reason: &str) -> StoreResult<bool> {
    let submitter = ftx.submitter();
    let token = ftx.token();
    reject_on(ftx.conn(), submitter, token, tx_id, reason).await
}

/// [`reject`] on a connection whose transaction the caller has fenced for
/// `submitter` (the group committer). Only an intent of that submitter is
/// touched.
pub(super) async fn reject_on(
    conn: &mut PgConnection,
    submitter: SubmitterKey,
    token: i64,
    tx_id: Uuid,
    reason: &str,
) -> StoreResult<bool> {
    let released: Option<(Option<i64>,)> = sqlx::query_as(
        "UPDATE managed_tx m SET state = 'REJECTED', sub_state = NULL, nonce = NULL, last_error = $2,
                requested_action = NULL, requested_by = NULL, fencing_token = $3, updated_at = now()
           FROM (SELECT tx_id, nonce FROM managed_tx WHERE tx_id = $1 FOR UPDATE) old
          WHERE m.tx_id = old.tx_id AND m.state IN ('QUEUED', 'ALLOCATED') AND m.submit_attempts = 0
            AND NOT m.maybe_pooled AND m.chain_id = $4 AND m.submitter = $5
          RETURNING old.nonce",
    )
    .bind(tx_id)
    .bind(reason)
    .bind(token)
    .bind(submitter.chain_id_db())
    .bind(submitter.address_hex())
    .fetch_optional(&mut *conn)
    .await?;
    let Some((nonce,)) = released else {
        return Ok(false);
    };
    if let Some(nonce) = nonce {
        nonce_cursor::release_on(conn, submitter, token, &[nonce_of(nonce)?]).await?;
    }
    super::completions::record(conn, tx_id).await?;
    Ok(true)
}

/// Locks the intents among `ids` that are still QUEUED, in the caller's
/// fenced transaction, before nonces are drawn for them: an operator's
/// cancel that got there first has committed (and they are skipped), one
/// that comes later waits and then finds them ALLOCATED. So every nonce
/// drawn is assigned, and a cancel never leaves a gap.
pub async fn lock_queued(ftx: &mut FencedTx, ids: &[Uuid]) -> StoreResult<Vec<Uuid>> {
    Ok(sqlx::query_scalar(
        "SELECT tx_id FROM managed_tx WHERE tx_id = ANY($1) AND state = 'QUEUED'
          ORDER BY ingress_seq FOR UPDATE",
    )
    .bind(ids)
    .fetch_all(ftx.conn())
    .await?)
}

/// Gives the nonces to QUEUED intents (one allocation transaction with
/// [`nonce_cursor::allocate`]) and marks them ALLOCATED. An intent that left
/// QUEUED meanwhile (an operator cancelled it) is skipped and its nonce goes
/// back to the cursor in the same transaction. Returns the intents that got
/// their nonce.
pub async fn assign_nonces(
    ftx: &mut FencedTx,
    assignments: &[(Uuid, u64)],
    resubmit_interval: Duration,
) -> StoreResult<Vec<Uuid>> {
    let ids: Vec<Uuid> = assignments.iter().map(|(id, _)| *id).collect();
    let nonces = assignments
        .iter()
        .map(|(_, n)| nonce_db(*n))
        .collect::<StoreResult<Vec<_>>>()?;
    let token = ftx.token();
    let assigned: Vec<Uuid> = sqlx::query_scalar(
        "UPDATE managed_tx m SET state = 'ALLOCATED', nonce = a.nonce, sub_state = NULL,
                fencing_token = $3, updated_at = now(), retry_at = now(), allocated_at = now(),
                maybe_pooled = false, next_resubmit_at = now() + $4 * interval '1 millisecond'
           FROM UNNEST($1::uuid[], $2::bigint[]) AS a(tx_id, nonce)
          WHERE m.tx_id = a.tx_id AND m.state = 'QUEUED'
         RETURNING m.tx_id",
    )
    .bind(&ids)
    .bind(&nonces)
    .bind(token)
    .bind(millis(resubmit_interval))
    .fetch_all(ftx.conn())
    .await?;
    if assigned.len() != assignments.len() {
        let mut unused: Vec<u64> = assignments
            .iter()
            .filter(|(id, _)| !assigned.contains(id))
            .map(|(_, n)| *n)
            .collect();
        unused.sort_unstable();
        nonce_cursor::release(ftx, &unused).await?;
    }
    Ok(assigned)
}

/// Inserts attempts in one statement, each numbered after its intent's
/// newest attempt and stamped with its writer's `(submitter, token)`; an
/// attempt for an intent of another submitter is not inserted. Runs in the
/// caller's fenced transaction (a [`FencedTx`] or a group commit).
pub(super) async fn insert_attempt_rows(
    conn: &mut PgConnection,
    rows: &[(&NewAttempt, (SubmitterKey, i64))],
) -> StoreResult<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let amount = |v: Option<u128>| v.map(|v| v.to_string());
    sqlx::query(
        "INSERT INTO tx_attempt (tx_id, attempt_no, nonce, tx_hash, raw_tx, max_fee_per_gas,
                 max_priority_fee_per_gas, gas_price, gas_limit, kind, fencing_token)
         SELECT a.tx_id,
                COALESCE((SELECT max(t.attempt_no) FROM tx_attempt t WHERE t.tx_id = a.tx_id), 0) + 1,
                a.nonce, a.tx_hash, a.raw_tx, a.max_fee::numeric,
                a.max_prio::numeric, a.gas_price::numeric, a.gas_limit, a.kind, a.token
           FROM UNNEST($1::uuid[], $2::bigint[], $3::text[], $4::bytea[], $5::text[],
                       $6::text[], $7::text[], $8::bigint[], $9::text[], $10::bigint[],
                       $11::bigint[], $12::text[])
                AS a(tx_id, nonce, tx_hash, raw_tx, max_fee, max_prio, gas_price, gas_limit,
                     kind, token, chain_id, submitter)
           JOIN managed_tx m ON m.tx_id = a.tx_id AND m.chain_id = a.chain_id
                            AND m.submitter = a.submitter",
    )
    .bind(rows.iter().map(|(a, _)| a.tx_id).collect::<Vec<_>>())
    .bind(rows.iter().map(|(a, _)| nonce_db(a.nonce)).collect::<StoreResult<Vec<_>>>()?)
    .bind(rows.iter().map(|(a, _)| format!("{:#x}", a.tx_hash)).collect::<Vec<_>>())
    .bind(rows.iter().map(|(a, _)| a.raw.to_vec()).collect::<Vec<_>>())
    .bind(rows.iter().map(|(a, _)| amount(a.max_fee_per_gas)).collect::<Vec<_>>())
    .bind(rows.iter().map(|(a, _)| amount(a.max_priority_fee_per_gas)).collect::<Vec<_>>())
    .bind(rows.iter().map(|(a, _)| amount(a.gas_price)).collect::<Vec<_>>())
    .bind(rows.iter().map(|(a, _)| i64::try_from(a.gas_limit).unwrap_or(i64::MAX)).collect::<Vec<_>>())
    .bind(rows.iter().map(|(a, _)| a.kind.as_str()).collect::<Vec<_>>())
    .bind(rows.iter().map(|(_, (_, token))| *token).collect::<Vec<_>>())
    .bind(rows.iter().map(|(_, (key, _))| key.chain_id_db()).collect::<Vec<_>>())
    .bind(rows.iter().map(|(_, (key, _))| key.address_hex()).collect::<Vec<_>>())
    .execute(conn)
    .await?;
    Ok(())
}

/// A signed transaction about to be persisted.
#[derive(Debug, Clone)]
pub struct NewAttempt {
    /// The intent.
    pub tx_id: Uuid,
    /// The nonce signed.
    pub nonce: u64,
    /// keccak of `raw`.
    pub tx_hash: B256,
    /// EIP-2718 bytes as broadcast.
    pub raw: Bytes,
    /// EIP-1559 max fee, or `None` for legacy.
    pub max_fee_per_gas: Option<u128>,
    /// EIP-1559 priority fee, or `None` for legacy.
    pub max_priority_fee_per_gas: Option<u128>,
    /// Legacy gas price, or `None` for EIP-1559.
    pub gas_price: Option<u128>,
    /// Gas limit signed.
    pub gas_limit: u64,
    /// Why this attempt exists.
    pub kind: AttemptKind,
}

/// Persists signed attempts **before** any of them is broadcast, and points
/// each intent's `tx_hash` at its newest attempt.
pub async fn insert_attempts(ftx: &mut FencedTx, attempts: &[NewAttempt]) -> StoreResult<()> {
    let token = ftx.token();
    let hash = |h: &B256| format!("{h:#x}");
    let writer = (ftx.submitter(), token);
    let rows: Vec<(&NewAttempt, (SubmitterKey, i64))> =
        attempts.iter().map(|a| (a, writer)).collect();
    insert_attempt_rows(ftx.conn(), &rows).await?;
    sqlx::query(
        "UPDATE managed_tx m SET tx_hash = a.tx_hash, fencing_token = $3, updated_at = now()
           FROM UNNEST($1::uuid[], $2::text[]) AS a(tx_id, tx_hash) WHERE m.tx_id = a.tx_id",
    )
    .bind(attempts.iter().map(|a| a.tx_id).collect::<Vec<_>>())
    .bind(
        attempts
            .iter()
            .map(|a| hash(&a.tx_hash))
            .collect::<Vec<_>>(),
    )
    .bind(token)
    .execute(ftx.conn())
    .await?;
    Ok(())
}

/// The newest attempt of an intent, ready to (re)broadcast.
#[derive(Debug, Clone)]
pub struct PendingAttempt {
    /// The intent.
    pub tx_id: Uuid,
    /// Its nonce.
    pub nonce: u64,
    /// Its state (ALLOCATED: never accepted; TRACKING/STUCK: accepted before).
    pub state: TxState,
    /// The attempt's hash.
    pub tx_hash: B256,
    /// The attempt's bytes, identical on every re-broadcast.
    pub raw: Bytes,
    /// Time since the intent was created (for `reject_after`).
    pub age: Duration,
    /// Some send had an unknown answer: the bytes may be in a pool, so a
    /// refusal does not release the nonce.
    pub maybe_pooled: bool,
}

/// `(tx_id, nonce, state, tx_hash, raw_tx, age_ms, maybe_pooled)`.
type DueRow = (Uuid, i64, String, String, Vec<u8>, i64, bool);

/// ALLOCATED intents whose newest attempt is due for (re)broadcast.
pub async fn load_due_allocated(
    pool: &PgPool,
    key: SubmitterKey,
    limit: usize,
) -> StoreResult<Vec<PendingAttempt>> {
    let rows: Vec<DueRow> = sqlx::query_as(
        "SELECT m.tx_id, m.nonce, m.state, a.tx_hash, a.raw_tx,
                (EXTRACT(EPOCH FROM (now() - m.created_at)) * 1000)::bigint, m.maybe_pooled
           FROM managed_tx m
           JOIN LATERAL (SELECT tx_hash, raw_tx FROM tx_attempt t WHERE t.tx_id = m.tx_id
                          AND t.nonce = m.nonce ORDER BY attempt_no DESC LIMIT 1) a ON true
          WHERE m.chain_id = $1 AND m.submitter = $2 AND m.state = 'ALLOCATED'
            AND (m.retry_at IS NULL OR m.retry_at <= now())
          ORDER BY m.nonce LIMIT $3",
    )
    .bind(key.chain_id_db())
    .bind(key.address_hex())
    .bind(i64::try_from(limit).unwrap_or(i64::MAX))
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|(tx_id, nonce, state, hash, raw, age_ms, maybe_pooled)| {
            Ok(PendingAttempt {
                tx_id,
                nonce: nonce_of(nonce)?,
                state: state.parse().map_err(corrupt)?,
                tx_hash: hash.parse().map_err(corrupt)?,
                raw: raw.into(),
                age: Duration::from_millis(u64::try_from(age_ms).unwrap_or(0)),
                maybe_pooled,
            })
        })
        .collect()
}

/// How long until the submitter's earliest ALLOCATED broadcast retry (zero
/// when one is overdue); `None` when no ALLOCATED intent waits for one.
pub async fn next_allocated_retry(
    pool: &PgPool,
    key: SubmitterKey,
) -> StoreResult<Option<Duration>> {
    let ms: Option<i64> = sqlx::query_scalar(
        // No GREATEST here: it skips NULLs, so "no row" would read as
        // "due now" (0). The clamp to zero is done below.
        "SELECT (EXTRACT(EPOCH FROM (min(m.retry_at) - now())) * 1000)::bigint
           FROM managed_tx m
          WHERE m.chain_id = $1 AND m.submitter = $2 AND m.state = 'ALLOCATED' AND m.retry_at IS NOT NULL
            -- Unsigned ones wait for the recovery signing, not for a retry.
            AND EXISTS (SELECT 1 FROM tx_attempt a WHERE a.tx_id = m.tx_id AND a.nonce = m.nonce)",
    )
    .bind(key.chain_id_db())
    .bind(key.address_hex())
    .fetch_one(pool)
    .await?;
    Ok(ms.map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0))))
}

/// ALLOCATED intents with no attempt (a crash between allocation and
/// persisting the signature): they are signed again with the same nonce.
pub async fn load_allocated_unsigned(
    pool: &PgPool,
    key: SubmitterKey,
) -> StoreResult<Vec<(Uuid, u64, Intent)>> {
    let rows: Vec<(Uuid, i64, serde_json::Value)> = sqlx::query_as(
        "SELECT m.tx_id, m.nonce, m.intent FROM managed_tx m
          WHERE m.chain_id = $1 AND m.submitter = $2 AND m.state = 'ALLOCATED'
            AND NOT EXISTS (SELECT 1 FROM tx_attempt a WHERE a.tx_id = m.tx_id AND a.nonce = m.nonce)
          ORDER BY m.nonce",
    )
    .bind(key.chain_id_db())
    .bind(key.address_hex())
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|(id, nonce, intent)| {
            Ok((
                id,
                nonce_of(nonce)?,
                serde_json::from_value(intent).map_err(corrupt)?,
            ))
        })
        .collect()
}

/// A broadcast that was not accepted, to retry.
#[derive(Debug, Clone)]
pub struct RetryLater {
    /// The intent.
    pub tx_id: Uuid,
    /// The attempt sent.
    pub tx_hash: B256,
    /// The node's answer.
    pub error: String,
    /// The answer was unknown (timeout, connection, 5xx): the bytes may be
    /// in a pool from now on.
    pub unknown: bool,
}

/// Broadcast not accepted yet: stays ALLOCATED, retried at `retry_after`.
/// An unknown answer marks the intent `maybe_pooled`; that mark must
/// survive a crash (losing it could later release a nonce whose bytes sit
/// in a pool), so it turns durability back on for a relaxed transaction.
pub async fn record_retry(
    ftx: &mut FencedTx,
    retries: &[RetryLater],
    retry_after: Duration,
) -> StoreResult<()> {
    if retries.iter().any(|r| r.unknown) {
        ftx.require_durability().await?;
    }
    let token = ftx.token();
    sqlx::query(
        "UPDATE managed_tx m SET last_error = a.error, retry_at = now() + $3 * interval '1 millisecond',
                maybe_pooled = m.maybe_pooled OR a.unknown, fencing_token = $4, updated_at = now()
           FROM UNNEST($1::uuid[], $2::text[], $5::bool[]) AS a(tx_id, error, unknown)
          WHERE m.tx_id = a.tx_id",
    )
    .bind(retries.iter().map(|r| r.tx_id).collect::<Vec<_>>())
    .bind(retries.iter().map(|r| r.error.clone()).collect::<Vec<_>>())
    .bind(millis(retry_after))
    .bind(token)
    .bind(retries.iter().map(|r| r.unknown).collect::<Vec<_>>())
    .execute(ftx.conn())
    .await?;
    record_attempt_results(ftx, retries.iter().map(|r| (r.tx_hash, r.error.clone()))).await
}

/// Records each node's answer on its attempt (no state change).
pub async fn record_attempt_results(
    ftx: &mut FencedTx,
    results: impl Iterator<Item = (B256, String)>,
) -> StoreResult<()> {
    let (hashes, labels): (Vec<String>, Vec<String>) =
        results.map(|(h, r)| (format!("{h:#x}"), r)).unzip();
    sqlx::query(
        "UPDATE tx_attempt t SET broadcast_result = a.result
           FROM UNNEST($1::text[], $2::text[]) AS a(tx_hash, result) WHERE t.tx_hash = a.tx_hash",
    )
    .bind(hashes)
    .bind(labels)
    .execute(ftx.conn())
    .await?;
    Ok(())
}
