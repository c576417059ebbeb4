//! How long the spend ledger keeps its rows (README "Guardrails"): as long
//! as the longest spend window any node of the cluster has configured.
//!
//! Each node registers its longest window (`spend_ledger_horizon`, one row
//! per node id) at start and around every reload; the pruner, which every
//! node runs, deletes only rows older than the longest registered window
//! plus [`MARGIN`]. So a node with short windows, or none, never shortens
//! another node's: whichever node leads a submitter counts every row its
//! own window covers. Nothing here depends on `feed.retain`.

use std::time::Duration;

use sqlx::PgPool;

use super::{millis, StoreResult};

/// Ledger rows looked at per prune batch.
pub const PRUNE_BATCH: i64 = 1_000;

/// Kept beyond the longest window: an allocation that began summing its
/// window a moment before a prune still finds every row it counts.
pub const MARGIN: Duration = Duration::from_secs(60);

/// Records `window` as the longest spend window `node_id` runs (zero: none),
/// replacing what it registered before.
pub async fn register(pool: &PgPool, node_id: &str, window: Duration) -> StoreResult<()> {
    sqlx::query!(
        "INSERT INTO spend_ledger_horizon (node_id, window_ms, updated_at)
         VALUES ($1, $2, now())
         ON CONFLICT (node_id) DO UPDATE
            SET window_ms = EXCLUDED.window_ms, updated_at = now()",
        node_id,
        millis(window),
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// The longest window any node has registered (`None`: no node has).
pub async fn horizon(pool: &PgPool) -> StoreResult<Option<Duration>> {
    let longest = sqlx::query_scalar!("SELECT max(window_ms) FROM spend_ledger_horizon")
        .fetch_one(pool)
        .await?;
    Ok(longest.map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0))))
}

/// Deletes one batch of ledger rows older than the longest registered
/// window plus [`MARGIN`] (none while no node has registered); returns how
/// many. Fewer than [`PRUNE_BATCH`] means none is left.
pub async fn prune_batch(pool: &PgPool) -> StoreResult<u64> {
    let deleted = sqlx::query!(
        "DELETE FROM spend_ledger WHERE tx_id IN (
             SELECT tx_id FROM spend_ledger
              WHERE at < now() - ((SELECT max(window_ms) FROM spend_ledger_horizon) + $1::bigint)
                                 * interval '1 millisecond'
              LIMIT $2)",
        millis(MARGIN),
        PRUNE_BATCH,
    )
    .execute(pool)
    .await?;
    Ok(deleted.rows_affected())
}

/// Batches of [`prune_batch`] until one comes back short or `max_batches`
/// ran (one round stays bounded); returns the rows deleted.
pub async fn prune(pool: &PgPool, max_batches: u32) -> StoreResult<u64> {
    let mut rows = 0;
    for _ in 0..max_batches {
        let deleted = prune_batch(pool).await?;
        rows += deleted;
        if deleted < PRUNE_BATCH as u64 {
            break;
        }
    }
    Ok(rows)
}
