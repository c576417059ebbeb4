//! Following broadcast intents on chain: receipts, nonces consumed by others,
//! STUCK. Fenced writes only (README "How an intent is executed" and "Receipts, finality and reorgs").

use alloy::primitives::{B256, U256};
use sqlx::PgPool;
use uuid::Uuid;

use super::{FencedTx, StoreError, StoreResult};
use crate::domain::{SubState, SubmitterKey, TxState};

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
    let rows = sqlx::query!(
        r#"SELECT m.tx_id, m.nonce AS "nonce!",
                  COALESCE((SELECT array_agg(a.tx_hash ORDER BY a.attempt_no DESC)
                              FROM tx_attempt a WHERE a.tx_id = m.tx_id AND a.nonce = m.nonce), '{}')
                      AS "attempt_hashes!"
             FROM managed_tx m
            WHERE m.chain_id = $1 AND m.submitter = $2
              AND m.state IN ('ALLOCATED', 'TRACKING', 'STUCK') AND m.receipt IS NULL
              AND m.phase = 1 AND m.sub_state IS DISTINCT FROM $4
              AND m.nonce < $3
            ORDER BY m.nonce"#,
        key.chain_id as _,
        key.address_hex(),
        i64::try_from(below_nonce).unwrap_or(i64::MAX),
        SubState::NonceConsumedExternally as _,
    )
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|row| {
            Ok(Unmined {
                tx_id: row.tx_id,
                nonce: u64::try_from(row.nonce).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                attempt_hashes: row
                    .attempt_hashes
                    .iter()
                    .map(|h| stored_hash(h))
                    .collect::<StoreResult<_>>()?,
            })
        })
        .collect()
}

/// A transaction hash as stored (`0x…` text); anything else is corrupt data.
fn stored_hash(text: &str) -> StoreResult<B256> {
    text.parse()
        .map_err(|e| StoreError::Corrupt(format!("hash {text}: {e}")))
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

/// Records the receipt: [`SubState::Mined`]; the state stays TRACKING until
/// finality decides (an intent still ALLOCATED — mined before we heard the
/// broadcast answer — becomes TRACKING).
pub async fn record_receipt(
    ftx: &mut FencedTx,
    tx_id: Uuid,
    mined: &MinedReceipt,
) -> StoreResult<()> {
    let token = ftx.token();
    sqlx::query!(
        "WITH mined AS (
             UPDATE managed_tx SET state = CASE WHEN state = 'ALLOCATED' THEN 'TRACKING' ELSE state END,
                    sub_state = $7, mined_tx_hash = $2, receipt = $3, receipt_block_number = $4,
                    receipt_block_hash = $5, fencing_token = $6, updated_at = now(), last_error = NULL
              WHERE tx_id = $1 AND state IN ('ALLOCATED', 'TRACKING', 'STUCK')
             RETURNING tx_id)
         -- The fee reservation trued up to what the receipt says was paid.
         UPDATE spend_ledger s SET fees_paid = $8::text::numeric
           FROM mined WHERE s.tx_id = mined.tx_id AND $8::text IS NOT NULL",
        tx_id,
        format!("{:#x}", mined.tx_hash),
        &mined.receipt,
        i64::try_from(mined.block_number).unwrap_or(i64::MAX),
        format!("{:#x}", mined.block_hash),
        token,
        SubState::Mined as _,
        paid_fees(&mined.receipt).map(|paid| paid.to_string()),
    )
    .execute(ftx.conn())
    .await?;
    Ok(())
}

/// What a receipt says its transaction paid, wei: `gasUsed ×
/// effectiveGasPrice`, plus the `l1Fee` an OP-stack L2 adds. `None` when a
/// field is missing or unreadable (the reservation then keeps counting).
pub fn paid_fees(receipt: &serde_json::Value) -> Option<U256> {
    let quantity =
        |key: &str| -> Option<U256> { serde_json::from_value(receipt.get(key)?.clone()).ok() };
    let execution = quantity("gasUsed")?.checked_mul(quantity("effectiveGasPrice")?)?;
    match receipt.get("l1Fee") {
        None | Some(serde_json::Value::Null) => Some(execution),
        Some(_) => execution.checked_add(quantity("l1Fee")?),
    }
}

