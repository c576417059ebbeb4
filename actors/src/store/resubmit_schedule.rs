//! The resubmit timers' schedule and the head of the nonce line: the reads
//! the leader's resubmission works from (README "Resubmission, fee bumps,
//! STUCK and cancel"); the claims themselves are in `resubmit_claims`.

use std::time::Duration;

use sqlx::PgPool;
use uuid::Uuid;

use super::{StoreError, StoreResult};
use crate::domain::{SubState, SubmitterKey, TxState};

fn corrupt(e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

/// When each of the submitter's accepted, unmined intents is next due
/// (restricted to `only` when given): what the resubmit timers hold — its
/// next resubmit, or its `valid_until` when that comes first.
pub async fn schedule(
    pool: &PgPool,
    key: SubmitterKey,
    only: Option<&[Uuid]>,
) -> StoreResult<Vec<(Uuid, Duration)>> {
    let only = only.map(<[Uuid]>::to_vec);
    let rows = sqlx::query!(
        r#"SELECT tx_id,
                  GREATEST(0, (EXTRACT(EPOCH FROM (
                      -- A deadline still ahead comes first: its pass cancels
                      -- the intent then (README "Guardrails"); LEAST skips NULL.
                      LEAST(next_resubmit_at,
                            CASE WHEN (intent->>'valid_until')::timestamptz > now()
                                 THEN (intent->>'valid_until')::timestamptz END)
                      - now())) * 1000)::bigint) AS "due_ms!"
             FROM managed_tx
            WHERE chain_id = $1 AND submitter = $2 AND state IN ('ALLOCATED', 'TRACKING', 'STUCK')
              AND phase = 1 AND receipt IS NULL AND next_resubmit_at IS NOT NULL
              AND ($3::uuid[] IS NULL OR tx_id = ANY($3))"#,
        key.chain_id as _,
        key.address_hex(),
        only.as_deref(),
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let ms = u64::try_from(r.due_ms).unwrap_or(0);
            (r.tx_id, Duration::from_millis(ms))
        })
        .collect())
}

/// The lowest-nonce open, unmined intent of the submitter and its state: the
/// head of the nonce line, which blocks every later nonce on chain.
pub async fn head_of_line(pool: &PgPool, key: SubmitterKey) -> StoreResult<Option<(u64, TxState)>> {
    let row = sqlx::query!(
        r#"SELECT nonce AS "nonce!", state FROM managed_tx
            WHERE chain_id = $1 AND submitter = $2 AND state IN ('ALLOCATED', 'TRACKING', 'STUCK')
              AND phase = 1 AND receipt IS NULL AND sub_state IS DISTINCT FROM $3
            ORDER BY nonce LIMIT 1"#,
        key.chain_id as _,
        key.address_hex(),
        SubState::NonceConsumedExternally as _,
    )
    .fetch_optional(pool)
    .await?;
    row.map(|r| (r.nonce, r.state))
        .map(|(nonce, state)| {
            Ok((
                u64::try_from(nonce).map_err(corrupt)?,
                state.parse().map_err(corrupt)?,
            ))
        })
        .transpose()
}
