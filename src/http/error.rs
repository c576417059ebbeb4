//! The one error shape of the API: `{"error":{"code","message","field"?}}`
//! with a stable machine `code` per variant (README "HTTP API").
//!
//! | code                   | status | when                                              |
//! |------------------------|--------|---------------------------------------------------|
//! | `invalid_request`      | 400    | malformed JSON, bad field (with `field`)          |
//! | `unauthorized`         | 401    | no or unknown bearer token (`WWW-Authenticate`)   |
//! | `forbidden`            | 403    | token lacks the role or the submitter (`field`)   |
//! | `policy_violation`     | 403    | the submitter's policy refuses it (`field`,       |
//! |                        |        | `rule`); nothing stored                           |
//! | `not_found`            | 404    | no such transaction / route                       |
//! | `aged_out`             | 404    | no such transaction, and its id is older than     |
//! |                        |        | `history.retain`: retention may have removed it   |
//! | `method_not_allowed`   | 405    | the route has no such method (`Allow` lists them) |
//! | `idempotency_conflict` | 409    | same `request_id`, different body                 |
//! | `not_leader`           | 409    | ops action must run on the node holding the lease |
//! | `chain_not_served`     | 409    | an action on an intent of a chain this node does  |
//! |                        |        | not serve (a reload removed it)                   |
//! | `payload_too_large`    | 413    | body over `http.body_limit_bytes`                 |
//! | `unsupported_media_type` | 415  | a POST without `Content-Type: application/json`   |
//! | `misdirected_request`  | 421    | tokenless node, `Host` is not its own name        |
//! | `unknown_submitter`    | 422    | submitter not configured (or being removed)       |
//! | `submitter_protected`  | 423    | submitter in PROTECT                              |
//! | `paused`               | 423    | submitter paused, refusing creates meanwhile      |
//! | `overloaded`           | 429    | ingress queue full; `Retry-After` in seconds      |
//! | `rate_limited`         | 429    | asked again too soon (a client's speed-up of one  |
//! |                        |        | intent within its resubmit interval, or a create  |
//! |                        |        | beyond its token's `rate`); `Retry-After`         |
//! | `internal`             | 500    | a bug or corrupt data; details only in the log    |
//! | `unavailable`          | 503    | database down or request timed out; retry is safe |
//! | `busy`                 | 503    | node at capacity (requests, long polls, ingress); |
//! |                        |        | nothing was done; `Retry-After` in seconds        |

use std::time::Duration;

