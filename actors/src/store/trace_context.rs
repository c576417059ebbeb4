//! Reading intents' stored trace contexts (`managed_tx.trace_context`),
//! for the steps that continue an intent's trace on another node.

use std::collections::HashMap;

use sqlx::PgPool;
use uuid::Uuid;

use super::StoreResult;
use crate::{domain::TraceParent, intent_trace};

/// The stored contexts of `tx_ids` that are sampled: from this node's
/// memory, the rest from the database in one read. Empty while traces are
/// off; a failed read costs spans, never the caller's work.
pub async fn parents(pool: &PgPool, tx_ids: &[Uuid]) -> HashMap<Uuid, TraceParent> {
    let mut found = HashMap::new();
    if !intent_trace::enabled() || tx_ids.is_empty() {
        return found;
    }
    let mut missing = Vec::new();
    for tx_id in tx_ids {
        match intent_trace::remembered(tx_id) {
            Some(parent) => {
                found.insert(*tx_id, parent);
            }
            None => missing.push(*tx_id),
        }
    }
    if missing.is_empty() {
        return found;
    }
    match load(pool, &missing).await {
        Ok(rows) => {
            for (tx_id, text) in rows {
                if let Some(parent) = TraceParent::parse(&text) {
                    intent_trace::remember(tx_id, parent);
                    found.insert(tx_id, parent);
                }
            }
        }
        Err(err) => {
            tracing::debug!(target: "txmgr::trace", error = %err, "trace contexts not read; spans skipped");
        }
    }
    found
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn nothing_is_looked_up_while_traces_are_off() {
        // A pool that never connects: a read would fail, not hang.
        let pool = sqlx::postgres::PgPoolOptions::new()
            .connect_lazy("postgres://nobody@127.0.0.1:1/none")
            .expect("lazy pool");
        assert!(parents(&pool, &[Uuid::now_v7()]).await.is_empty());
    }
}
