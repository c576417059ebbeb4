//! `POST /v1/transactions/{tx_id}/cancel` · `/speedup` · `/rebroadcast` ·
//! `/requeue`
//! (README "Resubmission, fee bumps, STUCK and cancel" and "HTTP API").
//!
//! A client token whose allow-list lacks the transaction's submitter gets
//! 404, as for `GET /v1/transactions/{tx_id}`. Any node takes the request: a QUEUED intent is cancelled at once (no
//! nonce used); anything later is recorded on the intent and the leader
//! claims it, fenced, and acts. Each request is audited (log and `ops_audit`)
//! with who asked and why.

use axum::{
    body::Bytes,
    extract::State,
    http::StatusCode,
    response::{IntoResponse, Response},
    Json,
};

use txmgr_actors::{
    domain::TxState,
    store::{
        actions::{self, ActionOutcome, Requester},
        resubmit_claims::OperatorAction,
    },
    submitter::settings::DEFAULT_RESUBMIT_INTERVAL,
};
use uuid::Uuid;

use crate::config::Role;

use super::{
    auth::Caller,
    error::{ApiError, ApiResult, ErrorResponse},
    path::ApiPath,
    AppState,
};

/// Longest `reason` accepted.
pub const MAX_REASON_CHARS: usize = 500;

/// The optional body and the answer, as the API crate defines them.
pub use txmgr_api::{ActionAccepted, ActionBody};

/// The answers every action route documents (one list for the four routes).
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // Only its derive is used: it describes, it is never built.
enum ActionAnswers {
    #[response(status = 202, description = "accepted")]
    Accepted(ActionAccepted),
    #[response(
        status = 200,
        description = "unchanged: a cancel of an intent already being cancelled (a cancel asked for or sent) or already CANCELLED; nothing recorded, the current state"
    )]
    Unchanged(ActionAccepted),
    #[response(
        status = 400,
        description = "invalid_request: tx_id is not a UUID, or a bad body (`field` names it)"
    )]
    Invalid(ErrorResponse),
    #[response(
        status = 404,
        description = "not_found: no such transaction (or another submitter's, for a token with an allow-list)"
    )]
    NotFound(ErrorResponse),
    #[response(
        status = 409,
        description = "invalid_state: the state does not allow it (final, mined, no nonce yet)"
    )]
    InvalidState(ErrorResponse),
    #[response(
        status = 409,
        description = "chain_not_served: the transaction's chain is not served by this node (a reload removed it); nothing was recorded"
    )]
    ChainNotServed(ErrorResponse),
    #[response(
        status = 429,
        description = "rate_limited: (client token) the same action on this intent was asked for less than its submitter's `resubmit_interval` ago; `Retry-After` in seconds"
    )]
    RateLimited(ErrorResponse),
    #[response(
        status = 500,
        description = "internal: corrupt data; details only in the node's log"
    )]
    Internal(ErrorResponse),
    #[response(
        status = 503,
        description = "unavailable: the database is unavailable; nothing was recorded"
    )]
    Unavailable(ErrorResponse),
}

/// One action route: its handler, registered at the path of its
/// `#[utoipa::path]`, reads the path and body and hands them to [`act`]. The
/// four differ only in path, description and action.
macro_rules! action_route {
    ($(#[doc = $doc:literal])* $name:ident, $path:literal, $description:literal, $action:expr) => {
        $(#[doc = $doc])*
        #[utoipa::path(post, path = $path, tag = "transactions",
            description = $description,
            params(("tx_id" = Uuid, Path, description = "the transaction")),
            request_body(content = Option<ActionBody>, description = "optional: empty, `null` or `{\"reason\": \"...\"}`"),
            responses(ActionAnswers))]
        pub(crate) async fn $name(
            state: State<AppState>,
            caller: Caller,
            path: ApiPath<String>,
            body: Bytes,
        ) -> ApiResult<Response> {
            act(state, caller, path, body, $action).await
        }
    };
}

action_route!(
    /// `POST /v1/transactions/{tx_id}/cancel`.
    cancel,
    "/v1/transactions/{tx_id}/cancel",
    "QUEUED: cancelled at once, no nonce used. ALLOCATED (signed), TRACKING, STUCK: the leader replaces it with a 0-value self-transfer at its nonce; it ends CANCELLED if that is final, CONFIRMED if the original wins.",
    OperatorAction::Cancel
);

action_route!(
    /// `POST /v1/transactions/{tx_id}/speedup`.
    speedup,
    "/v1/transactions/{tx_id}/speedup",
    "TRACKING or STUCK, not mined: the leader signs a fee bump now, within the caps.",
    OperatorAction::Speedup
);

action_route!(
    /// `POST /v1/transactions/{tx_id}/rebroadcast`.
    rebroadcast,
    "/v1/transactions/{tx_id}/rebroadcast",
    "TRACKING or STUCK, not mined: the leader re-broadcasts the newest attempt's identical bytes now.",
    OperatorAction::Rebroadcast
);

