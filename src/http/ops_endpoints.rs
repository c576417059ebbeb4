//! `GET /v1/ops/endpoints`: this node's RPC endpoints and their health, as
//! the reads and sends see them. Endpoints are shown by name and
//! `scheme://host[:port]` only: their paths and queries carry API keys.

use axum::{extract::State, Json};
use serde::Serialize;
use txmgr_actors::chain::EndpointStatus;

use super::{error::ApiResult, AppState};

/// One RPC endpoint.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct EndpointView {
    /// Configured name.
    pub name: String,
    /// `scheme://host[:port]` only.
    pub url: String,
    /// Serves reads and sends.
    pub healthy: bool,
    /// Reads (and the `newHeads` subscription) go to this endpoint now.
    pub reads: bool,
    /// Why it is out of service: `unverified` (chain id not confirmed yet),
    /// `failing` (consecutive transport failures) or `lagging` (head behind).
    pub reason: Option<String>,
    /// Its head at the last probe.
    pub head: Option<u64>,
    /// Blocks behind the best head at the last probe.
    pub lag: u64,
    /// Consecutive transport failures.
    pub consecutive_failures: u32,
    /// The last transport failure.
    pub last_error: Option<String>,
    /// Seconds since it became healthy or unhealthy.
    pub since_secs: u64,
}

impl From<EndpointStatus> for EndpointView {
    fn from(s: EndpointStatus) -> Self {
        Self {
            name: s.name,
            url: s.url,
            healthy: s.healthy,
            reads: s.reads,
            reason: s.reason,
            head: s.head,
            lag: s.lag,
            consecutive_failures: s.consecutive_failures,
            last_error: s.last_error,
            since_secs: s.since_secs,
        }
    }
}

/// Body of `GET /v1/ops/endpoints`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct EndpointsView {
    /// In configuration order.
    pub endpoints: Vec<EndpointView>,
    /// How many serve now; the node is ready while at least one does.
    pub healthy: usize,
}

/// `GET /v1/ops/endpoints`.
pub(crate) async fn endpoints(State(state): State<AppState>) -> ApiResult<Json<EndpointsView>> {
    let endpoints: Vec<EndpointView> = state
        .ops
        .chain
        .as_ref()
        .map(|chain| chain.endpoint_status())
        .unwrap_or_default()
        .into_iter()
        .map(EndpointView::from)
        .collect();
    let healthy = endpoints.iter().filter(|e| e.healthy).count();
    Ok(Json(EndpointsView { endpoints, healthy }))
}
