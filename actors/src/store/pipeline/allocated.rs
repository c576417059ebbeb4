//! ALLOCATED intents: signed (or to be signed again) and not yet accepted by
//! any node; the pipeline re-broadcasts their identical bytes until one is
//! (README "How an intent is executed", "Recovery").

use std::time::Duration;

use alloy::primitives::{Bytes, B256};
use sqlx::PgPool;
use uuid::Uuid;

use super::{corrupt, nonce_of};
use crate::{
    domain::{Intent, SubmitterKey, TxState},
    store::{FencedTx, StoreResult},
};

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
    /// Its intent asked for private sending.
    pub private: bool,
}

/// An ALLOCATED intent with its newest attempt, as [`load_due_allocated`]
/// selects it.
struct DueRow {
    tx_id: Uuid,
    nonce: i64,
    state: String,
    tx_hash: String,
    raw_tx: Vec<u8>,
    age_ms: i64,
    maybe_pooled: bool,
    private: bool,
}

/// ALLOCATED intents whose newest attempt is due for (re)broadcast.
pub async fn load_due_allocated(
    pool: &PgPool,
    key: SubmitterKey,
    limit: usize,
) -> StoreResult<Vec<PendingAttempt>> {
    let rows = sqlx::query_as!(
        DueRow,
        r#"SELECT m.tx_id, m.nonce AS "nonce!", m.state, a.tx_hash, a.raw_tx,
                (EXTRACT(EPOCH FROM (now() - m.created_at)) * 1000)::bigint AS "age_ms!",
                m.maybe_pooled,
                COALESCE((m.intent->>'private')::boolean, false) AS "private!"
           FROM managed_tx m
           JOIN LATERAL (SELECT tx_hash, raw_tx FROM tx_attempt t WHERE t.tx_id = m.tx_id
                          AND t.nonce = m.nonce ORDER BY attempt_no DESC LIMIT 1) a ON true
          WHERE m.chain_id = $1 AND m.submitter = $2 AND m.state = 'ALLOCATED' AND m.phase = 1
            AND (m.retry_at IS NULL OR m.retry_at <= now())
          ORDER BY m.nonce LIMIT $3"#,
        key.chain_id as _,
        key.address_hex(),
        i64::try_from(limit).unwrap_or(i64::MAX),
    )
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|row| {
            Ok(PendingAttempt {
                tx_id: row.tx_id,
                nonce: nonce_of(row.nonce)?,
                state: row.state.parse().map_err(corrupt)?,
                tx_hash: row.tx_hash.parse().map_err(corrupt)?,
                raw: row.raw_tx.into(),
                age: Duration::from_millis(u64::try_from(row.age_ms).unwrap_or(0)),
                maybe_pooled: row.maybe_pooled,
                private: row.private,
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
    let ms = sqlx::query_scalar!(
        // No GREATEST here: it skips NULLs, so "no row" would read as
        // "due now" (0). The clamp to zero is done below.
        "SELECT (EXTRACT(EPOCH FROM (min(m.retry_at) - now())) * 1000)::bigint
           FROM managed_tx m
          WHERE m.chain_id = $1 AND m.submitter = $2 AND m.state = 'ALLOCATED' AND m.phase = 1 AND m.retry_at IS NOT NULL
            -- Unsigned ones wait for the recovery signing, not for a retry.
            AND EXISTS (SELECT 1 FROM tx_attempt a WHERE a.tx_id = m.tx_id AND a.nonce = m.nonce)",
        key.chain_id as _,
        key.address_hex(),
    )
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
    let rows = sqlx::query!(
        r#"SELECT m.tx_id, m.nonce AS "nonce!", m.intent FROM managed_tx m
          WHERE m.chain_id = $1 AND m.submitter = $2 AND m.state = 'ALLOCATED' AND m.phase = 1
            AND NOT EXISTS (SELECT 1 FROM tx_attempt a WHERE a.tx_id = m.tx_id AND a.nonce = m.nonce)
          ORDER BY m.nonce"#,
        key.chain_id as _,
        key.address_hex(),
    )
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|row| {
            Ok((
                row.tx_id,
                nonce_of(row.nonce)?,
                serde_json::from_value(row.intent).map_err(corrupt)?,
            ))
        })
        .collect()
}

/// Makes every ALLOCATED intent of the submitter due for an immediate
/// re-broadcast of its identical bytes: run by a new leader, which cannot
/// know whether the previous one's sends arrived.
pub async fn retry_allocated_now(ftx: &mut FencedTx) -> StoreResult<()> {
    let key = ftx.submitter();
    sqlx::query!(
        "UPDATE managed_tx SET retry_at = now()
          WHERE chain_id = $1 AND submitter = $2 AND state = 'ALLOCATED' AND phase = 1",
        key.chain_id as _,
        key.address_hex(),
    )
    .execute(ftx.conn())
    .await?;
    Ok(())
}
