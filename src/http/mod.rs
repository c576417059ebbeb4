//! The client HTTP API (README "HTTP API"): accepting intents and reading
//! transactions back.
//!
//! ```text
//! request ─► creates counted ─► errors normalised ─► timeout ─► body limit
//!   ─► Host (tokenless) ─► auth ─► router
//!   ├─ API routes (≤ http.max_concurrent_requests at once, else 503 busy;
//!   │    a POST needs Content-Type: application/json, else 415)
//!   │    ├─ POST /v1/transactions ─► Submissions::create
//!   │    └─ GET  /v1/transactions… ─► store::tx_query
//!   └─ /healthz /readyz /metrics (a small limit of their own)
//! ```
//!
//! Every error leaves as `{"error":{"code","message","field"?}}` ([`ApiError`]),
//! including the ones produced by the tower layers, by axum (a method the
//! route lacks) and by the extractors ([`ApiJson`], [`ApiPath`]). Each
//! handler carries its `#[utoipa::path]`, and [`documented_routes`]
//! registers it at that path, so the router and `GET /v1/openapi.json`
//! ([`openapi`]) cannot disagree. [`app`] builds the router without binding
//! a socket, so tests drive it with `tower::ServiceExt::oneshot`.

pub mod auth;
mod browser_guard;
mod caller;
mod capacity;
mod completion_notifier;
mod completions;
mod create_metrics;
mod create_trace;
mod dashboard;
mod direct;
mod error;
mod error_body;
pub mod health;
pub mod history;
mod intent_body;
mod json;
pub mod openapi;
pub mod ops;
mod ops_actions;
mod ops_audit;
pub mod ops_database;
pub mod ops_endpoints;
mod ops_history;
pub mod ops_pause;
mod ops_state;
pub mod ops_views;
pub mod ops_webhooks;
mod path;
mod query;
pub mod readiness;
mod served_chains;
mod text;
mod transactions;
pub mod tx_actions;
pub mod tx_detail;
mod tx_reads;

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use axum::{
    extract::{DefaultBodyLimit, State},
    http::{header, StatusCode},
    middleware,
    response::{IntoResponse, Response},
    routing::get,
    Extension, Router,
};
use sqlx::PgPool;
use tower_http::{limit::RequestBodyLimitLayer, timeout::TimeoutLayer};
use txmgr_actors::domain::{CreateError, CreateOutcome, NewIntent};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::config::HttpConfig;

pub use browser_guard::LocalHosts;
pub use capacity::PageBudget;
pub use completion_notifier::CompletionNotifier;
pub use direct::DirectSubmissions;
pub use error::{ApiError, ApiResult, ErrorDetail, ErrorIssue, ErrorResponse, ERROR_CODES};
pub use intent_body::{
    CreateBody, ValidCreate, WeiString, MAX_GAS_LIMIT, MAX_REQUEST_ID_CHARS, MIN_GAS_LIMIT,
};
pub use json::ApiJson;
pub use ops_state::{OpsState, Reload, ReloadReport};
pub use path::ApiPath;
pub use readiness::Readiness;
pub use served_chains::{ServedChain, ServedChains};

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

/// Size and time bounds of requests (README "Security").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest request body; larger ones get 413 `payload_too_large`.
    pub body_limit_bytes: usize,
    /// Largest decoded `data` of an intent; larger gets 400 on `data`.
    pub data_limit_bytes: usize,
    /// Time budget of one request; over it the client gets 503 `unavailable`.
    pub request_timeout: Duration,
    /// How far ahead a create's `valid_until` may be; further is a 400.
    pub max_valid_for: Duration,
    /// API requests served at once; more get 503 `busy`.
    pub max_concurrent_requests: usize,
    /// JSON bytes of the items of one list or feed page.
    pub page_max_bytes: usize,
    /// Page bytes built at once over every list and feed request.
    pub page_bytes_in_flight: usize,
}

impl Limits {
    /// The limits of the `[http]` section.
    pub fn from_config(http: &HttpConfig) -> Self {
        Self {
            body_limit_bytes: http.body_limit_bytes,
            data_limit_bytes: http.data_limit_bytes,
            request_timeout: http.request_timeout,
            max_valid_for: http.max_valid_for,
            max_concurrent_requests: http.max_concurrent_requests,
            page_max_bytes: http.page_max_bytes,
            page_bytes_in_flight: http.page_bytes_in_flight,
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
    /// The chains this node serves: ids, names, create paths, engines.
    pub chains: ServedChains,
    /// Request bounds.
    pub limits: Limits,
    /// Wakes long-polling `GET /v1/completions` requests; one per process.
    pub completions: CompletionNotifier,
    /// The operator surface: engine, auth, metrics, readiness, reload.
    /// `OpsState::default()` = no engine, no auth. Shared, so the state
    /// every request clones (its layers and its handler) is a few
    /// reference counts, not the ops surface's fields.
    pub ops: Arc<OpsState>,
}

/// Every documented route: each handler is registered at the path of its
/// `#[utoipa::path]`, which is also its operation in the OpenAPI document.
pub(crate) fn documented_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::base())
        .merge(api_routes())
        .merge(probe_routes())
}

