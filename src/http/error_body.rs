//! The wire form of an [`ApiError`]: `{"error":{"code","message","field"?}}`
//! and its OpenAPI schema, whose `code` is the closed set [`ERROR_CODES`].

use serde::Serialize;
use utoipa::{
    openapi::{schema::Type, Object, ObjectBuilder},
    ToSchema,
};

use super::error::ApiError;

/// Every `code` an [`ApiError`] can carry (the schema's enum of
/// [`ErrorDetail::code`]; a test checks it against [`ApiError::code`]).
pub const ERROR_CODES: &[&str] = &[
    "invalid_request",
    "missing_field",
    "unauthorized",
    "forbidden",
    "policy_violation",
    "not_found",
    "aged_out",
    "method_not_allowed",
    "idempotency_conflict",
    "invalid_state",
    "not_leader",
    "chain_not_served",
    "payload_too_large",
    "unsupported_media_type",
    "misdirected_request",
    "unknown_submitter",
    "submitter_protected",
    "paused",
    "overloaded",
    "rate_limited",
    "invalid_config",
    "internal",
    "unavailable",
    "busy",
];

/// The body of every error answer: `{"error": {...}}`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorResponse {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// Inside [`ErrorResponse`].
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable machine code; clients branch on it.
    #[schema(schema_with = error_code_schema)]
    pub code: &'static str,
    /// For humans; may change between versions.
    pub message: String,
    /// The body field, query parameter, header-backed field or path segment
    /// at fault, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// Every problem of a rejected configuration (`invalid_config` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issues: Option<Vec<ErrorIssue>>,
    /// The node holding the submitter's lease, to ask instead (`not_leader` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The policy rule that refused the request (`policy_violation` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<&'static str>,
    /// The intent that holds the request id (`idempotency_conflict` only):
    /// a client that lost the first answer reads it by this id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_id: Option<uuid::Uuid>,
}

/// One problem of a rejected configuration.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorIssue {
    /// Dotted key path.
    pub key: String,
    /// What is wrong with it.
    pub reason: String,
}

/// `code` as a closed set of strings.
fn error_code_schema() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(ERROR_CODES.iter().copied()))
        .build()
}

impl ApiError {
    /// The wire form of this error.
    pub fn body(&self) -> ErrorResponse {
        let field = match self {
            ApiError::InvalidRequest { field, .. } | ApiError::Forbidden { field, .. } => {
                field.clone()
            }
            ApiError::InvalidConfig { issues } => issues.first().map(|(key, _)| key.clone()),
            ApiError::MissingField { field, .. } => Some(field.clone()),
            ApiError::PolicyViolation { field, .. } => Some((*field).to_owned()),
            ApiError::IdempotencyConflict { .. } => Some("request_id".to_owned()),
            _ => None,
        };
        let tx_id = match self {
            ApiError::IdempotencyConflict { tx_id } => Some(*tx_id),
            _ => None,
        };
        let rule = match self {
            ApiError::PolicyViolation { rule, .. } => Some(*rule),
            _ => None,
        };
        let issues = match self {
            ApiError::InvalidConfig { issues } => Some(
                issues
                    .iter()
                    .map(|(key, reason)| ErrorIssue {
                        key: key.clone(),
                        reason: reason.clone(),
                    })
                    .collect(),
            ),
            _ => None,
        };
        let owner = match self {
            ApiError::NotLeader { owner } => Some(owner.clone()),
            _ => None,
        };
        ErrorResponse {
            error: ErrorDetail {
                code: self.code(),
                message: self.to_string(),
                field,
                issues,
                owner,
                rule,
                tx_id,
            },
        }
    }
}
