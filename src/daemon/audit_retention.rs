//! `feed.audit_retain`: old `ops_audit` rows leave in bounded batches (see
//! `txmgr_actors::store::audit::prune_batch`), so the actions clients may
//! repeat (cancel, re-broadcast) cannot grow the table without end.

use std::time::Duration;

use sqlx::PgPool;
use txmgr_actors::store::audit::{prune_batch, PRUNE_BATCH};

/// Batches per round at most (each looks at [`PRUNE_BATCH`] rows), so one
/// round stays bounded however far behind the table is.
const MAX_BATCHES: u32 = 100;

/// Deletes `ops_audit` rows older than `retain` (never an open intent's)
/// every `every`, starting at once. Every node runs it: the deletes are
/// idempotent.
pub async fn audit_retention_loop(pool: PgPool, retain: Duration, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let mut rows = 0u64;
        for _ in 0..MAX_BATCHES {
            match prune_batch(&pool, retain).await {
                Ok(deleted) => {
                    rows += deleted;
                    if deleted < PRUNE_BATCH as u64 {
                        break;
                    }
                }
                Err(err) => {
                    tracing::warn!(target: "txmgr::audit", error = %err, "audit retention batch failed");
                    break;
                }
            }
        }
        if rows > 0 {
            tracing::info!(target: "txmgr::audit", rows, "audit retention: old rows deleted");
        }
    }
}
