//! `GET /v1/openapi.json`: the OpenAPI 3.1 document of the API, generated
//! with `utoipa` from the handlers and the wire types themselves.
//!
//! ```text
//! #[utoipa::path] on a handler ─┬─► utoipa_axum routes it at that path ─────► router
//!                               └─► its operation: parameters, body, statuses ─► document
//! ToSchema on the wire types (TxView, CreateBody, ErrorResponse, …) ──────────► schemas
//! auth, body limit, timeout, concurrency limit ─► edge_responses adds their statuses
//! ```
//!
//! A handler's annotation lists what the handler itself answers; what the
//! layers around every handler answer is added by [`complete`], from the
//! same predicates the authentication middleware uses. [`ROUTES`] is the API
//! surface as tests expect it: the document lists exactly these routes and
//! the router answers each of them.

use axum::{body::Bytes, http::header, response::IntoResponse, Extension};
use utoipa::{
    openapi::{
        header::HeaderBuilder,
        path::Operation,
        schema::{OneOfBuilder, Type},
        security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme},
        ContentBuilder, ObjectBuilder, Ref, RefOr, Response, ResponseBuilder, Schema,
    },
    Modify, OpenApi,
};

use super::{auth, error::ErrorResponse, tx_actions::ActionAccepted};

/// Every route of the API: `(method, path)`.
pub const ROUTES: &[(&str, &str)] = &[
    ("post", "/v1/transactions"),
    ("get", "/v1/transactions"),
    ("get", "/v1/transactions/{tx_id}"),
    ("post", "/v1/transactions/{tx_id}/cancel"),
    ("post", "/v1/transactions/{tx_id}/speedup"),
    ("post", "/v1/transactions/{tx_id}/rebroadcast"),
    ("post", "/v1/transactions/{tx_id}/requeue"),
    ("get", "/v1/completions"),
    ("get", "/v1/ops/actors"),
    ("get", "/v1/ops/cluster"),
    ("get", "/v1/ops/database"),
    ("get", "/v1/ops/endpoints"),
    ("post", "/v1/ops/submitters/{address}/restart"),
    ("post", "/v1/ops/submitters/{address}/unprotect"),
    ("post", "/v1/ops/submitters/{address}/pause"),
    ("post", "/v1/ops/submitters/{address}/resume"),
    ("post", "/v1/ops/reload"),
    ("get", "/v1/ops/webhooks"),
    ("post", "/v1/ops/webhooks/{name}/redeliver"),
    ("get", "/v1/ops/history"),
    ("get", "/v1/ops/history/submitters/{address}"),
    ("get", "/v1/ops/transactions/{key}"),
    ("get", "/v1/openapi.json"),
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("get", "/metrics"),
    ("get", "/ops/"),
];

/// Name of the error body's schema in `components.schemas`.
const ERROR_SCHEMA: &str = "ErrorResponse";

/// What the document starts from before the routes add their operations.
#[derive(OpenApi)]
#[openapi(
    info(title = "txmgr", description = "Durable, fenced EVM transaction submission"),
    // ActionAccepted: the action routes answer it through one response list
    // (`tx_actions::ActionAnswers`), which references it without adding it.
    // WebhookEvent: what receivers get (no route answers it; README "Webhooks").
    components(schemas(ErrorResponse, ActionAccepted, txmgr_api::WebhookEvent)),
    modifiers(&BearerAuth)
)]
struct ApiBase;

/// Adds the bearer scheme and requires it everywhere unless an operation
/// says otherwise ([`complete`] opens the open paths).
struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
        openapi.security = Some(vec![bearer()]);
    }
}

fn bearer() -> SecurityRequirement {
    SecurityRequirement::new("bearer", Vec::<String>::new())
}

/// The document before the routes are added (info, security, error schema).
pub(crate) fn base() -> utoipa::openapi::OpenApi {
    ApiBase::openapi()
}

/// The whole document, as `GET /v1/openapi.json` serves it.
pub fn document() -> utoipa::openapi::OpenApi {
    let mut doc = super::documented_routes().into_openapi();
    complete(&mut doc);
    doc
}

/// Adds to every operation what the layers around the handlers answer, and
/// marks the open paths as needing no token.
pub(crate) fn complete(doc: &mut utoipa::openapi::OpenApi) {
    for (path, item) in &mut doc.paths.paths {
        let reads = [&mut item.get];
        let changes = [
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ];
        for operation in reads.into_iter().flatten() {
            status_headers(operation);
            edge_responses(path, operation);
        }
        for operation in changes.into_iter().flatten() {
            status_headers(operation);
            edge_responses(path, operation);
            add_error(
                operation,
                415,
                "unsupported_media_type: no `Content-Type: application/json` (required on \
                 every POST, even with an empty body, so that no web page can send it \
                 cross-site)",
            );
        }
    }
}

