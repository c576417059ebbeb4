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
use tokio::sync::Semaphore;
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
