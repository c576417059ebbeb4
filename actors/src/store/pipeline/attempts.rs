//! Signed attempts: persisted before any byte leaves the process, then each
//! node's answer recorded on them (README "How an intent is executed").

use std::time::Duration;

use alloy::primitives::{Bytes, B256};
use sqlx::PgConnection;
use uuid::Uuid;

use super::nonce_db;
use crate::{
    domain::{AttemptKind, ChainId, SubmitterKey},
    store::{millis, FencedTx, StoreResult},
};

/// Inserts attempts in one statement, each numbered after its intent's
/// newest attempt and stamped with its writer's `(submitter, token)`; an
/// attempt for an intent of another submitter is not inserted. The same
/// statement raises the intent's fee reservation in the spend ledger (if
/// it has a row) to the attempt's worst case. Runs in the
/// caller's fenced transaction (a [`FencedTx`] or a group commit).
pub(in crate::store) async fn insert_attempt_rows(
    conn: &mut PgConnection,
    rows: &[(&NewAttempt, (SubmitterKey, i64))],
) -> StoreResult<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let amount = |v: Option<u128>| v.map(|v| v.to_string());
    let tx_ids: Vec<Uuid> = rows.iter().map(|(a, _)| a.tx_id).collect();
    let nonces = rows
        .iter()
        .map(|(a, _)| nonce_db(a.nonce))
        .collect::<StoreResult<Vec<_>>>()?;
    let hashes: Vec<String> = rows
        .iter()
        .map(|(a, _)| format!("{:#x}", a.tx_hash))
        .collect();
    let raws: Vec<Vec<u8>> = rows.iter().map(|(a, _)| a.raw.to_vec()).collect();
    let max_fees: Vec<Option<String>> = rows
        .iter()
        .map(|(a, _)| amount(a.max_fee_per_gas))
        .collect();
    let priority_fees: Vec<Option<String>> = rows
        .iter()
        .map(|(a, _)| amount(a.max_priority_fee_per_gas))
        .collect();
    let gas_prices: Vec<Option<String>> = rows.iter().map(|(a, _)| amount(a.gas_price)).collect();
    let gas_limits: Vec<i64> = rows
        .iter()
        .map(|(a, _)| i64::try_from(a.gas_limit).unwrap_or(i64::MAX))
        .collect();
    let kinds: Vec<&str> = rows.iter().map(|(a, _)| a.kind.as_str()).collect();
    let tokens: Vec<i64> = rows.iter().map(|(_, (_, token))| *token).collect();
    let chain_ids: Vec<ChainId> = rows.iter().map(|(_, (key, _))| key.chain_id).collect();
    let submitters: Vec<String> = rows.iter().map(|(_, (key, _))| key.address_hex()).collect();
    sqlx::query!(
        "WITH inserted AS (
         INSERT INTO tx_attempt (tx_id, attempt_no, nonce, tx_hash, raw_tx, max_fee_per_gas,
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
                            AND m.submitter = a.submitter
          -- The same signed bytes persisted again (a group commit retried
          -- part by part after a commit whose outcome was unknown) add no
          -- second attempt: the hash is not unique in the database
          -- (migration 20261207000001), so the check is here, through the
          -- primary key.
          WHERE NOT EXISTS (SELECT 1 FROM tx_attempt t
                             WHERE t.tx_id = a.tx_id AND t.tx_hash = a.tx_hash)
         RETURNING tx_id, gas_limit * COALESCE(max_fee_per_gas, gas_price) AS worst)
         -- Under a spend limit, the intent's fee reservation covers its
         -- dearest attempt (bumps and cancels are never blocked, but count).
         UPDATE spend_ledger s SET fees_reserved = GREATEST(s.fees_reserved, w.worst)
           FROM (SELECT tx_id, max(worst) AS worst FROM inserted GROUP BY tx_id) w
          WHERE s.tx_id = w.tx_id",
        &tx_ids,
        &nonces,
        &hashes,
        &raws,
        // Nullable elements (legacy or EIP-1559 fees) and the domain's
        // ChainId are bound as they are; the SQL casts give the types.
        &max_fees as _,
        &priority_fees as _,
        &gas_prices as _,
        &gas_limits,
        &kinds as _,
        &tokens,
        &chain_ids as _,
        &submitters,
    )
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
    /// Its intent asked for private sending (not stored with the attempt:
    /// it is the intent's).
    pub private: bool,
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
    let tx_ids: Vec<Uuid> = attempts.iter().map(|a| a.tx_id).collect();
    let hashes: Vec<String> = attempts.iter().map(|a| hash(&a.tx_hash)).collect();
    sqlx::query!(
        "UPDATE managed_tx m SET tx_hash = a.tx_hash, fencing_token = $3, updated_at = now()
           FROM UNNEST($1::uuid[], $2::text[]) AS a(tx_id, tx_hash) WHERE m.tx_id = a.tx_id",
        &tx_ids,
        &hashes,
        token,
    )
    .execute(ftx.conn())
    .await?;
    Ok(())
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
    let key = ftx.submitter();
    // Only the fenced submitter's intents, and only while still in flight:
    // a finished intent is never rescheduled.
    let tx_ids: Vec<Uuid> = retries.iter().map(|r| r.tx_id).collect();
    let errors: Vec<String> = retries.iter().map(|r| r.error.clone()).collect();
    let unknown: Vec<bool> = retries.iter().map(|r| r.unknown).collect();
    sqlx::query!(
        "UPDATE managed_tx m SET last_error = a.error,
                retry_at = now() + $3::bigint * interval '1 millisecond',
                maybe_pooled = m.maybe_pooled OR a.unknown, fencing_token = $4, updated_at = now()
           FROM UNNEST($1::uuid[], $2::text[], $5::bool[]) AS a(tx_id, error, unknown)
          WHERE m.tx_id = a.tx_id AND m.chain_id = $6 AND m.submitter = $7
            AND m.state IN ('ALLOCATED', 'TRACKING', 'STUCK')",
        &tx_ids,
        &errors,
        millis(retry_after),
        token,
        &unknown,
        key.chain_id as _,
        key.address_hex(),
    )
    .execute(ftx.conn())
    .await?;
    record_attempt_results(
        ftx,
        retries
            .iter()
            .map(|r| (r.tx_id, r.tx_hash, r.error.clone())),
    )
    .await
}

/// Records each node's answer on its attempt (no state change): (intent,
/// attempt hash, answer). The intent is named so the write goes through the
/// primary key: the hash index is ordered by hour (migration
/// 20261207000001) and is only for lookups by hash alone.
pub async fn record_attempt_results(
    ftx: &mut FencedTx,
    results: impl Iterator<Item = (Uuid, B256, String)>,
) -> StoreResult<()> {
    let mut tx_ids = Vec::new();
    let mut hashes = Vec::new();
    let mut labels = Vec::new();
    for (tx_id, hash, result) in results {
        tx_ids.push(tx_id);
        hashes.push(format!("{hash:#x}"));
        labels.push(result);
    }
    sqlx::query!(
        "UPDATE tx_attempt t SET broadcast_result = a.result
           FROM UNNEST($1::uuid[], $2::text[], $3::text[]) AS a(tx_id, tx_hash, result)
          WHERE t.tx_id = a.tx_id AND t.tx_hash = a.tx_hash",
        &tx_ids,
        &hashes,
        &labels,
    )
    .execute(ftx.conn())
    .await?;
    Ok(())
}
