//! How much the API does at once (README "Security": every queue and
//! buffer is bounded): at most `http.max_concurrent_requests` API requests,
//! and a small limit of their own for `/healthz`, `/readyz` and `/metrics`,
//! so a saturated API never hides the node's health from its probes.
//!
//! Beyond a limit a request is shed at once with 503 `busy` and
//! `Retry-After` — not queued: a queue in front of a saturated node only
//! turns overload into timeouts, and a load balancer can send the retry to
//! another node at once.

use std::{convert::Infallible, sync::Arc, time::Duration};

use axum::{
    error_handling::HandleErrorLayer, extract::Request, response::Response, routing::Route,
};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::{
    limit::GlobalConcurrencyLimitLayer, load_shed::LoadShedLayer, BoxError, Layer, Service,
    ServiceBuilder,
};

use super::error::ApiError;

/// Requests to `/healthz`, `/readyz` and `/metrics` served at once: enough for
/// every prober of a deployment, small enough that a flood of them costs
/// little (each answers from memory).
pub(crate) const PROBE_CONCURRENCY: usize = 32;

/// What a shed request is told to wait before it retries.
pub(crate) const BUSY_RETRY_AFTER: Duration = Duration::from_secs(1);

/// A route layer that serves at most `max` requests at once over every route
/// it wraps (one semaphore for all of them) and answers the rest with 503
/// `busy` naming `what` is full.
pub(crate) fn shed_beyond(
    max: usize,
    what: &'static str,
) -> impl Layer<
    Route,
    Service = impl Service<
        Request,
        Response = Response,
        Error = Infallible,
        Future = impl Send + 'static,
    > + Clone
                  + Send
                  + Sync
                  + 'static,
> + Clone
       + Send
       + Sync
       + 'static {
    let permits = Arc::new(Semaphore::new(max.clamp(1, Semaphore::MAX_PERMITS)));
    ServiceBuilder::new()
        .layer(HandleErrorLayer::new(move |_: BoxError| async move {
            // The only error below is the shed: the routes themselves are
            // infallible.
            ApiError::Busy {
                what,
                retry_after: BUSY_RETRY_AFTER,
            }
        }))
        .layer(LoadShedLayer::new())
        .layer(GlobalConcurrencyLimitLayer::with_semaphore(permits))
}

/// The node-wide budget of list and feed page bytes in flight
/// (`http.page_bytes_in_flight`). Each page reserves `http.page_max_bytes`
/// (its bound) while it is read, built and sent; when the budget is spent a
/// request gets 503 `busy` at once. A long poll holds nothing while it
/// waits. Counted in KiB, so any configured size fits a semaphore.
#[derive(Debug, Clone)]
pub struct PageBudget {
    permits: Arc<Semaphore>,
    per_page: u32,
}

impl PageBudget {
    /// A budget for `limits` (one per process: every router shares it).
    pub fn new(limits: &super::Limits) -> Self {
        let kib = |bytes: usize| bytes.div_ceil(1024).max(1);
        let total = kib(limits.page_bytes_in_flight).min(Semaphore::MAX_PERMITS);
        let per_page = kib(limits.page_max_bytes).min(total);
        Self {
            permits: Arc::new(Semaphore::new(total)),
            per_page: u32::try_from(per_page).unwrap_or(u32::MAX),
        }
    }

    /// Reserves one page's worth, or 503 `busy`.
    pub(crate) fn reserve(&self) -> Result<OwnedSemaphorePermit, ApiError> {
        self.permits
            .clone()
            .try_acquire_many_owned(self.per_page)
            .map_err(|_| ApiError::Busy {
                what: "list and feed pages being built",
                retry_after: BUSY_RETRY_AFTER,
            })
    }
}

/// A JSON answer whose bytes keep `permit` until they are handed to the
/// connection, so the budget covers the serialised page too.
pub(crate) fn json_holding<T: serde::Serialize>(
    value: &T,
    permit: OwnedSemaphorePermit,
) -> Response {
    match serde_json::to_vec(value) {
        Ok(bytes) => {
            let body = axum::body::Body::from_stream(futures::stream::once(async move {
                let _held = permit;
                Ok::<_, Infallible>(bytes)
            }));
            let mut response = Response::new(body);
            response.headers_mut().insert(
                axum::http::header::CONTENT_TYPE,
                axum::http::HeaderValue::from_static("application/json"),
            );
            response
        }
        Err(err) => {
            tracing::error!(target: "http", error = %err, "a page did not serialise");
            axum::response::IntoResponse::into_response(ApiError::Internal)
        }
    }
}