action_route!(
    /// `POST /v1/transactions/{tx_id}/requeue`: an intent whose nonce a
    /// transaction that is not ours consumed (STUCK, `nonce_consumed_externally`)
    /// is sent again with a fresh nonce.
    requeue,
    "/v1/transactions/{tx_id}/requeue",
    "STUCK with sub_state nonce_consumed_externally (a transaction that is not ours took its nonce; it never executed): back to QUEUED at once, sent again with a fresh nonce.",
    OperatorAction::Requeue
);

fn parse_body(body: &Bytes) -> ApiResult<ActionBody> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(ActionBody::default());
    }
    // JSON `null` is no body, as the document's optional body says.
    let parsed: Option<ActionBody> = serde_json::from_slice(body).map_err(|err| {
        let field = err
            .to_string()
            .contains("unknown field")
            .then(|| "body".to_owned());
        ApiError::InvalidRequest {
            message: format!("the body must be {{\"reason\": \"...\"}} or empty: {err}"),
            field,
        }
    })?;
    let parsed = parsed.unwrap_or_default();
    if let Some(reason) = &parsed.reason {
        super::text::validate_text("reason", reason, MAX_REASON_CHARS)?;
    }
    Ok(parsed)
}

async fn act(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(tx_id): ApiPath<String>,
    body: Bytes,
    action: OperatorAction,
) -> ApiResult<Response> {
    let tx_id =
        Uuid::parse_str(&tx_id).map_err(|_| ApiError::invalid("tx_id", "tx_id must be a UUID"))?;
    let body = parse_body(&body)?;
    let not_found = || ApiError::NotFound(format!("no transaction {tx_id}"));
    let (chain_id, address) = actions::submitter_of(&state.pool, tx_id)
        .await?
        .ok_or_else(not_found)?;
    // Another submitter's transaction is reported as absent (as by GET):
    // its id alone must not reveal that it exists or whose it is.
    if caller.check_submitter_on(chain_id, &address).is_err() {
        return Err(not_found());
    }
    // Readable, but no leader here acts on it: nothing is recorded.
    if state.chains.by_id(chain_id).is_none() {
        return Err(ApiError::ChainNotServed(format!(
            "transaction {tx_id} is on chain {chain_id}, which this node does not serve (a reload removed it); it waits unchanged for a node that serves the chain"
        )));
    }
    let name = caller.name.to_string();
    let node_id = super::ops_audit::node_name(&state);
    let who = Requester {
        name: &name,
        reason: body.reason.as_deref(),
        node_id: &node_id,
    };
    // A client's actions on one intent are bounded (a speed-up or a cancel
    // raises the fees by at least 10 %, a re-broadcast goes to every
    // endpoint): each action once per resubmit interval. Operators are not;
    // every action carried out counts towards `max_resubmits` either way.
    let every = (caller.role == Role::Client).then(|| {
        state
            .chains
            .by_id(chain_id)
            .and_then(|chain| chain.engine.clone())
            .and_then(|engine| engine.settings(address))
            .map_or(DEFAULT_RESUBMIT_INTERVAL, |s| s.resubmit_interval)
    });
    let outcome =
        actions::request_at_most_every(&state.pool, chain_id, tx_id, action, &who, every).await?;
    tracing::info!(target: "txmgr::audit", who = %name, action = action.as_str(), %tx_id,
        submitter = %format!("{address:#x}"), reason = body.reason.as_deref(), node_id = %node_id,
        outcome = ?outcome, "operator action on a transaction");
    let (status, state_after) = match outcome {
        ActionOutcome::Cancelled => ("done", TxState::Cancelled),
        ActionOutcome::Requeued => ("done", TxState::Queued),
        ActionOutcome::Requested { state } => ("requested", state),
        ActionOutcome::Unchanged { state } => {
            return Ok((StatusCode::OK, Json(ActionAccepted {
                tx_id,
                action: action.as_str().to_owned(),
                status: "unchanged".to_owned(),
                state,
            }))
            .into_response())
        }
        ActionOutcome::NotAllowed { state, reason } => {
            return Err(ApiError::InvalidState(format!(
                "cannot {} transaction {tx_id} in state {}: {reason}",
                action.as_str(),
                state.as_str()
            )))
        }
        ActionOutcome::NotFound => return Err(not_found()),
        ActionOutcome::TooSoon { retry_after } => {
            return Err(ApiError::RateLimited {
                message: format!(
                    "a {} of transaction {tx_id} was asked for less than its resubmit interval ago; a client may ask for each action on an intent once per interval",
                    action.as_str()
                ),
                retry_after,
            })
        }
    };
    metrics::counter!(txmgr_actors::metrics::OPERATOR_ACTIONS,
        "chain" => txmgr_actors::metrics::chain_label(chain_id), "action" => action.as_str())
    .increment(1);
    Ok((
        StatusCode::ACCEPTED,
        Json(ActionAccepted {
            tx_id,
            action: action.as_str().to_owned(),
            status: status.to_owned(),
            state: state_after,
        }),
    )
        .into_response())
}
