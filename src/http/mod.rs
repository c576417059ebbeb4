//! The client HTTP API (DESIGN.md section 11): accepting intents and reading
//! transactions back.
//!
//! ```text
//! request ─► errors normalised ─► timeout ─► body limit ─► router
//!                                                          ├─ POST /v1/transactions ─► Submissions::create
//!                                                          └─ GET  /v1/transactions… ─► store::tx_query
//! ```
//!
//! Every error leaves as `{"error":{"code","message","field"?}}` ([`ApiError`]),
//! including the ones produced by the tower layers and by JSON parsing
//! ([`ApiJson`]). [`app`] builds the router without binding a socket, so tests
//! drive it with `tower::ServiceExt::oneshot`.

pub mod auth;
mod completions;
mod dashboard;
mod direct;
mod error;
pub mod health;
mod intent_body;
mod json;
pub mod openapi;
pub mod ops;
pub mod ops_endpoints;
mod ops_state;
pub mod ops_views;
mod transactions;
pub mod tx_actions;

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use axum::{
    extract::{DefaultBodyLimit, State},
    http::{header, StatusCode},
    middleware,
    response::{IntoResponse, Response},
    routing::{get, post},
    Router,
};
use sqlx::PgPool;
use tower_http::{limit::RequestBodyLimitLayer, timeout::TimeoutLayer};
use txmgr_actors::domain::{CreateError, CreateOutcome, NewIntent};

use crate::config::HttpConfig;

pub use completions::CompletionNotifier;
pub use direct::DirectSubmissions;
pub use error::{ApiError, ApiResult};
pub use intent_body::{
    CreateBody, ValidCreate, WeiString, MAX_GAS_LIMIT, MAX_REQUEST_ID_CHARS, MIN_GAS_LIMIT,
};
pub use json::ApiJson;
pub use ops_state::{OpsState, Reload, ReloadReport};

/// Where accepted intents go. The engine implements it (batching, back-pressure,
/// PROTECT); [`DirectSubmissions`] is the minimal implementation for tests and
/// tooling. Implementations persist the intent before answering `Created`.
#[async_trait]
pub trait Submissions: Send + Sync + 'static {
    /// Persists one intent as QUEUED, or answers why not. Idempotent on
    /// `(submitter, request_id)`: a replay answers `Existing`, a different body
    /// under the same id `Conflict`.
    async fn create(&self, intent: NewIntent) -> Result<CreateOutcome, CreateError>;
}

/// Size and time bounds of requests (DESIGN.md section 13).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest request body; larger ones get 413 `payload_too_large`.
    pub body_limit_bytes: usize,
    /// Largest decoded `data` of an intent; larger gets 400 on `data`.
    pub data_limit_bytes: usize,
    /// Time budget of one request; over it the client gets 503 `unavailable`.
    pub request_timeout: Duration,
}

impl Limits {
    /// The limits of the `[http]` section.
    pub fn from_config(http: &HttpConfig) -> Self {
        Self {
            body_limit_bytes: http.body_limit_bytes,
            data_limit_bytes: http.data_limit_bytes,
            request_timeout: http.request_timeout,
        }
    }
}

impl Default for Limits {
    /// The `[http]` defaults, so tests and tools need not build a config.
    fn default() -> Self {
        Self::from_config(&HttpConfig::default())
    }
}

/// What every handler shares. Cheap to clone (the pool and the submissions
/// are reference counted).
#[derive(Clone)]
pub struct AppState {
    /// Reads (`GET`) go straight to PostgreSQL, the authority.
    pub pool: PgPool,
    /// The one chain this deployment serves; part of every submitter key.
    pub chain_id: u64,
    /// Where creates go.
    pub submissions: Arc<dyn Submissions>,
    /// Request bounds.
    pub limits: Limits,
    /// Wakes long-polling `GET /v1/completions` requests; one per process.
    pub completions: CompletionNotifier,
    /// The operator surface: engine, auth, metrics, readiness, reload.
    /// `OpsState::default()` = no engine, no auth.
    pub ops: OpsState,
}

/// The API router with its body-limit and timeout layers. Does not bind a
/// socket: serve it with `axum::serve`, or call it in tests with `oneshot`.
pub fn app(state: AppState) -> Router {
    let limits = state.limits;
    let auth = middleware::from_fn_with_state(state.clone(), auth::require_token);
    Router::new()
        .route(
            "/v1/transactions",
            get(transactions::query).post(transactions::create),
        )
        .route("/v1/transactions/{tx_id}", get(transactions::get_one))
        .route("/v1/transactions/{tx_id}/cancel", post(tx_actions::cancel))
        .route(
            "/v1/transactions/{tx_id}/speedup",
            post(tx_actions::speedup),
        )
        .route(
            "/v1/transactions/{tx_id}/rebroadcast",
            post(tx_actions::rebroadcast),
        )
        .route(
            "/v1/transactions/{tx_id}/requeue",
            post(tx_actions::requeue),
        )
        .route("/v1/completions", get(completions::feed))
        .route("/v1/ops/actors", get(ops::actors))
        .route("/v1/ops/cluster", get(ops::cluster))
        .route("/v1/ops/endpoints", get(ops_endpoints::endpoints))
        .route("/v1/ops/submitters/{address}/restart", post(ops::restart))
        .route(
            "/v1/ops/submitters/{address}/unprotect",
            post(ops::unprotect),
        )
        .route("/v1/ops/reload", post(ops::reload))
        .route("/v1/openapi.json", get(openapi::document))
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics))
        .route("/ops/", get(dashboard::page))
        .route("/ops", get(dashboard::redirect))
        .fallback(not_found)
        .layer(auth)
        .with_state(state)
        // The extractor's own default (2 MiB) would contradict the configured
        // limit; the tower-http layer below is the one limit.
        .layer(DefaultBodyLimit::disable())
        .layer(RequestBodyLimitLayer::new(limits.body_limit_bytes))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            limits.request_timeout,
        ))
        .layer(middleware::map_response_with_state(
            limits,
            normalize_layer_errors,
        ))
}

/// Unknown routes answer in the error shape too.
async fn not_found() -> ApiError {
    ApiError::NotFound("no such route".to_owned())
}

/// The body-limit and timeout layers answer with bare (non-JSON) 413 / 503
/// responses; rewrite those into the API's error shape. Our own errors are
/// always JSON and pass untouched.
async fn normalize_layer_errors(State(limits): State<Limits>, response: Response) -> Response {
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"));
    if is_json {
        return response;
    }
    match response.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge {
            limit: limits.body_limit_bytes,
        }
        .into_response(),
        StatusCode::SERVICE_UNAVAILABLE => ApiError::Unavailable(format!(
            "the request did not complete within {}; retrying (a create with the same request_id) is safe",
            humantime::format_duration(limits.request_timeout)
        ))
        .into_response(),
        _ => response,
    }
}
