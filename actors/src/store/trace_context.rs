//! Reading intents' stored trace contexts (`managed_tx.trace_context`),
//! for the steps that continue an intent's trace on another node.

use sqlx::PgPool;
use uuid::Uuid;

use super::StoreResult;

/// `(tx_id, traceparent)` of those of `tx_ids` that have a stored context.
pub async fn load(pool: &PgPool, tx_ids: &[Uuid]) -> StoreResult<Vec<(Uuid, String)>> {
    let rows = sqlx::query!(
        r#"SELECT tx_id, trace_context AS "trace_context!" FROM managed_tx
            WHERE tx_id = ANY($1) AND trace_context IS NOT NULL"#,
        tx_ids,
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| (row.tx_id, row.trace_context))
        .collect())
}
