//! A path-parameter extractor whose rejections are [`ApiError`]s in the
//! API's error shape — axum's own `Path` answers in plain text (e.g. a
//! parameter that is not UTF-8 once percent-decoded).

use axum::{
    extract::{path::ErrorKind, rejection::PathRejection, FromRequestParts, Path},
    http::request::Parts,
};
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// `Path<T>` answering 400 `invalid_request` (with the parameter as
/// `field` when known) instead of axum's plain-text rejection.
#[derive(Debug, Clone)]
pub struct ApiPath<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(ApiPath(value)),
            Err(PathRejection::FailedToDeserializePathParams(error)) => {
                let message = error.body_text();
                let field = match error.into_kind() {
                    ErrorKind::ParseErrorAtKey { key, .. }
                    | ErrorKind::InvalidUtf8InPathParam { key }
                    | ErrorKind::DeserializeError { key, .. } => Some(key),
                    _ => None,
                };
                Err(ApiError::InvalidRequest { message, field })
            }
            // No parameters at all: the handler is mounted on a route
            // without them, a bug of ours.
            Err(other) => {
                tracing::error!(target: "http", error = %other, "path parameters missing");
                Err(ApiError::Internal)
            }
        }
    }
}
