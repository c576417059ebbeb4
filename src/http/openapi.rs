//! `GET /v1/openapi.json`: the OpenAPI 3.1 document of every route, generated
//! with `utoipa` from the operation descriptions below and the response
//! types of the ops surface.
//!
//! The client API's handlers live in modules that predate this document;
//! their operations are described here by signature-only functions, and the
//! wire types they use are mirrored as schema types. [`ROUTES`] lists every
//! route of [`app`](super::app); a test checks that the document and the
//! router agree with it.

use axum::Json;
use serde::Serialize;
use utoipa::{
    openapi::security::{Http, HttpAuthScheme, SecurityScheme},
    Modify, OpenApi, ToSchema,
};

use super::{
    health::HealthView,
    ops_endpoints::EndpointsView,
    ops_state::ReloadReport,
    ops_views::{
        ActionView, ActorView, ActorsView, ClusterView, LeaseView, NodeView, PoolsView,
        UnprotectBody,
    },
};

/// Every route of the router: `(method, path)`.
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
    ("get", "/v1/ops/endpoints"),
    ("post", "/v1/ops/submitters/{address}/restart"),
    ("post", "/v1/ops/submitters/{address}/unprotect"),
    ("post", "/v1/ops/reload"),
    ("get", "/v1/openapi.json"),
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("get", "/metrics"),
    ("get", "/ops/"),
];

/// The error shape of every non-2xx answer.
#[derive(Serialize, ToSchema)]
pub struct ErrorDoc {
    /// The error.
    pub error: ErrorBodyDoc,
}

/// Inside [`ErrorDoc`].
#[derive(Serialize, ToSchema)]
pub struct ErrorBodyDoc {
    /// Stable machine code: invalid_request, unauthorized, forbidden, not_found,
    /// idempotency_conflict, invalid_state, not_leader, payload_too_large, unknown_submitter,
    /// submitter_protected, overloaded, invalid_config, internal, unavailable.
    pub code: String,
    /// For humans.
    pub message: String,
    /// The input at fault, when known.
    pub field: Option<String>,
    /// `invalid_config` only: every `{key, reason}`.
    pub issues: Option<Vec<ConfigIssueDoc>>,
    /// `not_leader` only: the node holding the lease.
    pub owner: Option<String>,
}

/// One problem of a rejected configuration.
#[derive(Serialize, ToSchema)]
pub struct ConfigIssueDoc {
    /// Dotted key path.
    pub key: String,
    /// What is wrong.
    pub reason: String,
}

/// `POST /v1/transactions` body. Amounts are decimal or `0x` strings in wei.
#[derive(Serialize, ToSchema)]
pub struct CreateBodyDoc {
    /// The submitter's address.
    pub submitter: String,
    /// Idempotency key (or the `Idempotency-Key` header).
    pub request_id: Option<String>,
    /// Recipient; absent = contract creation.
    pub to: Option<String>,
    /// Wei.
    pub value: Option<String>,
    /// `0x` hex calldata.
    pub data: Option<String>,
    /// Gas limit; estimated when absent.
    pub gas_limit: Option<u64>,
    /// Wei per gas.
    pub max_fee_per_gas: Option<String>,
    /// Wei per gas.
    pub max_priority_fee_per_gas: Option<String>,
}

/// Answer of a create.
#[derive(Serialize, ToSchema)]
pub struct CreatedDoc {
    /// The intent's id.
    pub tx_id: String,
    /// Its state (`QUEUED` when new).
    pub state: String,
    /// The submitter.
    pub submitter: String,
    /// The idempotency key.
    pub request_id: Option<String>,
}

/// The receipt of a mined transaction.
#[derive(Serialize, ToSchema)]
pub struct ReceiptDoc {
    /// Block number.
    pub block_number: u64,
    /// Block hash.
    pub block_hash: String,
    /// 1 success, 0 reverted.
    pub status: u8,
    /// Gas used.
    pub gas_used: String,
    /// Effective gas price (wei).
    pub effective_gas_price: String,
}

