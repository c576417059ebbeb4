//! Cluster membership rows (`txmgr_node`): who is running, heartbeated on the
//! database clock. A node id names one live process at a time: the row
//! carries the instance id of the process that registered it, and only that
//! process heartbeats or removes it.

use std::time::Duration;

use sqlx::PgPool;

use super::{millis, LeaseOwner, StoreResult};

/// What [`register`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registration {
    /// The row names this process now.
    Registered,
    /// Another process holds the node id with a heartbeat younger than the
    /// liveness window: it may be alive (see `cluster::claim_node_id`).
    Held(NodeHolder),
}

/// The process that holds a node id, as another one sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeHolder {
    /// Its instance id.
    pub instance: String,
    /// Where its HTTP API listens.
    pub http_addr: Option<String>,
    /// Its last heartbeat in microseconds since the epoch (database clock):
    /// a later look that finds a larger value proves the holder alive.
    pub heartbeat_at_us: i64,
    /// Time since that heartbeat (database clock).
    pub heartbeat_age: Duration,
}

/// What [`heartbeat`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heartbeat {
    /// Refreshed.
    Beat,
    /// The row is gone (an operator removed it): register again.
    Missing,
    /// Another process registered this node id after this one's heartbeat
    /// lapsed (it was frozen or cut off longer than the liveness window).
    Superseded(NodeHolder),
}

/// The build a node runs, recorded in its row for the ops views.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeBuild {
    /// The release (`0.2.0`).
    pub version: &'static str,
    /// The commit it was built from, or `unknown`.
    pub commit: &'static str,
    /// The newest migration it knows.
    pub schema_version: i64,
}

/// Registers this process under its node id, unless another process holds
/// it with a heartbeat younger than `liveness`. One statement: of processes
/// registering the same node id at once, exactly one wins. A holder whose
/// heartbeat is older (it crashed, or was frozen) is replaced.
pub async fn register(
    pool: &PgPool,
    owner: &LeaseOwner,
    http_addr: &str,
    build: &NodeBuild,
    liveness: Duration,
) -> StoreResult<Registration> {
    // Up to three rounds: the holder's row can vanish (graceful exit)
    // between the refused upsert and the read.
    for _ in 0..3 {
        let registered = sqlx::query_scalar!(
            "INSERT INTO txmgr_node (node_id, instance, started_at, heartbeat_at, http_addr, version,
                                     build_commit, schema_version)
             VALUES ($1, $2, now(), now(), $3, $4, $6, $7)
             ON CONFLICT (node_id) DO UPDATE
                SET started_at = CASE WHEN txmgr_node.instance = EXCLUDED.instance
                                      THEN txmgr_node.started_at ELSE now() END,
                    instance = EXCLUDED.instance, heartbeat_at = now(),
                    http_addr = EXCLUDED.http_addr, version = EXCLUDED.version,
                    build_commit = EXCLUDED.build_commit, schema_version = EXCLUDED.schema_version
              WHERE txmgr_node.instance = EXCLUDED.instance
                 OR txmgr_node.heartbeat_at <= now() - $5::bigint * interval '1 millisecond'
             RETURNING node_id",
            &*owner.node_id,
            &*owner.instance,
            http_addr,
            build.version,
            millis(liveness),
            build.commit,
            build.schema_version,
        )
        .fetch_optional(pool)
        .await?;
        if registered.is_some() {
            return Ok(Registration::Registered);
        }
        if let Some(holder) = holder(pool, &owner.node_id).await? {
            return Ok(Registration::Held(holder));
        }
    }
    Err(super::StoreError::Corrupt(format!(
        "node {} keeps appearing and vanishing while registering",
        owner.node_id
    )))
}

struct HolderRow {
    instance: String,
    http_addr: Option<String>,
    heartbeat_at_us: i64,
    heartbeat_age_ms: i64,
}

/// The process holding `node_id`, if any.
pub async fn holder(pool: &PgPool, node_id: &str) -> StoreResult<Option<NodeHolder>> {
    let row = sqlx::query_as!(
        HolderRow,
        r#"SELECT instance, http_addr,
                (EXTRACT(EPOCH FROM heartbeat_at) * 1000000)::bigint AS "heartbeat_at_us!",
                GREATEST(0, (EXTRACT(EPOCH FROM (now() - heartbeat_at)) * 1000)::bigint)
                    AS "heartbeat_age_ms!"
           FROM txmgr_node WHERE node_id = $1"#,
        node_id,
    )
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|row| NodeHolder {
        instance: row.instance,
        http_addr: row.http_addr,
        heartbeat_at_us: row.heartbeat_at_us,
        heartbeat_age: age(row.heartbeat_age_ms),
    }))
}

