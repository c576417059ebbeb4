//! Feed retention (`feed.retain`, README "Completion feed"): completion rows
//! older than the retention period are deleted in bounded batches, except
//! those a webhook still has to deliver (after the cursor of any webhook
//! that moved within the period) and those a dead letter refers to.
//! Removed webhooks' cursor rows, untouched for the whole period, go too.
//!
//! Each batch looks at no more than [`BATCH`] of the oldest rows (by
//! `completed_at`, through its index), so a round costs the same however
//! large the feed is, even when nothing can be deleted.

use std::time::Duration;

use sqlx::PgPool;

use super::StoreResult;

/// Oldest rows looked at per batch.
pub const BATCH: i64 = 1_000;

/// What one round removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pruned {
    /// Completion rows deleted.
    pub rows: u64,
    /// Webhook cursor rows deleted (webhooks not delivered by any node for
    /// the whole period: removed from every configuration).
    pub webhooks: u64,
}

/// Deletes one batch of feed rows older than `retain`; returns how many.
/// A batch that deletes fewer than [`BATCH`] means the round is done.
pub async fn prune_batch(pool: &PgPool, retain: Duration) -> StoreResult<u64> {
    let retain_ms = i64::try_from(retain.as_millis()).unwrap_or(i64::MAX);
    let deleted = sqlx::query!(
        "WITH oldest AS (
             SELECT seq, xid, chain_id FROM tx_completion t
              WHERE completed_at < now() - make_interval(secs => $1::bigint::float8 / 1000)
                -- Kept for its dead letter; not a candidate, so a few kept
                -- rows cannot stall the rows behind them.
                AND NOT EXISTS (SELECT 1 FROM webhook_dead_letter d WHERE d.feed_seq = t.seq)
              ORDER BY completed_at LIMIT $2)
         DELETE FROM tx_completion c USING oldest o
          WHERE c.seq = o.seq
            -- Any live cursor protects a row, whatever its chain: one
            -- webhook's cursor covers every chain of its deployment.
            AND NOT EXISTS (
                SELECT 1 FROM webhook_cursor w
                 WHERE w.updated_at > now() - make_interval(secs => $1::bigint::float8 / 1000)
                   AND (o.xid, o.seq) > (w.cursor_xid, w.cursor_seq))",
        retain_ms,
        BATCH,
    )
    .execute(pool)
    .await?;
    Ok(deleted.rows_affected())
}

/// Deletes the cursor rows (and done markers) of webhooks no node has
/// touched for `retain`: they are configured nowhere any more, and their
/// frozen cursors would otherwise hold the feed and cost a lag count.
pub async fn prune_webhooks(pool: &PgPool, retain: Duration) -> StoreResult<u64> {
    let retain_ms = i64::try_from(retain.as_millis()).unwrap_or(i64::MAX);
    let mut tx = pool.begin().await?;
    let gone = sqlx::query!(
        "DELETE FROM webhook_cursor
          WHERE updated_at < now() - make_interval(secs => $1::bigint::float8 / 1000)
            AND expires_at < now() - make_interval(secs => $1::bigint::float8 / 1000)
         RETURNING chain_id, webhook",
        retain_ms,
    )
    .fetch_all(&mut *tx)
    .await?;
    for row in &gone {
        sqlx::query!(
            "DELETE FROM webhook_done WHERE chain_id = $1 AND webhook = $2",
            row.chain_id,
            row.webhook
        )
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(gone.len() as u64)
}

/// One round: stale webhooks, then batches of feed rows until a batch comes
/// back short (or `max_batches` ran, so one round stays bounded).
pub async fn prune(pool: &PgPool, retain: Duration, max_batches: u32) -> StoreResult<Pruned> {
    let mut pruned = Pruned {
        webhooks: prune_webhooks(pool, retain).await?,
        rows: 0,
    };
    for _ in 0..max_batches {
        let rows = prune_batch(pool, retain).await?;
        pruned.rows += rows;
        if rows < BATCH as u64 {
            break;
        }
    }
    Ok(pruned)
}
