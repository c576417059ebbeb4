//! `GET /v1/ops/transactions/{key}`: one transaction as the ops page's
//! transaction view shows it — found by its id, any attempt's hash or its
//! request id — with every attempt, its feed rows, their dead letters and
//! the operators' actions on it.

use axum::{extract::State, Json};
use serde::Serialize;
use txmgr_actors::store::tx_query::{
    self, AttemptView, AuditView, DeadLetterView, FeedRowView, TxView,
};

use super::{
    error::{ApiError, ApiResult},
    path::ApiPath,
    transactions::node_view,
    AppState,
};

/// Body of `GET /v1/ops/transactions/{key}`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TxDetailView {
    /// The transaction, as `GET /v1/transactions/{tx_id}` answers it.
    pub transaction: TxView,
    /// Every signed attempt, in signing order.
    pub attempts: Vec<AttemptView>,
    /// Its feed rows (what webhooks deliver), in feed order.
    pub feed: Vec<FeedRowView>,
    /// Deliveries of those rows that failed for good.
    pub dead_letters: Vec<DeadLetterView>,
    /// Operators' actions on it: the newest 50, oldest first.
    pub audit: Vec<AuditView>,
    /// How many actions it has in all (more than `audit` holds when over 50).
    pub audit_total: i64,
}

/// `GET /v1/ops/transactions/{key}`.
#[utoipa::path(get, path = "/v1/ops/transactions/{key}", tag = "ops",
    description = "One transaction with its attempts, feed rows, dead letters and audit rows; `key` is its tx id, the hash of any of its attempts, or a request id (the newest transaction with it).",
    params(("key" = String, Path, description = "tx id, attempt hash (0x + 64 hex) or request id", min_length = 1, max_length = 256)),
    responses(
        (status = 200, description = "the transaction and its history", body = TxDetailView),
        (status = 404, description = "not_found: no such transaction on the chains served here", body = super::error_body::ErrorResponse)))]
pub(crate) async fn detail(
    State(state): State<AppState>,
    ApiPath(key): ApiPath<String>,
) -> ApiResult<Json<TxDetailView>> {
    let chain_ids = state.chains.ids();
    let not_found = || ApiError::NotFound(format!("no transaction {key:?}"));
    let tx_id = tx_query::find(&state.pool, &chain_ids, &key)
        .await?
        .ok_or_else(not_found)?;
    let view = tx_query::get(&state.pool, &chain_ids, tx_id)
        .await?
        .ok_or_else(not_found)?;
    let detail = tx_query::detail(&state.pool, tx_id).await?;
    Ok(Json(TxDetailView {
        transaction: node_view(&state, view),
        attempts: detail.attempts,
        feed: detail.feed,
        dead_letters: detail.dead_letters,
        audit: detail.audit,
        audit_total: detail.audit_total,
    }))
}
