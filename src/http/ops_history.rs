//! `GET /v1/ops/history` and `GET /v1/ops/history/submitters/{address}`:
//! the node's recent history ([`super::history`]) as the ops page's charts
//! read it, limited to its submitters for a token with an allow-list
//! (README "Security").

use axum::{extract::State, Json};

use super::{
    auth::Caller,
    error::{ApiError, ApiResult},
    history::{HistoryView, SubmitterHistoryView, SAMPLE_EVERY},
    path::ApiPath,
    AppState,
};

/// Whether `caller` may see the history of `address`: a ring sums the
/// submitter's work on every chain served, so a token limited to some
/// chains of it must be allowed it on each of them.
fn may_see(state: &AppState, caller: &Caller, address: &str) -> bool {
    let Ok(address) = address.parse::<alloy::primitives::Address>() else {
        return false;
    };
    state
        .chains
        .ids()
        .iter()
        .all(|chain| caller.may_use_on(*chain, &address))
}

/// `GET /v1/ops/history`.
#[utoipa::path(get, path = "/v1/ops/history", tag = "ops",
    description = "This node's samples of the last hour (one every 10 s): creates and their acknowledgement p50/p99, confirmations, queued and in-flight intents, RPC errors; and the submitters with a history of their own. A token limited to some submitters gets only those submitters, and no node-wide samples (they sum up every submitter's work).",
    responses((status = 200, description = "the node's recent history", body = HistoryView)))]
pub(crate) async fn history(State(state): State<AppState>, caller: Caller) -> Json<HistoryView> {
    let mut view = state.ops.history.view();
    if caller.is_scoped() {
        view.samples.clear();
        view.submitters
            .retain(|address| may_see(&state, &caller, address));
    }
    Json(view)
}

/// `GET /v1/ops/history/submitters/{address}`.
#[utoipa::path(get, path = "/v1/ops/history/submitters/{address}", tag = "ops",
    params(("address" = String, Path, description = "the submitter's address", pattern = "^0x[0-9a-fA-F]{40}$")),
    responses(
        (status = 200, description = "the submitter's samples of the last hour", body = SubmitterHistoryView),
        (status = 400, description = "invalid_request: not an address", body = super::error_body::ErrorResponse),
        (status = 404, description = "not_found: no history for this submitter on this node (or none the token may see: a token with an allow-list needs the submitter on every chain served)", body = super::error_body::ErrorResponse)))]
pub(crate) async fn submitter_history(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(address): ApiPath<String>,
) -> ApiResult<Json<SubmitterHistoryView>> {
    let parsed: alloy::primitives::Address = address.parse().map_err(|_| {
        ApiError::invalid("address", "address must be 0x followed by 40 hex digits")
    })?;
    let submitter = format!("{parsed:#x}");
    let samples = may_see(&state, &caller, &submitter)
        .then(|| state.ops.history.submitter(&submitter))
        .flatten()
        .ok_or_else(|| {
            ApiError::NotFound(format!("no history for submitter {submitter} on this node"))
        })?;
    Ok(Json(SubmitterHistoryView {
        submitter,
        interval_seconds: SAMPLE_EVERY.as_secs(),
        samples,
    }))
}
