//! The wire form of an [`ApiError`]: `{"error":{"code","message","field"?}}`
//! (the types are `txmgr_api`'s, with the OpenAPI schema whose `code` is the
//! closed set [`ERROR_CODES`]).

use super::error::ApiError;
/// The wire form, as the API crate defines it.
pub use txmgr_api::{ErrorDetail, ErrorIssue, ErrorResponse, ERROR_CODES};

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
            ApiError::PolicyViolation { rule, .. } => Some((*rule).to_owned()),
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
                code: txmgr_api::ErrorCode::from_name(self.code()),
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