use axum::{
    http::{header, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use txmgr_actors::{domain::CreateError, StoreError};
use uuid::Uuid;

pub use super::error_body::{ErrorDetail, ErrorIssue, ErrorResponse, ERROR_CODES};

/// The machine code of an error answer, carried by the response so outer
/// layers (the create counter) can label it without reading the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ErrorCode(pub(crate) &'static str);

/// Everything a request can fail with, as the client sees it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// The request is malformed; `field` names the offending input when known.
    #[error("{message}")]
    InvalidRequest {
        /// What is wrong, for humans.
        message: String,
        /// The body field, query parameter, header-backed field or path
        /// segment at fault.
        field: Option<String>,
    },
    /// The submitter is not served by this deployment (or is being removed).
    #[error("{0}")]
    UnknownSubmitter(String),
    /// The submitter refuses new work until an operator clears PROTECT.
    #[error("submitter is protected: {0}")]
    SubmitterProtected(String),
    /// The `request_id` belongs to an intent with a different body.
    #[error("request_id already used by transaction {tx_id} with a different body")]
    IdempotencyConflict {
        /// The intent that owns the request id.
        tx_id: Uuid,
    },
    /// Back-pressure: the submitter's ingress queue is full.
    #[error("too many pending requests; retry after {} s", retry_after_secs(*.retry_after))]
    Overloaded {
        /// How long the client should wait.
        retry_after: Duration,
    },
    /// Back-pressure of the whole node: it serves as many requests, long
    /// polls or queued creates as it may. Nothing was done; retrying later
    /// (here or on another node) is safe.
    #[error("this node is at capacity ({what}); retry after {} s", retry_after_secs(*.retry_after))]
    Busy {
        /// What is full, for humans.
        what: &'static str,
        /// How long the client should wait.
        retry_after: Duration,
    },
    /// This caller asked for the same thing too soon (a client's speed-up of
    /// one intent within its resubmit interval, or a create beyond its
    /// token's rate). Nothing was done.
    #[error("{message}")]
    RateLimited {
        /// What was refused and why.
        message: String,
        /// How long the client should wait.
        retry_after: Duration,
    },
    /// The thing asked for does not exist.
    #[error("{0}")]
    NotFound(String),
    /// No such transaction, and its id was made before the cutoff of the
    /// last completed history retention pass: it may have been removed.
    #[error("{0}")]
    AgedOut(String),
    /// The route exists but not with this method; the `Allow` header lists
    /// the methods it has.
    #[error("{0}")]
    MethodNotAllowed(String),
    /// A state-changing request without `Content-Type: application/json`
    /// (what a cross-site page can send without CORS).
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// Tokenless, the request's `Host` is not one of the node's own names
    /// (DNS rebinding).
    #[error("{0}")]
    MisdirectedRequest(String),
    /// The body exceeds the configured limit.
    #[error("request body exceeds the limit of {limit} bytes")]
    PayloadTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// A dependency (the database, the engine) did not answer in time; the
    /// message is ours and safe to show.
    #[error("{0}")]
    Unavailable(String),
    /// A field the request must carry is absent (e.g. `chain_id` when the
    /// deployment serves several chains).
    #[error("{message}")]
    MissingField {
        /// The absent field.
        field: String,
        /// What to send.
        message: String,
    },
    /// No bearer token, or one that matches no configured hash.
    #[error("a valid bearer token is required")]
    Unauthorized,
    /// The token is valid but may not do this (role, or submitter not in
    /// its allow-list; `field` names the submitter field then).
    #[error("{message}")]
    Forbidden {
        /// What is not allowed.
        message: String,
        /// The input at fault, e.g. `submitter`.
        field: Option<String>,
    },
    /// The submitter is paused and refuses creates meanwhile
    /// (`pause_accepts_creates = false`).
    #[error("submitter is paused: {0}")]
    Paused(String),
    /// The submitter's policy refuses this intent (README "Guardrails");
    /// nothing was stored.
    #[error("{message}")]
    PolicyViolation {
        /// The rule: its key in `policy`.
        rule: &'static str,
        /// The request field it judged.
        field: &'static str,
        /// What was refused.
        message: String,
    },
    /// The transaction's state does not allow the action (e.g. cancelling a
    /// final or already mined transaction).
    #[error("{0}")]
    InvalidState(String),
    /// An ops action that only the lease holder may perform reached another node.
    #[error("node {owner} holds the lease of this submitter; send the request to that node")]
    NotLeader {
        /// The node holding the lease.
        owner: String,
    },
    /// An action on an intent of a chain this node does not serve (a reload
    /// removed it): nothing was recorded; the intent waits in the database
    /// for a node that serves its chain.
    #[error("{0}")]
    ChainNotServed(String),
    /// A reload found the configuration file invalid; the running
    /// configuration stays. `field` is the first key at fault.
    #[error("the configuration was rejected; the running configuration stays: {}", issues.iter().map(|(k, r)| format!("{k}: {r}")).collect::<Vec<_>>().join("; "))]
    InvalidConfig {
        /// `(key, reason)` for every problem found.
        issues: Vec<(String, String)>,
    },
    /// Anything else. Logged where it happened; the client learns nothing more.
    #[error("internal error")]
    Internal,
}

/// Result of a handler.
pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    /// A 400 naming the field at fault.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError::InvalidRequest {
            message: message.into(),
            field: Some(field.into()),
        }
    }

    /// A 400 about the request as a whole (e.g. unparsable JSON).
    pub fn invalid_request(message: impl Into<String>) -> Self {
        ApiError::InvalidRequest {
            message: message.into(),
            field: None,
        }
    }

    /// The stable machine code clients branch on.
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::InvalidRequest { .. } => "invalid_request",
            ApiError::MissingField { .. } => "missing_field",
            ApiError::UnknownSubmitter(_) => "unknown_submitter",
            ApiError::SubmitterProtected(_) => "submitter_protected",
            ApiError::IdempotencyConflict { .. } => "idempotency_conflict",
            ApiError::Overloaded { .. } => "overloaded",
            ApiError::Busy { .. } => "busy",
            ApiError::RateLimited { .. } => "rate_limited",
            ApiError::NotFound(_) => "not_found",
            ApiError::AgedOut(_) => "aged_out",
            ApiError::MethodNotAllowed(_) => "method_not_allowed",
            ApiError::PayloadTooLarge { .. } => "payload_too_large",
            ApiError::UnsupportedMediaType(_) => "unsupported_media_type",
            ApiError::MisdirectedRequest(_) => "misdirected_request",
            ApiError::Unavailable(_) => "unavailable",
            ApiError::Unauthorized => "unauthorized",
            ApiError::Forbidden { .. } => "forbidden",
            ApiError::PolicyViolation { .. } => "policy_violation",
            ApiError::Paused(_) => "paused",
            ApiError::InvalidState(_) => "invalid_state",
            ApiError::NotLeader { .. } => "not_leader",
            ApiError::ChainNotServed(_) => "chain_not_served",
            ApiError::InvalidConfig { .. } => "invalid_config",
            ApiError::Internal => "internal",
        }
    }

    /// The HTTP status of the code.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::InvalidRequest { .. } => StatusCode::BAD_REQUEST,
            ApiError::MissingField { .. } => StatusCode::BAD_REQUEST,
            ApiError::UnknownSubmitter(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::SubmitterProtected(_) | ApiError::Paused(_) => StatusCode::LOCKED,
            ApiError::IdempotencyConflict { .. } => StatusCode::CONFLICT,
            ApiError::Overloaded { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Busy { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::NotFound(_) | ApiError::AgedOut(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::MisdirectedRequest(_) => StatusCode::MISDIRECTED_REQUEST,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden { .. } | ApiError::PolicyViolation { .. } => StatusCode::FORBIDDEN,
            ApiError::InvalidState(_) => StatusCode::CONFLICT,
            ApiError::NotLeader { .. } | ApiError::ChainNotServed(_) => StatusCode::CONFLICT,
            ApiError::InvalidConfig { .. } => StatusCode::BAD_REQUEST,
            ApiError::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// `Retry-After` is whole seconds; round up so a client never retries early,
/// and never say 0 (which invites a busy loop).
fn retry_after_secs(retry_after: Duration) -> u64 {
    let secs = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
    secs.max(1)
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status(), Json(self.body())).into_response();
        response.extensions_mut().insert(ErrorCode(self.code()));
        if let ApiError::Overloaded { retry_after }
        | ApiError::Busy { retry_after, .. }
        | ApiError::RateLimited { retry_after, .. } = &self
        {
            response.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from(retry_after_secs(*retry_after)),
            );
        }
        if matches!(self, ApiError::Unauthorized) {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"txmgr\""),
            );
        }
        response
    }
}

