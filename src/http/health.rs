//! `GET /healthz` (the process answers), `GET /readyz` (database reachable,
//! migrations current, chain reachable with the configured chain id) and
//! `GET /metrics` (Prometheus text).

use std::time::Duration;

use axum::{
    extract::State,
    http::{header, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use serde::Serialize;
use txmgr_actors::{chain::ChainClient, store::MIGRATOR};

use super::{
    error::{ApiError, ErrorResponse},
    AppState,
};

/// Budget of each readiness probe, so `/readyz` answers even when a
/// dependency hangs.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Body of `/healthz` and `/readyz`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct HealthView {
    /// `ok` or `not_ready`.
    pub status: &'static str,
    /// Why not ready (empty when ready).
    pub reasons: Vec<String>,
}

/// `GET /healthz`: the process is alive and serving.
#[utoipa::path(get, path = "/healthz", tag = "meta",
    responses((status = 200, description = "the process answers", body = HealthView)))]
pub(crate) async fn healthz() -> Json<HealthView> {
    Json(HealthView {
        status: "ok",
        reasons: Vec::new(),
    })
}

/// `GET /readyz`: 200 when every dependency is usable, 503 with reasons.
#[utoipa::path(get, path = "/readyz", tag = "meta",
    responses(
        (status = 200, description = "ready: database reachable and migrated, an RPC endpoint healthy", body = HealthView),
        (status = 503, description = "not ready, with reasons", body = HealthView)))]
pub(crate) async fn readyz(State(state): State<AppState>) -> Response {
    let mut reasons = Vec::new();
    match tokio::time::timeout(PROBE_TIMEOUT, applied_migrations(&state)).await {
        Ok(Ok(applied)) => {
            let missing: Vec<i64> = MIGRATOR
                .iter()
                .filter(|m| {
                    m.migration_type.is_up_migration() || !m.migration_type.is_down_migration()
                })
                .map(|m| m.version)
                .filter(|v| !applied.contains(v))
                .collect();
            if !missing.is_empty() {
                reasons.push(format!("database: migrations not applied: {missing:?}"));
            }
        }
        Ok(Err(err)) => {
            tracing::warn!(target: "http", error = %err, "readiness: database check failed");
            reasons.push("database: unreachable or not migrated".to_owned());
        }
        Err(_) => reasons.push("database: no answer within 2s".to_owned()),
    }
    if let Some(chain) = &state.ops.chain {
        chain_readiness(chain.as_ref(), state.chain_id, &mut reasons).await;
    }
    let ready = reasons.is_empty();
    let body = HealthView {
        status: if ready { "ok" } else { "not_ready" },
        reasons,
    };
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}

/// Ready while at least one RPC endpoint is healthy, from the health the
/// endpoint monitor keeps (no RPC per hit); clients without endpoints (test
/// doubles) are asked for their chain id.
async fn chain_readiness(chain: &dyn ChainClient, chain_id: u64, reasons: &mut Vec<String>) {
    let endpoints = chain.endpoint_status();
    if !endpoints.is_empty() {
        if !endpoints.iter().any(|e| e.healthy) {
            let why: Vec<String> = endpoints
                .iter()
                .map(|e| format!("{} {}", e.name, e.reason.as_deref().unwrap_or("unhealthy")))
                .collect();
            reasons.push(format!(
                "chain: no healthy RPC endpoint ({})",
                why.join(", ")
            ));
        }
        return;
    }
    match tokio::time::timeout(PROBE_TIMEOUT, chain.chain_id()).await {
        Ok(Ok(id)) if id == chain_id => {}
        Ok(Ok(id)) => reasons.push(format!(
            "chain: the RPC endpoint serves chain {id}, configured {chain_id}"
        )),
        Ok(Err(err)) => {
            tracing::warn!(target: "http", error = %err, "readiness: chain check failed");
            reasons.push("chain: RPC endpoint unreachable".to_owned());
        }
        Err(_) => reasons.push("chain: no answer within 2s".to_owned()),
    }
}

async fn applied_migrations(state: &AppState) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success")
        .fetch_all(&state.pool)
        .await
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
