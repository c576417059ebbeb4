//! `GET /healthz` (the process answers), `GET /readyz` (database reachable,
//! migrations current, chain reachable with the configured chain id, as last
//! checked in the background) and `GET /metrics` (Prometheus text).

use axum::{
    extract::State,
    http::{header, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use serde::Serialize;

use super::{
    error::{ApiError, ErrorResponse},
    AppState,
};

/// Body of `/healthz` and `/readyz`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct HealthView {
    /// `ok` or `not_ready`.
    pub status: &'static str,
    /// Why not ready (empty when ready).
    pub reasons: Vec<String>,
    /// `/readyz`: each chain's state (a chain out of service shows here
    /// without taking the node out of service while another chain serves).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub chains: Vec<super::readiness::ChainState>,
}

/// `GET /healthz`: the process is alive and serving.
#[utoipa::path(get, path = "/healthz", tag = "meta",
    responses((status = 200, description = "the process answers", body = HealthView)))]
pub(crate) async fn healthz() -> Json<HealthView> {
    Json(HealthView {
        status: "ok",
        reasons: Vec::new(),
        chains: Vec::new(),
    })
}

/// `GET /readyz`: 200 when every dependency was usable at the last
/// background check, 503 with reasons (also when that check is too old).
/// Touches neither the database nor the chain ([`super::readiness`]).
#[utoipa::path(get, path = "/readyz", tag = "meta",
    responses(
        (status = 200, description = "ready: database reachable and migrated, and at least one chain with a healthy RPC endpoint (as last checked in the background); `chains` lists each chain's state", body = HealthView),
        (status = 503, description = "not ready, with reasons (also when the last background check is too old)", body = HealthView)))]
pub(crate) async fn readyz(State(state): State<AppState>) -> Response {
    let reasons = match &state.ops.readiness {
        Some(readiness) => readiness.reasons(),
        None => vec!["readiness: not monitored in this process".to_owned()],
    };
    let chains = state
        .ops
        .readiness
        .as_ref()
        .map(|readiness| readiness.chains())
        .unwrap_or_default();
    let ready = reasons.is_empty();
    let body = HealthView {
        status: if ready { "ok" } else { "not_ready" },
        reasons,
        chains,
    };
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}

/// `GET /metrics`: Prometheus text exposition.
#[utoipa::path(get, path = "/metrics", tag = "meta",
    responses(
        (status = 200, description = "Prometheus text format 0.0.4", content_type = "text/plain"),
        (status = 503, description = "unavailable: no metrics recorder in this process", body = ErrorResponse)))]
pub(crate) async fn metrics(State(state): State<AppState>) -> Response {
    match &state.ops.metrics {
        Some(handle) => (
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            handle.render(),
        )
            .into_response(),
        None => ApiError::Unavailable("no metrics recorder in this process".into()).into_response(),
    }
}