impl From<CreateError> for ApiError {
    fn from(error: CreateError) -> Self {
        match error {
            CreateError::UnknownSubmitter(address) => ApiError::UnknownSubmitter(format!(
                "submitter {address:#x} is not configured on this deployment"
            )),
            CreateError::Draining(address) => ApiError::UnknownSubmitter(format!(
                "submitter {address:#x} is being removed and accepts no new work"
            )),
            CreateError::Protected(reason) => ApiError::SubmitterProtected(reason),
            CreateError::Paused(reason) => ApiError::Paused(reason),
            CreateError::Policy(violation) => ApiError::PolicyViolation {
                rule: violation.rule,
                field: violation.field,
                message: violation.to_string(),
            },
            CreateError::Overloaded { retry_after } => ApiError::Overloaded { retry_after },
            CreateError::Busy { retry_after } => ApiError::Busy {
                what: "creates waiting to be stored",
                retry_after,
            },
            CreateError::Unstorable(detail) => {
                tracing::warn!(target: "http", %detail, "create refused by the database");
                ApiError::invalid_request(
                    "the intent cannot be stored (the database refused its content)",
                )
            }
            CreateError::Unavailable(detail) => {
                // The detail may quote database errors: log it, do not return it.
                tracing::warn!(target: "http", %detail, "create unavailable");
                ApiError::Unavailable(
                    "the request could not be persisted in time; \
                     retrying with the same request_id is safe"
                        .to_owned(),
                )
            }
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match &error {
            // Connection trouble is transient: tell the client to retry.
            StoreError::Database(
                sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_),
            ) => {
                tracing::warn!(target: "http", %error, "database unavailable");
                ApiError::Unavailable("the database is unavailable; retry later".to_owned())
            }
            _ => {
                tracing::error!(target: "http", %error, "store error");
                ApiError::Internal
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_rounds_up_and_is_never_zero() {
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1500)), 2);
        assert_eq!(retry_after_secs(Duration::from_secs(3)), 3);
    }

