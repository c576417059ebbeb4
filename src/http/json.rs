//! A JSON body extractor whose every rejection is an [`ApiError`] in the API's
//! error shape — axum's own `Json` answers in plain text — and that names the
//! offending field whenever serde knows it.

use axum::{
    body::Bytes,
    extract::{rejection::BytesRejection, FromRequest, Request},
    http::{header, HeaderMap},
};
use serde::de::DeserializeOwned;

use super::{error::ApiError, AppState};

/// `Json<T>` for request bodies: requires `Content-Type: application/json`
/// (or `…+json`) and a JSON object (every body of this API is one; serde
/// would otherwise read an array positionally into a struct), buffers within
/// the body limit, and deserialises with the path of the failing field tracked.
#[derive(Debug, Clone)]
pub struct ApiJson<T>(pub T);

impl<T> FromRequest<AppState> for ApiJson<T>
where
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        if !is_json(request.headers()) {
            return Err(ApiError::invalid_request(
                "expected a JSON body with Content-Type: application/json",
            ));
        }
        let limit = state.limits.body_limit_bytes;
        let bytes =
            Bytes::from_request(request, state)
                .await
                .map_err(|rejection| match rejection {
                    BytesRejection::FailedToBufferBody(
                        axum::extract::rejection::FailedToBufferBody::LengthLimitError(_),
                    ) => ApiError::PayloadTooLarge { limit },
                    other => ApiError::invalid_request(format!("could not read the body: {other}")),
                })?;
        if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            return Err(ApiError::invalid_request("the body must be a JSON object"));
        }
        parse(&bytes).map(ApiJson)
    }
}

/// Deserialises `bytes`, turning serde's error into a 400 with the field path
/// (`value`, `items[2].to`) when there is one.
pub(crate) fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let deserializer = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(deserializer).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner();
        let message = match inner.classify() {
            serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                // Where the parser stopped is not a field at fault: the body
                // as a whole is not JSON.
                return ApiError::invalid_request(format!("malformed JSON: {inner}"));
            }
            serde_json::error::Category::Io => format!("could not read JSON: {inner}"),
            serde_json::error::Category::Data => inner.to_string(),
        };
        // `?` marks a segment serde could not name (e.g. an array where an
        // object was expected).
        let field = if path.is_empty() || path == "." || path == "?" {
            // Missing and unknown fields are reported against the enclosing
            // object; serde names them in the message.
            quoted_field(&message)
        } else {
            Some(path)
        };
        ApiError::InvalidRequest { message, field }
    })
}

/// The name in serde's ``unknown field `x`` / ``missing field `x`` messages.
fn quoted_field(message: &str) -> Option<String> {
    let rest = ["unknown field `", "missing field `"]
        .iter()
        .find_map(|prefix| message.strip_prefix(prefix))?;
    let end = rest.find('`')?;
    Some(rest[..end].to_owned())
}

/// True for `application/json` and `application/*+json`, parameters ignored.
pub(crate) fn is_json(headers: &HeaderMap) -> bool {
    let Some(content_type) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
    else {
        return false;
    };
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Body {
        name: String,
        count: Option<u32>,
    }

    fn field_of(json: &str) -> Option<String> {
        match parse::<Body>(json.as_bytes()) {
            Err(ApiError::InvalidRequest { field, .. }) => field,
            other => panic!("expected invalid_request, got {other:?}"),
        }
    }

    #[test]
    fn errors_name_the_field() {
        assert_eq!(
            field_of(r#"{"name":"a","count":"x"}"#).as_deref(),
            Some("count")
        );
        assert_eq!(
            field_of(r#"{"name":"a","bogus":1}"#).as_deref(),
            Some("bogus")
        );
        assert_eq!(field_of(r#"{"count":1}"#).as_deref(), Some("name"));
        assert_eq!(field_of(r#"{"name":"a""#), None);
        assert_eq!(field_of(r#"{"name":"#), None);
    }

    #[test]
    fn json_content_types() {
        let mut headers = HeaderMap::new();
        assert!(!is_json(&headers));
        for (value, ok) in [
            ("application/json", true),
            ("Application/JSON; charset=utf-8", true),
            ("application/merge-patch+json", true),
            ("text/plain", false),
        ] {
            headers.insert(
                header::CONTENT_TYPE,
                value.parse().expect("static header value"),
            );
            assert_eq!(is_json(&headers), ok, "{value}");
        }
    }
}
