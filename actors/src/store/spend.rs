//! Reads of the spend ledger for the ops view and the gauges (README
//! "Guardrails"): per submitter with a spend limit, the value drawn and the
//! fees counted in its window, and the intents waiting for room. The writes are the
//! allocation's (`group::spend`), the pruning `spend_retention`'s.

use std::time::Duration;

use alloy::primitives::Address;
use sqlx::PgPool;

use super::{millis, StoreError, StoreResult};
use crate::domain::{ChainId, SubState};

/// One submitter's spend window now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpendWindow {
    /// The submitter.
    pub address: Address,
    /// Wei of `value` drawn in the window (decimal).
    pub spent_wei: String,
    /// Wei of fees counted in the window (decimal): paid, or reserved
    /// (worst case) for intents without a receipt.
    pub fees_spent_wei: String,
    /// The part of `fees_spent_wei` still reserved, not yet trued up.
    pub fees_reserved_wei: String,
    /// Intents QUEUED waiting for room.
    pub waiting: i64,
}

/// The windows of `limits` (submitter, window) on `chain_id`, in one query.
pub async fn windows(
    pool: &PgPool,
    chain_id: ChainId,
    limits: &[(Address, Duration)],
) -> StoreResult<Vec<SpendWindow>> {
    if limits.is_empty() {
        return Ok(Vec::new());
    }
    let submitters: Vec<String> = limits.iter().map(|(a, _)| format!("{a:#x}")).collect();
    let windows: Vec<i64> = limits.iter().map(|(_, w)| millis(*w)).collect();
    let rows = sqlx::query!(
        r#"SELECT r.submitter AS "submitter!", w.spent AS "spent!", w.fees AS "fees!",
                  w.reserved AS "reserved!",
                  (SELECT count(*) FROM managed_tx m
                    WHERE m.chain_id = $1 AND m.submitter = r.submitter
                      AND m.state = 'QUEUED' AND m.phase = 0 AND m.sub_state = $4) AS "waiting!"
             FROM UNNEST($2::text[], $3::bigint[]) AS r(submitter, window_ms)
             CROSS JOIN LATERAL (
                 SELECT COALESCE(sum(l.value), 0)::text AS spent,
                        COALESCE(sum(COALESCE(l.fees_paid, l.fees_reserved)), 0)::text AS fees,
                        COALESCE(sum(l.fees_reserved) FILTER (WHERE l.fees_paid IS NULL), 0)::text
                            AS reserved
                   FROM spend_ledger l
                  WHERE l.chain_id = $1 AND l.submitter = r.submitter
                    AND l.at > now() - r.window_ms * interval '1 millisecond') w"#,
        chain_id as _,
        &submitters,
        &windows,
        SubState::SpendLimited as _,
    )
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|row| {
            Ok(SpendWindow {
                address: row.submitter.parse().map_err(|_| {
                    StoreError::Corrupt(format!("submitter {:?} is not an address", row.submitter))
                })?,
                spent_wei: row.spent,
                fees_spent_wei: row.fees,
                fees_reserved_wei: row.reserved,
                waiting: row.waiting,
            })
        })
        .collect()
}