/// The headers of the error statuses a handler documents itself (a
/// create's 429 carries `Retry-After` as the layers' do).
fn status_headers(operation: &mut Operation) {
    for (status, response) in &mut operation.responses.responses {
        if let (Ok(status), RefOr::T(response)) = (status.parse::<u16>(), response) {
            add_status_header(response, status);
        }
    }
}

/// The statuses of the middleware stack in front of `path`'s handler.
fn edge_responses(path: &str, operation: &mut Operation) {
    let always_open = auth::is_open(path, false);
    let never_open = !auth::is_open(path, true);
    if always_open {
        operation.security = Some(Vec::new());
    } else {
        let when = if never_open {
            ""
        } else {
            // Open or not by configuration (`/metrics`).
            operation.security = Some(vec![SecurityRequirement::default(), bearer()]);
            " (when `/metrics` is not public: `http.metrics_public = false`, or unset with tokens configured)"
        };
        add_error(
            operation,
            401,
            &format!(
                "unauthorized: no bearer token, or one that matches no configured token \
                 (when `[[auth.tokens]]` are configured){when}; `WWW-Authenticate: Bearer`"
            ),
        );
        if auth::ops_only(path) {
            add_error(
                operation,
                403,
                &format!("forbidden: the token lacks the ops role{when}"),
            );
        }
    }
    add_error(
        operation,
        413,
        "payload_too_large: the request body exceeds `http.body_limit_bytes`",
    );
    add_error(
        operation,
        421,
        "misdirected_request: no `[[auth.tokens]]` are configured and the `Host` header is \
         not the node's own (`localhost`, `127.0.0.1` or `[::1]` with its port, or \
         `http.listen`): DNS rebinding",
    );
    add_error(
        operation,
        503,
        "busy: the node is at its limit of concurrent requests (`http.max_concurrent_requests`; \
         the probes have their own) or, for a list or feed page, of page bytes in flight \
         (`http.page_bytes_in_flight`), nothing was done, retry after `Retry-After` seconds; or \
         unavailable: the request did not complete within `http.request_timeout`; retrying is safe",
    );
}

/// Documents `status` with the error body. A status the handler already
/// documents keeps its text (the layer's meaning is appended) and, if its
/// body differs, becomes either body.
fn add_error(operation: &mut Operation, status: u16, description: &str) {
    let key = status.to_string();
    let error_ref: RefOr<Schema> = Ref::from_schema_name(ERROR_SCHEMA).into();
    match operation.responses.responses.get_mut(&key) {
        Some(RefOr::T(existing)) => {
            existing.description = format!("{}; or {description}", existing.description);
            add_status_header(existing, status);
            for content in existing.content.values_mut() {
                let RefOr::T(content) = content else { continue };
                let differs = match &content.schema {
                    Some(RefOr::Ref(r)) => !r.ref_location.ends_with(ERROR_SCHEMA),
                    _ => true,
                };
                if differs {
                    let mut either = OneOfBuilder::new();
                    if let Some(schema) = content.schema.take() {
                        either = either.item(schema);
                    }
                    content.schema = Some(either.item(error_ref.clone()).into());
                }
            }
        }
        Some(RefOr::Ref(_)) => {}
        None => {
            operation
                .responses
                .responses
                .insert(key, RefOr::T(error_response(status, description)));
        }
    }
}

/// A response with the error body (and the header the status carries).
fn error_response(status: u16, description: &str) -> Response {
    let mut response = ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name(ERROR_SCHEMA)))
                .build(),
        )
        .build();
    add_status_header(&mut response, status);
    response
}

/// Adds the header an error `status` carries (`WWW-Authenticate` on 401,
/// `Retry-After` on 429 and 503), unless the response lists it already.
fn add_status_header(response: &mut Response, status: u16) {
    let (name, what) = match status {
        401 => ("WWW-Authenticate", "`Bearer realm=\"txmgr\"`"),
        429 | 503 => (
            "Retry-After",
            "whole seconds to wait before retrying (`overloaded`, `rate_limited`, `busy`); \
             absent when the answer gives no time",
        ),
        _ => return,
    };
    if response.headers.contains_key(name) {
        return;
    }
    let schema = ObjectBuilder::new().schema_type(Type::String).build();
    response.headers.insert(
        name.to_owned(),
        HeaderBuilder::new()
            .schema(Some(schema))
            .description(Some(what))
            .build()
            .into(),
    );
}

/// The document rendered once, when the router is built.
#[derive(Clone)]
pub(crate) struct RenderedDocument(Bytes);

impl RenderedDocument {
    /// Serialises `doc`.
    pub(crate) fn new(doc: &utoipa::openapi::OpenApi) -> Self {
        // Serialising plain data structures (maps, strings) cannot fail.
        let json = serde_json::to_vec(doc).unwrap_or_default();
        RenderedDocument(Bytes::from(json))
    }
}

/// `GET /v1/openapi.json`.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "meta",
    responses((status = 200, description = "this document (OpenAPI 3.1)", content_type = "application/json")))]
pub(crate) async fn serve(Extension(doc): Extension<RenderedDocument>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], doc.0)
}
