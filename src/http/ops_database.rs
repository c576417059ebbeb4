//! `GET /v1/ops/database`: history retention's progress and the size of
//! every table (README "Data model and leases", "Operations"). The whole
//! cluster's data: an unscoped ops token only.

use axum::{extract::State, Json};
use chrono::{DateTime, Utc};
use serde::Serialize;
use txmgr_actors::store::{history_retention, table_stats};

use super::{
    auth::Caller,
    error::{ApiResult, ErrorResponse},
    AppState,
};

/// History retention's progress.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RetentionView {
    /// `history.retain` of the answering node in seconds (0: every intent
    /// is kept).
    pub retain_seconds: u64,
    /// The running pass's cutoff: intents created before it are being
    /// removed (null between passes).
    pub pass_cutoff: Option<DateTime<Utc>>,
    /// The cutoff of the last pass that reached its end: every removable
    /// intent created before it is gone, and a missing id older than it
    /// answers 404 `aged_out`.
    pub completed_cutoff: Option<DateTime<Utc>>,
    /// When that pass ended.
    pub completed_at: Option<DateTime<Utc>>,
    /// When the last round ran (any node).
    pub last_round_at: Option<DateTime<Utc>>,
    /// The node that ran it.
    pub last_round_node: Option<String>,
    /// Intents the last round removed.
    pub last_round_intents: i64,
    /// Intents removed since the schema was created.
    pub removed_total: i64,
    /// When the oldest final intent still stored was created.
    pub oldest_final_created_at: Option<DateTime<Utc>>,
    /// Retention is behind: the oldest final intent is older than
    /// `retain` + a day (a webhook or dead letter may hold rows, or rounds
    /// fail; the log and `txmgr_history_retention_rounds_total` say which).
    pub behind: bool,
}

/// One table.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TableView {
    /// Table name.
    pub table: String,
    /// Rows (PostgreSQL's estimate as of the last vacuum or analyze).
    pub rows: i64,
    /// Dead row versions waiting for vacuum.
    pub dead_rows: i64,
    /// Bytes of the table's pages.
    pub heap_bytes: i64,
    /// Bytes of its TOAST table.
    pub toast_bytes: i64,
    /// Bytes of its indexes.
    pub index_bytes: i64,
    /// The largest index and its bytes.
    pub largest_index: Option<String>,
    /// When autovacuum last vacuumed it.
    pub last_autovacuum: Option<DateTime<Utc>>,
}

/// `GET /v1/ops/database`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DatabaseView {
    /// History retention.
    pub retention: RetentionView,
    /// Every table, largest first.
    pub tables: Vec<TableView>,
}

/// `GET /v1/ops/database`.
#[utoipa::path(get, path = "/v1/ops/database", tag = "ops",
    description = "History retention's progress (the running pass, the last completed one, the last round and its node, the oldest final intent) and every table's rows and bytes. The whole cluster's data: a token limited to some submitters gets 403.",
    responses(
        (status = 200, description = "retention and table sizes", body = DatabaseView),
        (status = 403, description = "forbidden: the token is limited to some submitters", body = ErrorResponse),
        (status = 500, description = "internal: a database error; details only in the node's log", body = ErrorResponse),
        (status = 503, description = "unavailable: the database is unavailable", body = ErrorResponse)))]
pub(crate) async fn database(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<Json<DatabaseView>> {
    caller.check_unscoped("read the database's sizes and retention")?;
    let status = history_retention::status(&state.pool).await?;
    let retain = state.ops.history_retain;
    let behind = !retain.is_zero()
        && status.oldest_final_created_at.is_some_and(|at| {
            let age = (Utc::now() - at).to_std().unwrap_or_default();
            age > retain + std::time::Duration::from_secs(24 * 3600)
        });
    let tables = table_stats::tables(&state.pool)
        .await?
        .into_iter()
        .map(|t| TableView {
            largest_index: t.indexes.first().map(|(name, _)| name.clone()),
            table: t.table,
            rows: t.rows,
            dead_rows: t.dead_rows,
            heap_bytes: t.heap_bytes,
            toast_bytes: t.toast_bytes,
            index_bytes: t.index_bytes,
            last_autovacuum: t.last_autovacuum,
        })
        .collect();
    Ok(Json(DatabaseView {
        retention: RetentionView {
            retain_seconds: retain.as_secs(),
            pass_cutoff: status.pass_cutoff,
            completed_cutoff: status.completed_cutoff,
            completed_at: status.completed_at,
            last_round_at: status.last_round_at,
            last_round_node: status.last_round_node,
            last_round_intents: status.last_round_rows,
            removed_total: status.removed_total,
            oldest_final_created_at: status.oldest_final_created_at,
            behind,
        },
        tables,
    }))
}
