//! Listing a submitter's transactions page by page (keyset pagination on
//! `ingress_seq`, within a byte budget computed by the server).

use alloy::primitives::Address;
use sqlx::PgPool;

use super::{Cursor, TxRow, TxView};
use crate::{
    domain::{ChainId, SubState, SubmitterKey, TxState},
    store::StoreResult,
};

/// One page of the submitter's transactions in acceptance order, optionally
/// only those in `state`, starting after `after`. Keyset pagination on
/// `ingress_seq` (index `managed_tx_listing_idx`): pages stay stable while new
/// intents arrive, and a page costs the same however deep it is. Returns the
/// cursor of the next page, or `None` when this page is the last.
pub async fn list(
    pool: &PgPool,
    submitter: SubmitterKey,
    state: Option<TxState>,
    limit: u32,
    after: Option<Cursor>,
) -> StoreResult<(Vec<TxView>, Option<Cursor>)> {
    let chain_ids = [submitter.chain_id];
    let (rows, more) = list_within(
        pool,
        &chain_ids,
        submitter.address,
        state,
        limit,
        after,
        usize::MAX,
    )
    .await?;
    let next = if more {
        rows.last().map(|(cursor, _)| *cursor)
    } else {
        None
    };
    Ok((rows.into_iter().map(|(_, view)| view).collect(), next))
}

/// Like [`list`], but the page also ends once its rows are estimated to
/// weigh `max_bytes` (it always holds at least one row), and each row comes
/// with its cursor, so the caller can end the page earlier still. The flag
/// says whether rows follow the returned ones. `chain_ids` are the chains
/// listed (in acceptance order across them).
pub async fn list_within(
    pool: &PgPool,
    chain_ids: &[ChainId],
    address: Address,
    state: Option<TxState>,
    limit: u32,
    after: Option<Cursor>,
    max_bytes: usize,
) -> StoreResult<(Vec<(Cursor, TxView)>, bool)> {
    let limit = usize::try_from(limit.max(1)).unwrap_or(usize::MAX);
    // One row more than asked tells whether another page exists.
    let fetch = i64::try_from(limit).unwrap_or(i64::MAX).saturating_add(1);
    // Innermost: the page by keyset, each row with what it is estimated to
    // weigh as JSON — the columns that vary (`data` dominates: up to twice
    // `http.data_limit_bytes` in hex) plus a generous allowance for the
    // fixed fields; then a running total; outermost: the rows that start
    // within the budget. Computed by the server, so rows beyond a page's
    // budget are never sent to this process.
    let mut rows = sqlx::query!(
        r#"SELECT w.chain_id AS "chain_id!: ChainId", w.tx_id AS "tx_id!", w.submitter AS "submitter!", w.request_id AS "request_id?",
                  w.state AS "state!", w.sub_state AS "sub_state?: SubState", w.nonce AS "nonce?",
                  w.tx_hash AS "tx_hash?", w.mined_tx_hash AS "mined_tx_hash?", w.intent AS "intent!",
                  w.last_error AS "last_error?", w.receipt AS "receipt?",
                  w.receipt_block_number AS "receipt_block_number?",
                  w.receipt_block_hash AS "receipt_block_hash?", w.created_at AS "created_at!",
                  w.updated_at AS "updated_at!", w.confirmed_at AS "confirmed_at?",
                  w.ingress_seq AS "ingress_seq!", w.attempts AS "attempts!", w.fetched AS "fetched!"
             FROM (
               SELECT p.*, count(*) OVER () AS fetched,
                      sum(p.row_bytes) OVER (ORDER BY p.ingress_seq) - p.row_bytes AS bytes_before
                 FROM (SELECT m.chain_id, m.tx_id, m.submitter, m.request_id, m.state,
                              CASE WHEN m.state = 'QUEUED' AND EXISTS (
                                    SELECT 1 FROM submitter_pause p
                                     WHERE p.chain_id = m.chain_id AND p.submitter = m.submitter)
                                THEN 'paused' ELSE m.sub_state END AS sub_state, m.nonce,
                              m.tx_hash, m.mined_tx_hash, m.intent, m.last_error, m.receipt,
                              m.receipt_block_number, m.receipt_block_hash, m.created_at,
                              m.updated_at, m.confirmed_at, m.ingress_seq,
                              (SELECT count(*) FROM tx_attempt a WHERE a.tx_id = m.tx_id) AS attempts,
                              (1024 + octet_length(coalesce(m.intent->>'data', ''))
                                + 2 * octet_length(coalesce(m.request_id, ''))
                                + 2 * octet_length(coalesce(m.last_error, ''))) AS row_bytes
                         FROM managed_tx m
                        WHERE m.chain_id = ANY($1) AND m.submitter = $2
                          AND ($3::text IS NULL OR m.state = $3)
                          AND ($4::bigint IS NULL OR m.ingress_seq > $4)
                        ORDER BY m.ingress_seq
                        LIMIT $5) p) w
            WHERE w.bytes_before < $6
            ORDER BY w.ingress_seq"#,
        chain_ids as _,
        format!("{address:#x}"),
        state.map(TxState::as_str),
        after.map(|cursor| cursor.0),
        fetch,
        i64::try_from(max_bytes.max(1)).unwrap_or(i64::MAX),
    )
    .fetch_all(pool)
    .await?;
    let fetched = rows
        .first()
        .map_or(0, |r| usize::try_from(r.fetched).unwrap_or(usize::MAX));
    rows.truncate(limit);
    let more = fetched > rows.len();
    let items = rows
        .into_iter()
        .map(|r| {
            let row = TxRow {
                chain_id: r.chain_id,
                tx_id: r.tx_id,
                submitter: r.submitter,
                request_id: r.request_id,
                state: r.state,
                sub_state: r.sub_state,
                nonce: r.nonce,
                tx_hash: r.tx_hash,
                mined_tx_hash: r.mined_tx_hash,
                intent: r.intent,
                last_error: r.last_error,
                receipt: r.receipt,
                receipt_block_number: r.receipt_block_number,
                receipt_block_hash: r.receipt_block_hash,
                created_at: r.created_at,
                updated_at: r.updated_at,
                confirmed_at: r.confirmed_at,
                ingress_seq: r.ingress_seq,
                attempts: r.attempts,
            };
            let cursor = Cursor(row.ingress_seq);
            row.into_view().map(|view| (cursor, view))
        })
        .collect::<StoreResult<Vec<_>>>()?;
    Ok((items, more))
}