/// A non-negative millisecond count from the database as a duration.
fn age(ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// Refreshes this process's heartbeat, if the row still names it.
pub async fn heartbeat(pool: &PgPool, owner: &LeaseOwner) -> StoreResult<Heartbeat> {
    let result = sqlx::query!(
        "UPDATE txmgr_node SET heartbeat_at = now() WHERE node_id = $1 AND instance = $2",
        &*owner.node_id,
        &*owner.instance,
    )
    .execute(pool)
    .await?;
    if result.rows_affected() == 1 {
        return Ok(Heartbeat::Beat);
    }
    Ok(match holder(pool, &owner.node_id).await? {
        Some(holder) if holder.instance != *owner.instance => Heartbeat::Superseded(holder),
        // Gone, or (in a race with our own re-registration) ours again.
        _ => Heartbeat::Missing,
    })
}

/// Removes this process's row on graceful shutdown (never a successor's).
pub async fn deregister(pool: &PgPool, owner: &LeaseOwner) -> StoreResult<()> {
    sqlx::query!(
        "DELETE FROM txmgr_node WHERE node_id = $1 AND instance = $2",
        &*owner.node_id,
        &*owner.instance,
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// A node row as the cluster view shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRow {
    /// The node's id.
    pub node_id: String,
    /// The instance id of the process registered under it.
    pub instance: String,
    /// Where its HTTP API listens.
    pub http_addr: Option<String>,
    /// The txmgr version it runs.
    pub version: String,
    /// The commit it was built from (`None`: a node before 0.2.0).
    pub commit: Option<String>,
    /// The newest migration it knows (`None`: a node before 0.2.0).
    pub schema_version: Option<i64>,
    /// Milliseconds since its last heartbeat, by the database clock.
    pub heartbeat_age: Duration,
    /// Heartbeat younger than the liveness window.
    pub alive: bool,
}

struct ListedNode {
    node_id: String,
    instance: String,
    http_addr: Option<String>,
    version: String,
    build_commit: Option<String>,
    schema_version: Option<i64>,
    heartbeat_age_ms: i64,
    alive: bool,
}

/// Lists every node, alive meaning a heartbeat within `liveness` (database time).
pub async fn list(pool: &PgPool, liveness: Duration) -> StoreResult<Vec<NodeRow>> {
    let rows = sqlx::query_as!(
        ListedNode,
        r#"SELECT node_id, instance, http_addr, version, build_commit, schema_version,
                GREATEST(0, (EXTRACT(EPOCH FROM (now() - heartbeat_at)) * 1000)::bigint)
                    AS "heartbeat_age_ms!",
                heartbeat_at > now() - $1::bigint * interval '1 millisecond' AS "alive!"
           FROM txmgr_node ORDER BY node_id"#,
        millis(liveness),
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| NodeRow {
            node_id: row.node_id,
            instance: row.instance,
            http_addr: row.http_addr,
            version: row.version,
            commit: row.build_commit,
            schema_version: row.schema_version,
            heartbeat_age: age(row.heartbeat_age_ms),
            alive: row.alive,
        })
        .collect())
}

/// A node with a live heartbeat, as lease balancing sees it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct LiveNode {
    /// The node's id.
    pub node_id: String,
    /// Up for at least the settle time: it may receive leases.
    pub settled: bool,
}

/// The nodes with a heartbeat within `liveness`, each with whether it
/// started at least `settle` ago (database time).
pub async fn live(
    pool: &PgPool,
    liveness: Duration,
    settle: Duration,
) -> StoreResult<Vec<LiveNode>> {
    Ok(sqlx::query_as!(
        LiveNode,
        r#"SELECT node_id, started_at <= now() - $2::bigint * interval '1 millisecond' AS "settled!"
           FROM txmgr_node WHERE heartbeat_at > now() - $1::bigint * interval '1 millisecond'"#,
        millis(liveness),
        millis(settle),
    )
    .fetch_all(pool)
    .await?)
}
