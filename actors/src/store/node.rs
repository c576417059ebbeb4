//! Cluster membership rows (`txmgr_node`): who is running, heartbeated on the
//! database clock.

use std::time::Duration;

use sqlx::PgPool;

use super::{millis, StoreResult};

/// Registers (or re-registers after a restart) this node.
pub async fn register(
    pool: &PgPool,
    node_id: &str,
    http_addr: &str,
    version: &str,
) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO txmgr_node (node_id, started_at, heartbeat_at, http_addr, version)
         VALUES ($1, now(), now(), $2, $3)
         ON CONFLICT (node_id) DO UPDATE
            SET started_at = now(), heartbeat_at = now(), http_addr = $2, version = $3",
    )
    .bind(node_id)
    .bind(http_addr)
    .bind(version)
    .execute(pool)
    .await?;
    Ok(())
}

/// Refreshes this node's heartbeat. Returns false when the row is gone (an
/// operator removed it): the caller registers again.
pub async fn heartbeat(pool: &PgPool, node_id: &str) -> StoreResult<bool> {
    let result = sqlx::query("UPDATE txmgr_node SET heartbeat_at = now() WHERE node_id = $1")
        .bind(node_id)
        .execute(pool)
        .await?;
    Ok(result.rows_affected() == 1)
}

/// Removes this node on graceful shutdown.
pub async fn deregister(pool: &PgPool, node_id: &str) -> StoreResult<()> {
    sqlx::query("DELETE FROM txmgr_node WHERE node_id = $1")
        .bind(node_id)
        .execute(pool)
        .await?;
    Ok(())
}

/// A node row as the cluster view shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRow {
    /// The node's id.
    pub node_id: String,
    /// Where its HTTP API listens.
    pub http_addr: Option<String>,
    /// The txmgr version it runs.
    pub version: String,
    /// Milliseconds since its last heartbeat, by the database clock.
    pub heartbeat_age: Duration,
    /// Heartbeat younger than the liveness window.
    pub alive: bool,
}

/// Lists every node, alive meaning a heartbeat within `liveness` (database time).
pub async fn list(pool: &PgPool, liveness: Duration) -> StoreResult<Vec<NodeRow>> {
    let rows: Vec<(String, Option<String>, String, i64, bool)> = sqlx::query_as(
        "SELECT node_id, http_addr, version,
                GREATEST(0, (EXTRACT(EPOCH FROM (now() - heartbeat_at)) * 1000)::bigint),
                heartbeat_at > now() - $1 * interval '1 millisecond'
           FROM txmgr_node ORDER BY node_id",
    )
    .bind(millis(liveness))
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(node_id, http_addr, version, age, alive)| NodeRow {
            node_id,
            http_addr,
            version,
            heartbeat_age: Duration::from_millis(u64::try_from(age).unwrap_or(0)),
            alive,
        })
        .collect())
}