/// A transaction as `GET /v1/transactions…` shows it.
#[derive(Serialize, ToSchema)]
pub struct TxDoc {
    /// Id.
    pub tx_id: String,
    /// Submitter.
    pub submitter: String,
    /// Idempotency key.
    pub request_id: Option<String>,
    /// QUEUED, ALLOCATED, TRACKING, STUCK, CONFIRMED, FAILED_FINAL, REJECTED, CANCELLED.
    pub state: String,
    /// More detail on the state.
    pub sub_state: Option<String>,
    /// Assigned nonce.
    pub nonce: Option<u64>,
    /// Latest attempt's hash.
    pub tx_hash: Option<String>,
    /// The attempt that was mined.
    pub mined_tx_hash: Option<String>,
    /// Recipient.
    pub to: Option<String>,
    /// Wei.
    pub value: String,
    /// Signed attempts.
    pub attempts: u32,
    /// Last error.
    pub last_error: Option<String>,
    /// Receipt once mined.
    pub receipt: Option<ReceiptDoc>,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
    /// RFC 3339.
    pub confirmed_at: Option<String>,
}

/// A page of transactions.
#[derive(Serialize, ToSchema)]
pub struct TxPageDoc {
    /// Items.
    pub items: Vec<TxDoc>,
    /// Cursor of the next page (`after`), null on the last.
    pub next: Option<String>,
}

/// One completion.
#[derive(Serialize, ToSchema)]
pub struct CompletionDoc {
    /// Opaque cursor of this item.
    pub cursor: String,
    /// Intent id.
    pub tx_id: String,
    /// Submitter.
    pub submitter: String,
    /// Idempotency key.
    pub request_id: Option<String>,
    /// The state reached (a terminal state, or STUCK).
    pub state: String,
    /// RFC 3339.
    pub completed_at: String,
}

/// A page of the completion feed.
#[derive(Serialize, ToSchema)]
pub struct CompletionPageDoc {
    /// Items in feed order.
    pub items: Vec<CompletionDoc>,
    /// Pass as `after` next time.
    pub next_after: Option<String>,
}

/// Optional body of a transaction action.
#[derive(Serialize, ToSchema)]
pub struct ActionBodyDoc {
    /// Why (kept in the audit log), up to 500 characters.
    pub reason: Option<String>,
}

/// Answer to an accepted transaction action.
#[derive(Serialize, ToSchema)]
pub struct ActionAcceptedDoc {
    /// The transaction.
    pub tx_id: String,
    /// `cancel` | `speedup` | `rebroadcast` | `requeue`.
    pub action: String,
    /// `done` (a QUEUED intent was cancelled, no nonce used) or `requested`
    /// (the submitter's leader acts next, fenced).
    pub status: String,
    /// The state after the request.
    pub state: String,
}

/// Signature-only operations: they exist for the generator, never run.
#[allow(dead_code)]
mod operations {
    use super::*;