/// The API proper: under `http.max_concurrent_requests`.
fn api_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(tx_reads::query, transactions::create))
        .routes(routes!(tx_reads::get_one))
        .routes(routes!(tx_actions::cancel))
        .routes(routes!(tx_actions::speedup))
        .routes(routes!(tx_actions::rebroadcast))
        .routes(routes!(tx_actions::requeue))
        .routes(routes!(completions::feed))
        .routes(routes!(ops::actors))
        .routes(routes!(ops::cluster))
        .routes(routes!(ops_database::database))
        .routes(routes!(ops_endpoints::endpoints))
        .routes(routes!(ops_actions::restart))
        .routes(routes!(ops_actions::unprotect))
        .routes(routes!(ops_pause::pause))
        .routes(routes!(ops_pause::resume))
        .routes(routes!(ops_actions::reload))
        .routes(routes!(ops_webhooks::list))
        .routes(routes!(ops_webhooks::redeliver))
        .routes(routes!(ops_history::history))
        .routes(routes!(ops_history::submitter_history))
        .routes(routes!(tx_detail::detail))
        .routes(routes!(openapi::serve))
        .routes(routes!(dashboard::page))
}

/// Health and metrics: a small limit of their own, so probes answer while
/// the API is saturated.
fn probe_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(health::healthz))
        .routes(routes!(health::readyz))
        .routes(routes!(health::metrics))
}

/// The API router with its concurrency, auth, body-limit and timeout
/// layers. Does not bind a socket: serve it with `axum::serve`, or call it
/// in tests with `oneshot`. Each call has its own concurrency limits.
pub fn app(state: AppState) -> Router {
    let limits = state.limits;
    let auth = middleware::from_fn_with_state(state.ops.clone(), auth::require_token);
    let api_limit = capacity::shed_beyond(limits.max_concurrent_requests, "API requests");
    let probe_limit = capacity::shed_beyond(capacity::PROBE_CONCURRENCY, "probe requests");
    let host_check = middleware::from_fn_with_state(state.ops.clone(), browser_guard::check_host);
    let (routes, mut doc) = OpenApiRouter::with_openapi(openapi::base())
        .merge(
            api_routes()
                .route_layer(api_limit)
                // Before a concurrency permit is taken.
                .route_layer(middleware::from_fn(browser_guard::require_json)),
        )
        .merge(probe_routes().route_layer(probe_limit))
        .split_for_parts();
    openapi::complete(&mut doc);
    routes
        // Only a redirect to `/ops/`: not part of the document.
        .route("/ops", get(dashboard::redirect))
        .fallback(not_found)
        .layer(Extension(openapi::RenderedDocument::new(&doc)))
        // One budget of page bytes in flight for every list and feed request
        // this router serves.
        .layer(Extension(PageBudget::new(&limits)))
        .layer(auth)
        .layer(host_check)
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
        // Outermost: sees every answer to a create, the layers' refusals
        // (busy, timeout, body limit, auth) in their final shape too.
        .layer(middleware::from_fn(create_metrics::count_creates))
}

/// Unknown routes answer in the error shape too.
async fn not_found() -> ApiError {
    ApiError::NotFound("no such route".to_owned())
}

/// Longest plain-text error body quoted into a rewritten error's message.
const MAX_QUOTED_ERROR: usize = 512;

/// Errors not produced by our handlers — the body-limit and timeout layers'
/// bare 413 / 503, axum's 405 for a method the route lacks, an extractor's
/// plain-text rejection — are rewritten into the API's error shape, so that
/// every error a client sees is JSON. Our own errors pass untouched.
async fn normalize_layer_errors(State(limits): State<Limits>, response: Response) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"));
    if is_json || !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let allow = response.headers().get(header::ALLOW).cloned();
    let error = match status {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge {
            limit: limits.body_limit_bytes,
        },
        StatusCode::SERVICE_UNAVAILABLE => ApiError::Unavailable(format!(
            "the request did not complete within {}; retrying (a create with the same request_id) is safe",
            humantime::format_duration(limits.request_timeout)
        )),
        StatusCode::METHOD_NOT_ALLOWED => ApiError::MethodNotAllowed(format!(
            "this route does not answer this method; it answers {}",
            allow
                .as_ref()
                .and_then(|value| value.to_str().ok())
                .unwrap_or("other methods")
        )),
        status => {
            let text = axum::body::to_bytes(response.into_body(), MAX_QUOTED_ERROR)
                .await
                .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
                .unwrap_or_default();
            if status.is_client_error() {
                ApiError::invalid_request(text)
            } else {
                tracing::error!(target: "http", %status, body = %text, "non-JSON server error");
                ApiError::Internal
            }
        }
    };
    let mut rewritten = error.into_response();
    if let Some(allow) = allow {
        rewritten.headers_mut().insert(header::ALLOW, allow);
    }
    rewritten
}
