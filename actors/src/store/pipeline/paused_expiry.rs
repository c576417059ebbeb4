//! Deadlines while a submitter is paused (README "Guardrails"): its QUEUED
//! intents are not read by the allocation, so its leader's sweep rejects
//! those whose `valid_until` passed (no nonce was drawn), as the
//! allocation would have, and says when the next one passes.

use std::time::Duration;

use super::expire_on;
use crate::store::{FencedTx, StoreResult};

/// What [`expire_queued`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PausedExpiry {
    /// QUEUED intents REJECTED `expired` now.
    pub expired: usize,
    /// Until the next QUEUED intent's deadline, if one has any.
    pub next_deadline: Option<Duration>,
}

/// REJECTS `expired` (with their completion rows) the submitter's QUEUED
/// intents past their `valid_until` by the database clock, in the fenced
/// transaction `ftx`; reads how long until the next QUEUED deadline.
pub async fn expire_queued(ftx: &mut FencedTx) -> StoreResult<PausedExpiry> {
    let submitter = ftx.submitter();
    let token = ftx.token();
    let row = sqlx::query!(
        r#"SELECT COALESCE(array_agg(tx_id) FILTER (WHERE until <= now()), '{}') AS "due!",
                  (EXTRACT(EPOCH FROM (min(until) FILTER (WHERE until > now()) - now())) * 1000)::bigint
                      AS "next_ms?"
             FROM (SELECT tx_id, (intent->>'valid_until')::timestamptz AS until
                     FROM managed_tx
                    WHERE chain_id = $1 AND submitter = $2 AND state = 'QUEUED' AND phase = 0
                      AND intent ? 'valid_until') q"#,
        submitter.chain_id as _,
        submitter.address_hex(),
    )
    .fetch_one(ftx.conn())
    .await?;
    if !row.due.is_empty() {
        expire_on(ftx.conn(), submitter, token, &row.due).await?;
    }
    Ok(PausedExpiry {
        expired: row.due.len(),
        next_deadline: row
            .next_ms
            .map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0))),
    })
}