/// The intent's nonce was consumed by a transaction that is not ours and it
/// never executed: back to QUEUED for a new nonce (the `adopt` policy) — or
/// CANCELLED, with its completion row, when an operator's cancel was waiting
/// (it holds no nonce now, so the cancel is done). A filler is never sent
/// again: its nonce is used, so it ends REJECTED (not included), with its
/// completion row. Clears any other request.
pub async fn requeue(ftx: &mut FencedTx, tx_id: Uuid, reason: &str) -> StoreResult<()> {
    let token = ftx.token();
    // The nonce leaves the row (its trigger raises the cursor's floor): the
    // cursor's lock first, the store's lock order.
    super::nonce_cursor::lock_before_rows(ftx).await?;
    let state = sqlx::query_scalar!(
        "UPDATE managed_tx
            SET state = CASE WHEN requested_action = 'cancel' THEN 'CANCELLED'
                             WHEN sub_state = $4 OR request_id LIKE 'filler:%' THEN 'REJECTED'
                             ELSE 'QUEUED' END,
                nonce = NULL,
                sub_state = CASE WHEN sub_state = $4 OR request_id LIKE 'filler:%'
                                 THEN $5 ELSE $6 END,
                last_error = $2, tx_hash = NULL, submit_attempts = 0, last_submit_at = NULL,
                first_broadcast_at = NULL, resubmits = 0, requested_action = NULL,
                requested_by = NULL, next_resubmit_at = NULL, fencing_token = $3, updated_at = now()
          WHERE tx_id = $1 AND state IN ('ALLOCATED', 'TRACKING', 'STUCK') AND receipt IS NULL
         RETURNING state",
        tx_id,
        reason,
        token,
        SubState::Filler as _,
        SubState::FillerNotIncluded as _,
        SubState::NonceConsumedExternally as _,
    )
    .fetch_optional(ftx.conn())
    .await?;
    if matches!(state.as_deref(), Some("CANCELLED" | "REJECTED")) {
        super::completions::record(ftx.conn(), tx_id).await?;
    }
    Ok(())
}

/// STUCK with a reason, and its completion row, in one transaction. Still
/// tracked: it may confirm later. False when it was not TRACKING/ALLOCATED.
pub async fn mark_stuck(
    ftx: &mut FencedTx,
    tx_id: Uuid,
    sub_state: SubState,
    reason: &str,
) -> StoreResult<bool> {
    let token = ftx.token();
    let updated = sqlx::query!(
        "UPDATE managed_tx SET state = 'STUCK', sub_state = $2, last_error = $3,
                fencing_token = $4, updated_at = now()
          WHERE tx_id = $1 AND state IN ('ALLOCATED', 'TRACKING')",
        tx_id,
        sub_state as _,
        reason,
        token,
    )
    .execute(ftx.conn())
    .await?
    .rows_affected();
    if updated == 1 {
        super::completions::record(ftx.conn(), tx_id).await?;
    }
    Ok(updated == 1)
}

/// CONFIRMED (receipt status 1) or FAILED_FINAL (status 0) at finality —
/// or CANCELLED when the mined attempt is our cancel — with its completion
/// row, in one fenced transaction. `None` when the intent was not in a
/// finalisable state (already final, or its receipt was cleared).
pub async fn finalize(
    ftx: &mut FencedTx,
    tx_id: Uuid,
    succeeded: bool,
) -> StoreResult<Option<TxState>> {
    let token = ftx.token();
    let state = sqlx::query_scalar!(
        "UPDATE managed_tx m SET state = CASE
                    WHEN c.cancelled THEN 'CANCELLED'
                    WHEN $2 THEN 'CONFIRMED' ELSE 'FAILED_FINAL' END,
                -- A cancel mined after the intent's valid_until: the
                -- deadline's cancel (README \"Guardrails\"), and the feed says so.
                sub_state = CASE WHEN c.cancelled AND c.expired THEN $4 END,
                last_error = CASE WHEN c.cancelled AND c.expired
                    THEN 'expired: valid_until ' || (m.intent->>'valid_until') || ' passed before it was mined; cancelled'
                    ELSE m.last_error END,
                confirmed_at = now(), requested_action = NULL,
                next_resubmit_at = NULL, fencing_token = $3, updated_at = now()
           FROM (SELECT EXISTS (SELECT 1 FROM tx_attempt a, managed_tx t
                                   WHERE t.tx_id = $1 AND a.tx_id = $1 AND a.tx_hash = t.mined_tx_hash
                                     AND a.kind = 'cancel') AS cancelled,
                        COALESCE((SELECT (t.intent->>'valid_until')::timestamptz <= now()
                                    FROM managed_tx t WHERE t.tx_id = $1), false) AS expired) c
          WHERE m.tx_id = $1 AND m.state IN ('TRACKING', 'STUCK') AND m.receipt IS NOT NULL
         RETURNING m.state",
        tx_id,
        succeeded,
        token,
        SubState::Expired as _,
    )
    .fetch_optional(ftx.conn())
    .await?;
    let Some(state) = state else {
        return Ok(None);
    };
    super::completions::record(ftx.conn(), tx_id).await?;
    Ok(Some(
        state
            .parse::<TxState>()
            .map_err(|e| StoreError::Corrupt(e.to_string()))?,
    ))
}

