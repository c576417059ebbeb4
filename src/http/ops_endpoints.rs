//! `GET /v1/ops/endpoints`: this node's RPC endpoints and their health, as
//! the reads and sends see them. Endpoints are shown by name and
//! `scheme://host[:port]` only: their paths and queries carry API keys.

use axum::{extract::State, Json};
use serde::Serialize;
use txmgr_actors::chain::EndpointStatus;

use super::{error::ApiResult, AppState};

/// Body of `GET /v1/ops/endpoints`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct EndpointsView {
    /// In configuration order.
    pub endpoints: Vec<EndpointStatus>,
    /// How many serve now; the node is ready while at least one does.
    pub healthy: usize,
}

/// `GET /v1/ops/endpoints`.
#[utoipa::path(get, path = "/v1/ops/endpoints", tag = "ops",
    responses((status = 200, description = "this node's RPC endpoints and their health", body = EndpointsView)))]
pub(crate) async fn endpoints(State(state): State<AppState>) -> ApiResult<Json<EndpointsView>> {
    let endpoints = state
        .ops
        .chain
        .as_ref()
        .map(|chain| chain.endpoint_status())
        .unwrap_or_default();
    let healthy = endpoints.iter().filter(|e| e.healthy).count();
    Ok(Json(EndpointsView { endpoints, healthy }))
}