    #[test]
    fn every_code_is_in_the_documented_set() {
        let every_variant = [
            ApiError::invalid_request("x"),
            ApiError::MissingField {
                field: "x".into(),
                message: "x".into(),
            },
            ApiError::UnknownSubmitter("x".into()),
            ApiError::SubmitterProtected("x".into()),
            ApiError::IdempotencyConflict { tx_id: Uuid::nil() },
            ApiError::Overloaded {
                retry_after: Duration::ZERO,
            },
            ApiError::Busy {
                what: "x",
                retry_after: Duration::ZERO,
            },
            ApiError::RateLimited {
                message: "x".into(),
                retry_after: Duration::ZERO,
            },
            ApiError::NotFound("x".into()),
            ApiError::AgedOut("x".into()),
            ApiError::MethodNotAllowed("x".into()),
            ApiError::PayloadTooLarge { limit: 1 },
            ApiError::UnsupportedMediaType("x".into()),
            ApiError::MisdirectedRequest("x".into()),
            ApiError::Unavailable("x".into()),
            ApiError::Unauthorized,
            ApiError::Forbidden {
                message: "x".into(),
                field: None,
            },
            ApiError::PolicyViolation {
                rule: "x",
                field: "x",
                message: "x".into(),
            },
            ApiError::Paused("x".into()),
            ApiError::InvalidState("x".into()),
            ApiError::NotLeader { owner: "x".into() },
            ApiError::ChainNotServed("x".into()),
            ApiError::InvalidConfig { issues: Vec::new() },
            ApiError::Internal,
        ];
        let mut codes: Vec<&str> = every_variant.iter().map(ApiError::code).collect();
        codes.sort_unstable();
        let mut documented = ERROR_CODES.to_vec();
        documented.sort_unstable();
        assert_eq!(codes, documented);
    }

    #[test]
    fn busy_is_503_with_retry_after() {
        let response = ApiError::Busy {
            what: "requests",
            retry_after: Duration::from_secs(1),
        }
        .into_response();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            response.headers().get(header::RETRY_AFTER),
            Some(&HeaderValue::from_static("1"))
        );
    }

    #[test]
    fn overloaded_carries_retry_after_header() {
        let response = ApiError::Overloaded {
            retry_after: Duration::from_millis(2500),
        }
        .into_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(
            response.headers().get(header::RETRY_AFTER),
            Some(&HeaderValue::from_static("3"))
        );
    }
}
