//! Following broadcast intents on chain: receipts, nonces consumed by others,
//! STUCK. Fenced writes only (DESIGN.md sections 7 and 9).

use alloy::primitives::B256;
use sqlx::PgPool;
use uuid::Uuid;

use super::{FencedTx, StoreError, StoreResult};
use crate::domain::SubmitterKey;

/// An intent with a nonce and no receipt, with every hash it was signed as.
#[derive(Debug, Clone)]
pub struct Unmined {
    /// The intent.
    pub tx_id: Uuid,
    /// Its nonce.
    pub nonce: u64,
    /// All attempt hashes, newest first: any of them may be the one mined.
    pub attempt_hashes: Vec<B256>,
}

/// Intents holding a nonce below `below_nonce` (the chain's latest nonce: so
/// their nonce is consumed) that have no receipt yet.
pub async fn load_unmined_below(
    pool: &PgPool,
    key: SubmitterKey,
    below_nonce: u64,
) -> StoreResult<Vec<Unmined>> {
    let rows: Vec<(Uuid, i64, Vec<String>)> = sqlx::query_as(
        "SELECT m.tx_id, m.nonce,
                COALESCE((SELECT array_agg(a.tx_hash ORDER BY a.attempt_no DESC)
                            FROM tx_attempt a WHERE a.tx_id = m.tx_id AND a.nonce = m.nonce), '{}')
           FROM managed_tx m
          WHERE m.chain_id = $1 AND m.submitter = $2
            AND m.state IN ('ALLOCATED', 'TRACKING', 'STUCK') AND m.receipt IS NULL
            AND m.nonce < $3
          ORDER BY m.nonce",
    )
    .bind(key.chain_id_db())
    .bind(key.address_hex())
    .bind(i64::try_from(below_nonce).unwrap_or(i64::MAX))
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|(tx_id, nonce, hashes)| {
            Ok(Unmined {
                tx_id,
                nonce: u64::try_from(nonce).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                attempt_hashes: hashes
                    .iter()
                    .map(|h| {
                        h.parse()
                            .map_err(|e| StoreError::Corrupt(format!("hash {h}: {e}")))
                    })
                    .collect::<StoreResult<_>>()?,
            })
        })
        .collect()
}

/// A receipt as recorded on the intent.
#[derive(Debug, Clone)]
pub struct MinedReceipt {
    /// The attempt that was mined.
    pub tx_hash: B256,
    /// Its block.
    pub block_number: u64,
    /// Its block hash.
    pub block_hash: B256,
    /// The receipt as the node returned it.
    pub receipt: serde_json::Value,
}

/// Records the receipt: sub_state `mined`; the state stays TRACKING until
/// finality decides (an intent still ALLOCATED — mined before we heard the
/// broadcast answer — becomes TRACKING).
pub async fn record_receipt(
    ftx: &mut FencedTx,
    tx_id: Uuid,
    mined: &MinedReceipt,
) -> StoreResult<()> {
    let token = ftx.token();
    sqlx::query(
        "UPDATE managed_tx SET state = CASE WHEN state = 'ALLOCATED' THEN 'TRACKING' ELSE state END,
                sub_state = 'mined', mined_tx_hash = $2, receipt = $3, receipt_block_number = $4,
                receipt_block_hash = $5, fencing_token = $6, updated_at = now(), last_error = NULL
          WHERE tx_id = $1 AND state IN ('ALLOCATED', 'TRACKING', 'STUCK')",
    )
    .bind(tx_id)
    .bind(format!("{:#x}", mined.tx_hash))
    .bind(&mined.receipt)
    .bind(i64::try_from(mined.block_number).unwrap_or(i64::MAX))
    .bind(format!("{:#x}", mined.block_hash))
    .bind(token)
    .execute(ftx.conn())
    .await?;
    Ok(())
}

/// The intent's nonce was consumed by a transaction that is not ours and it
/// never executed: back to QUEUED for a new nonce (the `adopt` policy).
pub async fn requeue(ftx: &mut FencedTx, tx_id: Uuid, reason: &str) -> StoreResult<()> {
    let token = ftx.token();
    sqlx::query(
        "UPDATE managed_tx SET state = 'QUEUED', nonce = NULL, sub_state = 'nonce_consumed_externally',
                last_error = $2, tx_hash = NULL, submit_attempts = 0, last_submit_at = NULL,
                next_resubmit_at = NULL, fencing_token = $3, updated_at = now()
          WHERE tx_id = $1 AND state IN ('ALLOCATED', 'TRACKING', 'STUCK') AND receipt IS NULL",
    )
    .bind(tx_id)
    .bind(reason)
    .bind(token)
    .execute(ftx.conn())
    .await?;
    Ok(())
}

/// STUCK with a reason, and its completion row, in one transaction. Still
/// tracked: it may confirm later.
pub async fn mark_stuck(
    ftx: &mut FencedTx,
    tx_id: Uuid,
    sub_state: &str,
    reason: &str,
) -> StoreResult<()> {
    let token = ftx.token();
    let updated = sqlx::query(
        "UPDATE managed_tx SET state = 'STUCK', sub_state = $2, last_error = $3,
                fencing_token = $4, updated_at = now()
          WHERE tx_id = $1 AND state IN ('ALLOCATED', 'TRACKING')",
    )
    .bind(tx_id)
    .bind(sub_state)
    .bind(reason)
    .bind(token)
    .execute(ftx.conn())
    .await?
    .rows_affected();
    if updated == 1 {
        sqlx::query(
            "INSERT INTO tx_completion (tx_id, chain_id, submitter, request_id, state)
             SELECT tx_id, chain_id, submitter, request_id, state FROM managed_tx WHERE tx_id = $1",
        )
        .bind(tx_id)
        .execute(ftx.conn())
        .await?;
    }
    Ok(())
}