    #[utoipa::path(post, path = "/v1/transactions", tag = "transactions",
        request_body = CreateBodyDoc,
        params(("Idempotency-Key" = Option<String>, Header, description = "same as request_id")),
        responses((status = 202, description = "accepted", body = CreatedDoc),
            (status = 200, description = "replay", body = CreatedDoc),
            (status = 400, description = "invalid_request", body = ErrorDoc), (status = 401, description = "unauthorized", body = ErrorDoc), (status = 403, description = "forbidden", body = ErrorDoc),
            (status = 409, description = "conflict", body = ErrorDoc), (status = 422, description = "unknown_submitter", body = ErrorDoc), (status = 423, description = "submitter_protected", body = ErrorDoc),
            (status = 429, description = "overloaded", body = ErrorDoc), (status = 503, description = "unavailable", body = ErrorDoc)))]
    fn create_transaction() {}

    #[utoipa::path(get, path = "/v1/transactions", tag = "transactions",
        params(("submitter" = String, Query), ("request_id" = Option<String>, Query),
            ("state" = Option<String>, Query), ("limit" = Option<u32>, Query), ("after" = Option<String>, Query)),
        responses((status = 200, description = "one (with request_id) or a page", body = TxPageDoc),
            (status = 400, description = "invalid_request", body = ErrorDoc), (status = 403, description = "forbidden", body = ErrorDoc), (status = 404, description = "not_found", body = ErrorDoc)))]
    fn list_transactions() {}

    #[utoipa::path(get, path = "/v1/transactions/{tx_id}", tag = "transactions",
        params(("tx_id" = String, Path)),
        responses((status = 200, description = "ok", body = TxDoc), (status = 404, description = "not_found", body = ErrorDoc)))]
    fn get_transaction() {}

    #[utoipa::path(post, path = "/v1/transactions/{tx_id}/cancel", tag = "transactions",
        description = "QUEUED: cancelled at once, no nonce used. ALLOCATED (signed), TRACKING, STUCK: the leader replaces it with a 0-value self-transfer at its nonce; it ends CANCELLED if that is final, CONFIRMED if the original wins.",
        params(("tx_id" = String, Path)), request_body(content = Option<ActionBodyDoc>),
        responses((status = 202, description = "accepted", body = ActionAcceptedDoc),
            (status = 400, description = "invalid_request", body = ErrorDoc), (status = 403, description = "forbidden", body = ErrorDoc),
            (status = 404, description = "not_found", body = ErrorDoc), (status = 409, description = "invalid_state", body = ErrorDoc)))]
    fn cancel_transaction() {}

    #[utoipa::path(post, path = "/v1/transactions/{tx_id}/speedup", tag = "transactions",
        description = "TRACKING or STUCK, not mined: the leader signs a fee bump now, within the caps.",
        params(("tx_id" = String, Path)), request_body(content = Option<ActionBodyDoc>),
        responses((status = 202, description = "accepted", body = ActionAcceptedDoc),
            (status = 400, description = "invalid_request", body = ErrorDoc), (status = 403, description = "forbidden", body = ErrorDoc),
            (status = 404, description = "not_found", body = ErrorDoc), (status = 409, description = "invalid_state", body = ErrorDoc)))]
    fn speedup_transaction() {}

    #[utoipa::path(post, path = "/v1/transactions/{tx_id}/rebroadcast", tag = "transactions",
        description = "TRACKING or STUCK, not mined: the leader re-broadcasts the newest attempt's identical bytes now.",
        params(("tx_id" = String, Path)), request_body(content = Option<ActionBodyDoc>),
        responses((status = 202, description = "accepted", body = ActionAcceptedDoc),
            (status = 400, description = "invalid_request", body = ErrorDoc), (status = 403, description = "forbidden", body = ErrorDoc),
            (status = 404, description = "not_found", body = ErrorDoc), (status = 409, description = "invalid_state", body = ErrorDoc)))]
    fn rebroadcast_transaction() {}

    #[utoipa::path(post, path = "/v1/transactions/{tx_id}/requeue", tag = "transactions",
        description = "STUCK with sub_state nonce_consumed_externally (a transaction that is not ours took its nonce; it never executed): back to QUEUED at once, sent again with a fresh nonce.",
        params(("tx_id" = String, Path)), request_body(content = Option<ActionBodyDoc>),
        responses((status = 202, description = "accepted", body = ActionAcceptedDoc),
            (status = 400, description = "invalid_request", body = ErrorDoc), (status = 403, description = "forbidden", body = ErrorDoc),
            (status = 404, description = "not_found", body = ErrorDoc), (status = 409, description = "invalid_state", body = ErrorDoc)))]
    fn requeue_transaction() {}

    #[utoipa::path(get, path = "/v1/completions", tag = "transactions",
        params(("after" = Option<String>, Query), ("limit" = Option<u32>, Query),
            ("wait" = Option<String>, Query, description = "long poll, e.g. 30s")),
        responses((status = 200, description = "ok", body = CompletionPageDoc), (status = 400, description = "invalid_request", body = ErrorDoc)))]
    fn completions() {}

    #[utoipa::path(get, path = "/v1/ops/actors", tag = "ops",
        responses((status = 200, description = "ok", body = ActorsView), (status = 401, description = "unauthorized", body = ErrorDoc), (status = 403, description = "forbidden", body = ErrorDoc)))]
    fn ops_actors() {}

    #[utoipa::path(get, path = "/v1/ops/cluster", tag = "ops",
        responses((status = 200, description = "ok", body = ClusterView), (status = 403, description = "forbidden", body = ErrorDoc)))]
    fn ops_cluster() {}

    #[utoipa::path(get, path = "/v1/ops/endpoints", tag = "ops",
        responses((status = 200, description = "ok", body = EndpointsView), (status = 401, description = "unauthorized", body = ErrorDoc), (status = 403, description = "forbidden", body = ErrorDoc)))]
    fn ops_endpoints() {}

    #[utoipa::path(post, path = "/v1/ops/submitters/{address}/restart", tag = "ops",
        params(("address" = String, Path)),
        responses((status = 200, description = "ok", body = ActionView), (status = 422, description = "unknown_submitter", body = ErrorDoc)))]
    fn ops_restart() {}

    #[utoipa::path(post, path = "/v1/ops/submitters/{address}/unprotect", tag = "ops",
        params(("address" = String, Path)), request_body = UnprotectBody,
        responses((status = 200, description = "ok", body = ActionView), (status = 409, description = "not_leader", body = ErrorDoc)))]
    fn ops_unprotect() {}

    #[utoipa::path(post, path = "/v1/ops/reload", tag = "ops",
        responses((status = 200, description = "ok", body = ReloadReport), (status = 400, description = "invalid_config", body = ErrorDoc)))]
    fn ops_reload() {}

    #[utoipa::path(get, path = "/v1/openapi.json", tag = "meta", responses((status = 200, description = "this document")))]
    fn openapi_doc() {}

    #[utoipa::path(get, path = "/healthz", tag = "meta", responses((status = 200, description = "ok", body = HealthView)))]
    fn healthz() {}

    #[utoipa::path(get, path = "/readyz", tag = "meta",
        responses((status = 200, description = "ok", body = HealthView), (status = 503, description = "unavailable", body = HealthView)))]
    fn readyz() {}

    #[utoipa::path(get, path = "/metrics", tag = "meta",
        responses((status = 200, description = "Prometheus text format", content_type = "text/plain")))]
    fn metrics() {}

    #[utoipa::path(get, path = "/ops/", tag = "meta",
        responses((status = 200, description = "the ops dashboard", content_type = "text/html")))]
    fn dashboard() {}
}

