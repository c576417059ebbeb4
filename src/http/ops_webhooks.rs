//! `GET /v1/ops/webhooks` and `POST /v1/ops/webhooks/{name}/redeliver`
//! (README "Webhooks"). Both read and write the database only, so any node
//! answers: the node holding the webhook's lease picks a redelivery up
//! within a second.

use axum::{extract::State, Json};
use serde::{Deserialize, Serialize};
use txmgr_actors::store::{
    webhook_lease::WebhookKey,
    webhooks::{self, DeadLetter, WebhookStatus},
};

use super::{
    auth::Caller,
    error::{ApiError, ApiResult, ErrorResponse},
    json::ApiJson,
    ops_audit::{audit_entry, audited, node_name},
    path::ApiPath,
    AppState,
};

/// Dead letters listed at most.
const DEAD_LETTERS_SHOWN: i64 = 100;

/// Body of `GET /v1/ops/webhooks`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct WebhooksView {
    /// Every webhook that has started delivering, by name; empty for a
    /// token limited to some submitters (a status counts every
    /// submitter's events and quotes their last error).
    pub webhooks: Vec<WebhookStatus>,
    /// The oldest open dead letters of all webhooks (at most 100); for a
    /// token limited to some submitters, only those of their events.
    pub dead_letters: Vec<DeadLetter>,
}

/// `GET /v1/ops/webhooks`.
#[utoipa::path(get, path = "/v1/ops/webhooks", tag = "ops",
    responses(
        (status = 200, description = "every webhook's cursor, lag, failures and dead letters; for a token limited to some submitters, only the dead letters of their events and no statuses", body = WebhooksView),
        (status = 500, description = "internal: a database error; details only in the node's log", body = ErrorResponse),
        (status = 503, description = "unavailable: the database is unavailable", body = ErrorResponse)))]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<Json<WebhooksView>> {
    let scope = caller.scope_on(&state.chains.ids());
    let statuses = if caller.is_scoped() {
        Vec::new()
    } else {
        webhooks::statuses(&state.pool, state.chains.home(), None).await?
    };
    Ok(Json(WebhooksView {
        webhooks: statuses,
        dead_letters: webhooks::dead_letters(
            &state.pool,
            state.chains.home(),
            DEAD_LETTERS_SHOWN,
            scope.as_deref(),
        )
        .await?,
    }))
}

/// Body of `POST /v1/ops/webhooks/{name}/redeliver`: exactly one of `id`
/// and `all`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RedeliverBody {
    /// One dead letter, by the `id` `GET /v1/ops/webhooks` lists.
    #[schema(minimum = 1)]
    pub id: Option<i64>,
    /// `true`: every open dead letter of the webhook.
    pub all: Option<bool>,
}

/// Answer of a redeliver request.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RedeliverView {
    /// The webhook.
    pub webhook: String,
    /// Dead letters queued for redelivery.
    pub queued: u64,
}

/// `POST /v1/ops/webhooks/{name}/redeliver`.
#[utoipa::path(post, path = "/v1/ops/webhooks/{name}/redeliver", tag = "ops",
    description = "Queues dead letters for one more round of attempts (up to the webhook's `max_attempts`), by the node delivering for the webhook; each keeps its delivery id. Audited: `started`, then `done` or `failed`.",
    params(("name" = String, Path, description = "the webhook's name", pattern = "^[A-Za-z0-9_.-]{1,64}$")),
    request_body = RedeliverBody,
    responses(
        (status = 200, description = "queued", body = RedeliverView),
        (status = 400, description = "invalid_request: a bad name, or not exactly one of `id` and `all: true` (`field` names it)", body = ErrorResponse),
        (status = 404, description = "not_found: no such open dead letter (or no dead letter at all for `all`) of this webhook, among those of the token's submitters", body = ErrorResponse),
        (status = 500, description = "internal: the audit row could not be written; nothing was done", body = ErrorResponse),
        (status = 503, description = "unavailable: the database is unavailable", body = ErrorResponse)))]
pub(crate) async fn redeliver(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(name): ApiPath<String>,
    ApiJson(body): ApiJson<RedeliverBody>,
) -> ApiResult<Json<RedeliverView>> {
    if !txmgr_actors::webhook::is_valid_name(&name) {
        return Err(ApiError::invalid(
            "name",
            "a webhook name is 1 to 64 characters of [A-Za-z0-9_.-]",
        ));
    }
    let id = match (body.id, body.all) {
        (Some(id), None | Some(false)) if id > 0 => Some(id),
        (Some(_), None | Some(false)) => {
            return Err(ApiError::invalid(
                "id",
                "id must be a dead letter's id (≥ 1)",
            ))
        }
        (None, Some(true)) => None,
        _ => {
            return Err(ApiError::invalid(
                "all",
                "give exactly one of `id` (one dead letter) and `all: true` (every open one)",
            ))
        }
    };
    let who = caller.name.to_string();
    // A token limited to some submitters redelivers only their events.
    let scope = caller.scope_on(&state.chains.ids());
    let node_id = node_name(&state);
    let reason = match id {
        Some(id) => format!("webhook {name}: dead letter {id}"),
        None => format!("webhook {name}: all dead letters"),
    };
    let entry = audit_entry(&node_id, &who, "redeliver", None, Some(&reason));
    let key = WebhookKey {
        chain_id: state.chains.home(),
        name: name.clone(),
    };
    let queued = audited(&state, &entry, async {
        let queued = webhooks::ask_redelivery(&state.pool, &key, id, scope.as_deref()).await?;
        if queued == 0 {
            return Err(ApiError::NotFound(match id {
                Some(id) => format!("webhook {name} has no open dead letter {id}"),
                None => format!("webhook {name} has no open dead letters"),
            }));
        }
        Ok(queued)
    })
    .await?;
    Ok(Json(RedeliverView {
        webhook: name,
        queued,
    }))
}
