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
    /// Each chain's endpoints, chain by chain.
    pub chains: Vec<ChainEndpointsView>,
    /// Every chain's endpoints together, in chain and configuration order.
    pub endpoints: Vec<EndpointStatus>,
    /// How many serve now, every chain together.
    pub healthy: usize,
}

/// One chain's endpoints.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ChainEndpointsView {
    /// The chain's name.
    pub chain: String,
    /// The chain's id.
    pub chain_id: u64,
    /// In configuration order.
    pub endpoints: Vec<EndpointStatus>,
    /// How many read endpoints serve now; the chain is in service while at
    /// least one does (send-only ones are not counted).
    pub healthy: usize,
}

/// `GET /v1/ops/endpoints`.
#[utoipa::path(get, path = "/v1/ops/endpoints", tag = "ops",
    responses((status = 200, description = "this node's RPC endpoints and their health, chain by chain", body = EndpointsView)))]
pub(crate) async fn endpoints(State(state): State<AppState>) -> ApiResult<Json<EndpointsView>> {
    let chains: Vec<ChainEndpointsView> = state
        .chains
        .list()
        .iter()
        .map(|chain| {
            let endpoints = chain
                .client
                .as_ref()
                .map(|client| client.endpoint_status())
                .unwrap_or_default();
            ChainEndpointsView {
                chain: chain.name.clone(),
                chain_id: chain.chain_id.get(),
                healthy: endpoints
                    .iter()
                    .filter(|e| e.healthy && !e.send_only)
                    .count(),
                endpoints,
            }
        })
        .collect();
    let endpoints: Vec<EndpointStatus> = chains
        .iter()
        .flat_map(|c| c.endpoints.iter().cloned())
        .collect();
    let healthy = chains.iter().map(|c| c.healthy).sum();
    Ok(Json(EndpointsView {
        chains,
        endpoints,
        healthy,
    }))
}