/// What clearing a reorged-out receipt did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClearedReceipt {
    /// The bytes of the attempt that had been mined, to re-broadcast.
    pub raw: Vec<u8>,
    /// The intent had been reported final (CONFIRMED, FAILED_FINAL, or
    /// CANCELLED by a mined cancel): it is open again and the feed got a
    /// `REORGED_OUT` correction row.
    pub was_final: bool,
    /// Its intent asked for private sending: re-broadcast privately.
    pub private: bool,
}

/// Clears a receipt whose block was reorged out (only if it still names that
/// block: a newer receipt from the new chain is kept), back to TRACKING /
/// `reorged`. A final intent is re-opened too — its block is gone, so it
/// is not final — with a `REORGED_OUT` feed row, and its resubmit clock
/// starts again (its signed bytes are re-broadcast: same hash, same nonce,
/// so it cannot execute twice).
pub async fn clear_receipt(
    ftx: &mut FencedTx,
    tx_id: Uuid,
    orphaned_block: B256,
) -> StoreResult<Option<ClearedReceipt>> {
    let token = ftx.token();
    let row = sqlx::query!(
        r#"WITH cleared AS (
             UPDATE managed_tx m SET receipt = NULL, receipt_block_number = NULL, receipt_block_hash = NULL,
                    mined_tx_hash = NULL, sub_state = $4, fencing_token = $3, updated_at = now(),
                    state = CASE WHEN old.was_final THEN 'TRACKING' ELSE m.state END,
                    confirmed_at = NULL,
                    next_resubmit_at = CASE WHEN old.was_final THEN now() ELSE m.next_resubmit_at END,
                    first_broadcast_at = CASE WHEN old.was_final THEN now() ELSE m.first_broadcast_at END,
                    resubmits = CASE WHEN old.was_final THEN 0 ELSE m.resubmits END
               FROM (SELECT tx_id, mined_tx_hash, receipt_block_number,
                            state IN ('CONFIRMED', 'FAILED_FINAL', 'CANCELLED') AS was_final
                       FROM managed_tx WHERE tx_id = $1 FOR UPDATE) old
              WHERE m.tx_id = old.tx_id AND m.receipt_block_hash = $2
                AND m.state IN ('TRACKING', 'STUCK', 'CONFIRMED', 'FAILED_FINAL', 'CANCELLED')
          RETURNING old.mined_tx_hash, old.receipt_block_number, old.was_final,
                    COALESCE((m.intent->>'private')::boolean, false) AS private),
         -- Its fees count at their reservation again until a new receipt.
         untrued AS (
             UPDATE spend_ledger s SET fees_paid = NULL FROM cleared c WHERE s.tx_id = $1),
         correction AS (
             INSERT INTO tx_completion (tx_id, chain_id, submitter, request_id, state,
                                        tx_hash, block_number, nonce, reason)
             SELECT m.tx_id, m.chain_id, m.submitter, m.request_id, 'REORGED_OUT',
                    c.mined_tx_hash, c.receipt_block_number, m.nonce,
                    'block ' || c.receipt_block_number || ' (' || $2
                        || ') left the canonical chain after the transaction was reported final; tracked again'
               FROM managed_tx m JOIN cleared c ON c.was_final WHERE m.tx_id = $1
             RETURNING 1)
         SELECT a.raw_tx AS "raw_tx!", c.was_final AS "was_final!", c.private AS "private!"
           FROM tx_attempt a JOIN cleared c ON a.tx_id = $1 AND a.tx_hash = c.mined_tx_hash"#,
        tx_id,
        format!("{orphaned_block:#x}"),
        token,
        SubState::Reorged as _,
    )
    .fetch_optional(ftx.conn())
    .await?
    .map(|row| (row.raw_tx, row.was_final, row.private));
    let Some((raw, was_final, private)) = row else {
        return Ok(None);
    };
    if was_final {
        let chain_id = ftx.submitter().chain_id;
        super::completions::notify_durably(ftx.conn(), chain_id).await?;
    }
    Ok(Some(ClearedReceipt {
        raw,
        was_final,
        private,
    }))
}