/// Adds the bearer scheme and requires it everywhere by default.
struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
        openapi.security = Some(vec![utoipa::openapi::security::SecurityRequirement::new(
            "bearer",
            Vec::<String>::new(),
        )]);
    }
}

/// The document.
#[derive(OpenApi)]
#[openapi(
    info(title = "txmgr", description = "Durable, fenced EVM transaction submission"),
    paths(operations::create_transaction, operations::list_transactions,
        operations::get_transaction, operations::cancel_transaction,
        operations::speedup_transaction, operations::rebroadcast_transaction, operations::requeue_transaction, operations::completions, operations::ops_actors,
        operations::ops_cluster, operations::ops_endpoints, operations::ops_restart, operations::ops_unprotect,
        operations::ops_reload, operations::openapi_doc, operations::healthz,
        operations::readyz, operations::metrics, operations::dashboard),
    components(schemas(ErrorDoc, ErrorBodyDoc, ConfigIssueDoc, CreateBodyDoc, CreatedDoc, TxDoc,
        TxPageDoc, ReceiptDoc, CompletionDoc, CompletionPageDoc, ActorsView, ActorView, PoolsView,
        ClusterView, NodeView, LeaseView, EndpointsView, txmgr_actors::chain::EndpointStatus, UnprotectBody, ActionView, ReloadReport, HealthView,
        ActionBodyDoc, ActionAcceptedDoc)),
    modifiers(&BearerAuth)
)]
pub struct ApiDoc;

/// `GET /v1/openapi.json`.
pub(crate) async fn document() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}
