//! What the finality workers read (README "Receipts, finality and reorgs"): mined intents that
//! are not final yet, and final ones a reorg reached under. Reads only; the
//! decisions go to the leaders, which write them fenced.

use alloy::primitives::{Address, B256};
use sqlx::{PgExecutor, PgPool};
use uuid::Uuid;

use super::{StoreError, StoreResult};
use crate::domain::ChainId;

/// A mined intent waiting for finality.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MinedIntent {
    /// The intent.
    pub tx_id: Uuid,
    /// Its submitter.
    pub submitter: Address,
    /// The block its receipt is in.
    pub block_number: u64,
    /// That block's hash, to check it is still canonical.
    pub block_hash: B256,
    /// The receipt's `status` as stored (`"0x1"` is success).
    pub status: Option<String>,
}

struct MinedRow {
    tx_id: Uuid,
    submitter: String,
    receipt_block_number: i64,
    receipt_block_hash: String,
    status: Option<String>,
}

impl MinedRow {
    fn into_intent(self) -> StoreResult<MinedIntent> {
        let corrupt = |what: &str| StoreError::Corrupt(format!("tx {}: {what}", self.tx_id));
        Ok(MinedIntent {
            tx_id: self.tx_id,
            submitter: self.submitter.parse().map_err(|_| corrupt("submitter"))?,
            block_number: u64::try_from(self.receipt_block_number)
                .map_err(|_| corrupt("negative block number"))?,
            block_hash: self
                .receipt_block_hash
                .parse()
                .map_err(|_| corrupt("block hash"))?,
            status: self.status,
        })
    }
}

/// The TRACKING or STUCK intents of `submitters` that have a receipt in a
/// block above `above` (`None`: any block). Read from the index of mined
/// in-flight intents (`managed_tx_mined_idx`), so the unmined ones in flight
/// are not read on every head.
pub async fn mined_not_final(
    conn: impl PgExecutor<'_>,
    chain_id: ChainId,
    submitters: &[Address],
    above: Option<u64>,
) -> StoreResult<Vec<MinedIntent>> {
    let submitters: Vec<String> = submitters.iter().map(|a| format!("{a:#x}")).collect();
    // The receipt columns are set together (`managed_tx_receipt_whole`).
    let rows = sqlx::query_as!(
        MinedRow,
        r#"SELECT tx_id, submitter, receipt_block_number AS "receipt_block_number!",
                receipt_block_hash AS "receipt_block_hash!", receipt->>'status' AS status
           FROM managed_tx
          WHERE chain_id = $1 AND submitter = ANY($2) AND state IN ('TRACKING', 'STUCK')
            AND phase = 1
            AND receipt IS NOT NULL AND ($3::bigint IS NULL OR receipt_block_number > $3)"#,
        chain_id as _,
        &submitters,
        above.map(block_db),
    )
    .fetch_all(conn)
    .await?;
    rows.into_iter().map(MinedRow::into_intent).collect()
}

/// The final intents (CONFIRMED, FAILED_FINAL, or CANCELLED by a mined
/// cancel) of `submitters` whose receipt is in a block above `fork`: a reorg
/// deeper than finality reached them, and their leaders re-open them.
pub async fn final_above(
    pool: &PgPool,
    chain_id: ChainId,
    submitters: &[Address],
    fork: u64,
) -> StoreResult<Vec<MinedIntent>> {
    let submitters: Vec<String> = submitters.iter().map(|a| format!("{a:#x}")).collect();
    let rows = sqlx::query_as!(
        MinedRow,
        r#"SELECT tx_id, submitter, receipt_block_number AS "receipt_block_number!",
                receipt_block_hash AS "receipt_block_hash!", receipt->>'status' AS status
           FROM managed_tx
          WHERE chain_id = $1 AND state IN ('CONFIRMED', 'FAILED_FINAL', 'CANCELLED') AND phase = 2
            AND receipt_block_number IS NOT NULL AND receipt_block_number > $3
            AND submitter = ANY($2)"#,
        chain_id as _,
        &submitters,
        block_db(fork),
    )
    .fetch_all(pool)
    .await?;
    rows.into_iter().map(MinedRow::into_intent).collect()
}

/// The final intents of one submitter whose nonce is at or above `nonce`
/// (the chain's latest nonce): when the chain's nonce is below a final
/// intent's, the block holding it is no longer canonical, or the endpoint
/// read lags. The caller tells the two apart by the block itself.
pub async fn final_from_nonce(
    pool: &PgPool,
    key: crate::domain::SubmitterKey,
    nonce: u64,
) -> StoreResult<Vec<MinedIntent>> {
    let rows = sqlx::query_as!(
        MinedRow,
        r#"SELECT tx_id, submitter, receipt_block_number AS "receipt_block_number!",
                receipt_block_hash AS "receipt_block_hash!", receipt->>'status' AS status
           FROM managed_tx
          WHERE chain_id = $1 AND submitter = $2 AND nonce >= $3
            AND state IN ('CONFIRMED', 'FAILED_FINAL', 'CANCELLED') AND receipt IS NOT NULL
          ORDER BY nonce LIMIT 1000"#,
        key.chain_id as _,
        key.address_hex(),
        i64::try_from(nonce).unwrap_or(i64::MAX),
    )
    .fetch_all(pool)
    .await?;
    rows.into_iter().map(MinedRow::into_intent).collect()
}

/// A block number as the `BIGINT` it is compared with. Stored block numbers
/// fit a `BIGINT`, so none is above one that does not: saturating keeps
/// "above" exact.
fn block_db(block: u64) -> i64 {
    i64::try_from(block).unwrap_or(i64::MAX)
}