/// Every attempt hash at the current nonce of the submitter's open intents:
/// what a new leader puts in the receipt index.
pub async fn open_attempt_hashes(
    pool: &PgPool,
    key: SubmitterKey,
) -> StoreResult<Vec<(Uuid, B256)>> {
    let rows = sqlx::query!(
        "SELECT a.tx_id, a.tx_hash FROM tx_attempt a JOIN managed_tx m ON m.tx_id = a.tx_id
          WHERE m.chain_id = $1 AND m.submitter = $2 AND a.nonce = m.nonce
            AND m.state IN ('ALLOCATED', 'TRACKING', 'STUCK') AND m.phase = 1",
        key.chain_id as _,
        key.address_hex(),
    )
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|r| Ok((r.tx_id, stored_hash(&r.tx_hash)?)))
        .collect()
}

/// Attempts (intent, hash) of *other* intents of the submitter signed at
/// `nonce`.
pub async fn other_attempts_at_nonce(
    pool: &PgPool,
    key: SubmitterKey,
    nonce: u64,
    except: Uuid,
) -> StoreResult<Vec<(Uuid, B256)>> {
    let rows = sqlx::query!(
        "SELECT a.tx_id, a.tx_hash FROM tx_attempt a JOIN managed_tx m ON m.tx_id = a.tx_id
          WHERE m.chain_id = $1 AND m.submitter = $2 AND a.nonce = $3 AND a.tx_id <> $4",
        key.chain_id as _,
        key.address_hex(),
        i64::try_from(nonce).unwrap_or(i64::MAX),
        except,
    )
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|r| Ok((r.tx_id, stored_hash(&r.tx_hash)?)))
        .collect()
}

/// A REJECTED intent whose nonce was released is mined after all (its bytes
/// were in some pool): it takes its nonce back and becomes TRACKING with the
/// receipt, so finality makes it CONFIRMED (or FAILED_FINAL) with a second
/// completion row. True when it was such an intent.
pub async fn revive_released(
    ftx: &mut FencedTx,
    tx_id: Uuid,
    nonce: u64,
    mined: &MinedReceipt,
) -> StoreResult<bool> {
    let token = ftx.token();
    let revived = sqlx::query!(
        "WITH revived AS (
             UPDATE managed_tx SET state = 'TRACKING', sub_state = $8, nonce = $2,
                    mined_tx_hash = $3, receipt = $4, receipt_block_number = $5, receipt_block_hash = $6,
                    last_error = 'mined after it was rejected: its bytes were in a pool after all',
                    confirmed_at = NULL, next_resubmit_at = NULL, retry_at = NULL,
                    fencing_token = $7, updated_at = now()
              WHERE tx_id = $1 AND state = 'REJECTED' AND nonce IS NULL
             RETURNING tx_id),
         trued_up AS (
             UPDATE spend_ledger s SET fees_paid = $9::text::numeric
               FROM revived WHERE s.tx_id = revived.tx_id AND $9::text IS NOT NULL)
         SELECT count(*) AS \"revived!\" FROM revived",
        tx_id,
        i64::try_from(nonce).unwrap_or(i64::MAX),
        format!("{:#x}", mined.tx_hash),
        &mined.receipt,
        i64::try_from(mined.block_number).unwrap_or(i64::MAX),
        format!("{:#x}", mined.block_hash),
        token,
        SubState::Mined as _,
        paid_fees(&mined.receipt).map(|paid| paid.to_string()),
    )
    .fetch_one(ftx.conn())
    .await?;
    Ok(revived.revived == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paid_fees_are_gas_used_times_effective_price_plus_an_l1_fee() {
        let l1 = serde_json::json!({"gasUsed": "0x5208", "effectiveGasPrice": "0x3b9aca00"});
        assert_eq!(paid_fees(&l1), Some(U256::from(21_000u64 * 1_000_000_000)));
        let op = serde_json::json!({"gasUsed": "0x5208", "effectiveGasPrice": "0x1",
                                    "l1Fee": "0x10"});
        assert_eq!(paid_fees(&op), Some(U256::from(21_000u64 + 16)));
        let null_l1 = serde_json::json!({"gasUsed": "0x1", "effectiveGasPrice": "0x2",
                                         "l1Fee": null});
        assert_eq!(paid_fees(&null_l1), Some(U256::from(2u8)));
        // Unreadable: the reservation keeps counting.
        assert_eq!(paid_fees(&serde_json::json!({"gasUsed": "0x1"})), None);
        let bad_l1 = serde_json::json!({"gasUsed": "0x1", "effectiveGasPrice": "0x2",
                                        "l1Fee": "lots"});
        assert_eq!(paid_fees(&bad_l1), None);
    }
}
