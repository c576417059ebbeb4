//! `txmgr_creates_total` and `txmgr_create_ack_seconds` for every answer to
//! `POST /v1/transactions` (README "Operations"): the handler's, and the
//! ones given before it runs or instead of it — 503 `busy` from the API's
//! concurrency limit, 503 `unavailable` from the request timeout, 413 from
//! the body limit, 401/403 from authentication. A refusal the handler never
//! saw is a refused create all the same, and `TxmgrCreatesRefused` must see
//! it.
//!
//! The outermost layer counts, from what the answer carries: the handler's
//! [`CreateAnswered`] (its chain and result), else the error's
//! [`ErrorCode`] under chain [`NO_CHAIN`].

use std::time::Instant;

use axum::{extract::Request, http::Method, middleware::Next, response::Response};

use super::error::ErrorCode;

/// The route counted.
const CREATE_PATH: &str = "/v1/transactions";

/// The `chain` label of a create refused before it named a served chain.
pub(crate) const NO_CHAIN: &str = "none";

/// The `result` label of an answer that carries neither a handler's label
/// nor an error code (none is known to exist: every error leaves as an
/// [`ApiError`](super::ApiError)).
const UNLABELLED: &str = "unknown";

/// What the create handler answered, carried by its response to the
/// counting layer.
#[derive(Debug, Clone)]
pub(crate) struct CreateAnswered {
    /// The served chain's name, or [`NO_CHAIN`].
    pub(crate) chain: String,
    /// `created`, `replayed` or the error code.
    pub(crate) result: &'static str,
}

/// Counts and times every answer to `POST /v1/transactions`; other
/// requests pass untouched.
pub(crate) async fn count_creates(request: Request, next: Next) -> Response {
    if request.method() != Method::POST || request.uri().path() != CREATE_PATH {
        return next.run(request).await;
    }
    let started = Instant::now();
    let response = next.run(request).await;
    let (chain, result) = labels(&response);
    metrics::histogram!(txmgr_actors::metrics::CREATE_ACK_SECONDS,
        "chain" => chain.clone(), "result" => result)
    .record(started.elapsed().as_secs_f64());
    metrics::counter!(txmgr_actors::metrics::CREATES, "chain" => chain, "result" => result)
        .increment(1);
    response
}

/// The `chain` and `result` labels of an answer to a create.
fn labels(response: &Response) -> (String, &'static str) {
    if let Some(answered) = response.extensions().get::<CreateAnswered>() {
        return (answered.chain.clone(), answered.result);
    }
    let result = response
        .extensions()
        .get::<ErrorCode>()
        .map_or(UNLABELLED, |code| code.0);
    (NO_CHAIN.to_owned(), result)
}

#[cfg(test)]
mod tests {
    use axum::response::IntoResponse;

    use super::*;
    use crate::http::ApiError;

    #[test]
    fn the_handlers_label_wins_and_a_layers_error_counts_under_no_chain() {
        let mut answered = ApiError::Internal.into_response();
        answered.extensions_mut().insert(CreateAnswered {
            chain: "main".to_owned(),
            result: "overloaded",
        });
        assert_eq!(labels(&answered), ("main".to_owned(), "overloaded"));
        let shed = ApiError::Busy {
            what: "API requests",
            retry_after: std::time::Duration::from_secs(1),
        }
        .into_response();
        assert_eq!(labels(&shed), (NO_CHAIN.to_owned(), "busy"));
        assert_eq!(
            labels(&Response::default()),
            (NO_CHAIN.to_owned(), UNLABELLED)
        );
    }
}
