//! The body of every error answer: `{"error":{"code","message","field"?}}`,
//! whose `code` is one of the closed set [`ErrorCode`].

use std::{fmt, str::FromStr};

use serde::{Deserialize, Serialize};
use utoipa::{
    openapi::{schema::Type, Object, ObjectBuilder},
    ToSchema,
};
use uuid::Uuid;

/// Declares [`ErrorCode`] with its wire names, in one list.
macro_rules! error_codes {
    ($($(#[$doc:meta])* $variant:ident = $name:literal,)*) => {
        /// The machine code of an error answer: clients branch on it (the
        /// message is for humans and may change between versions).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ErrorCode {
            $($(#[$doc])* $variant,)*
            /// A code this version of the crate does not know (a newer daemon).
            Unknown,
        }

        /// Every code the daemon answers with, as sent.
        pub const ERROR_CODES: &[&str] = &[$($name,)*];

        impl ErrorCode {
            /// The wire name (`invalid_request`, …; `unknown` for [`ErrorCode::Unknown`]).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $name,)*
                    ErrorCode::Unknown => "unknown",
                }
            }

            /// The code named `name`; [`ErrorCode::Unknown`] for any other.
            pub fn from_name(name: &str) -> ErrorCode {
                match name {
                    $($name => ErrorCode::$variant,)*
                    _ => ErrorCode::Unknown,
                }
            }
        }
    };
}

error_codes! {
    /// 400: a malformed body, parameter or header (`field` names it).
    InvalidRequest = "invalid_request",
    /// 400: a required field is absent (`field` names it).
    MissingField = "missing_field",
    /// 401: no token, or an unknown one.
    Unauthorized = "unauthorized",
    /// 403: the token may not do this (role, submitter or chain allow-list).
    Forbidden = "forbidden",
    /// 403: a guardrail refused the intent (`rule` and `field` name it).
    PolicyViolation = "policy_violation",
    /// 404: no such transaction, route or resource.
    NotFound = "not_found",
    /// 404: the intent existed but left with history retention.
    AgedOut = "aged_out",
    /// 405: the route does not take this method.
    MethodNotAllowed = "method_not_allowed",
    /// 409: the request id is taken by an intent with other content (`tx_id` names it).
    IdempotencyConflict = "idempotency_conflict",
    /// 409: the intent's state does not allow the action.
    InvalidState = "invalid_state",
    /// 409: another node leads the submitter (`owner` names it).
    NotLeader = "not_leader",
    /// 409 / 422: the chain is not served by the answering node.
    ChainNotServed = "chain_not_served",
    /// 413: the body is larger than the limit.
    PayloadTooLarge = "payload_too_large",
    /// 415: the body is not `application/json`.
    UnsupportedMediaType = "unsupported_media_type",
    /// 421: a TLS name that is not this node's.
    MisdirectedRequest = "misdirected_request",
    /// 422: the submitter is not configured on the chain.
    UnknownSubmitter = "unknown_submitter",
    /// 423: the submitter is protected after an external nonce use.
    SubmitterProtected = "submitter_protected",
    /// 423: the submitter is paused.
    Paused = "paused",
    /// 429: too many intents waiting; retry after `Retry-After`.
    Overloaded = "overloaded",
    /// 429: the token is over its rate; retry after `Retry-After`.
    RateLimited = "rate_limited",
    /// 400: a configuration reload was refused (`issues` lists why).
    InvalidConfig = "invalid_config",
    /// 500: a fault on the node; details only in its log.
    Internal = "internal",
    /// 503: the database (or another dependency) is unavailable.
    Unavailable = "unavailable",
    /// 503: the node is at a capacity limit; retry after `Retry-After`.
    Busy = "busy",
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ErrorCode {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(ErrorCode::from_name(s))
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ErrorCode {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        Ok(ErrorCode::from_name(&name))
    }
}

/// The body of every error answer: `{"error": {...}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorResponse {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// Inside [`ErrorResponse`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable machine code; clients branch on it.
    #[schema(schema_with = error_code_schema)]
    pub code: ErrorCode,
    /// For humans; may change between versions.
    pub message: String,
    /// The body field, query parameter, header-backed field or path segment
    /// at fault, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// Every problem of a rejected configuration (`invalid_config` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issues: Option<Vec<ErrorIssue>>,
    /// The node holding the submitter's lease, to ask instead (`not_leader` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The policy rule that refused the request (`policy_violation` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The intent that holds the request id (`idempotency_conflict` only):
    /// a client that lost the first answer reads it by this id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_id: Option<Uuid>,
}

/// One problem of a rejected configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_and_a_new_one_reads_as_unknown() {
        for name in ERROR_CODES {
            let code = ErrorCode::from_name(name);
            assert_ne!(code, ErrorCode::Unknown, "{name}");
            assert_eq!(code.as_str(), *name);
            let json = serde_json::to_string(&code).expect("serialises");
            assert_eq!(serde_json::from_str::<ErrorCode>(&json).ok(), Some(code));
        }
        let newer: ErrorCode = serde_json::from_str("\"quota_exceeded\"").expect("reads");
        assert_eq!(newer, ErrorCode::Unknown);
    }
}
