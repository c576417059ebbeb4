//! `POST /v1/ops/submitters/{address}/pause` and `/resume` (README
//! "Guardrails"): an operator stops a submitter's sending on one chain,
//! cluster-wide and durably, and lets it go on. Each writes its audit row in
//! the transaction that pauses or resumes.

use axum::{
    extract::{rejection::QueryRejection, Query, State},
    Json,
};
use serde::{Deserialize, Serialize};
use txmgr_actors::store::{audit::AuditOutcome, pause::Pause};

use super::{
    auth::Caller,
    error::{ApiError, ApiResult, ErrorResponse},
    intent_body::parse_address,
    json::ApiJson,
    ops::engine,
    ops_actions::ops_error,
    ops_audit::{audit_entry, log_action},
    path::ApiPath,
    AppState, ServedChain,
};

/// Longest pause or resume `reason`, in characters.
const MAX_REASON_CHARS: usize = 1000;

/// Body of a pause or a resume.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PauseBody {
    /// Why (audited): 1 to 1000 characters (surrounding blanks ignored), no
    /// control characters other than line breaks and tabs.
    #[schema(min_length = 1, max_length = 1000)]
    pub reason: String,
}

/// Answer of a pause or a resume.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PauseView {
    /// The submitter.
    pub submitter: String,
    /// Its chain id.
    pub chain_id: u64,
    /// `pause` or `resume`.
    #[schema(pattern = "^(pause|resume)$")]
    pub action: &'static str,
    /// Paused now.
    pub paused: bool,
    /// While paused: re-broadcasts and fee bumps of in-flight intents stop too.
    pub halt_resubmits: bool,
    /// The reason of the pause this replaced or lifted, if there was one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_reason: Option<String>,
    /// The node that took the request.
    pub node_id: String,
}

/// `?chain_id=` and, for a pause, `?halt_resubmits=`.
fn params(
    state: &AppState,
    pairs: Result<Query<Vec<(String, String)>>, QueryRejection>,
    takes_halt: bool,
) -> ApiResult<(std::sync::Arc<ServedChain>, bool)> {
    let Query(pairs) =
        pairs.map_err(|e| ApiError::invalid_request(format!("malformed query string: {e}")))?;
    let (mut chain_id, mut halt) = (None, false);
    super::query::each_once(pairs, |key, value| {
        match key {
            "chain_id" => chain_id = Some(super::query::chain_id("chain_id", &value)?),
            "halt_resubmits" if takes_halt => {
                halt = match value.as_str() {
                    "true" => true,
                    "false" => false,
                    _ => {
                        return Err(ApiError::invalid(
                            "halt_resubmits",
                            "halt_resubmits must be true or false",
                        ))
                    }
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    Ok((state.chains.resolve(chain_id, "chain_id")?, halt))
}

/// What a pause or a resume acts on, checked: the chain, the submitter
/// the caller may use there, the reason, and (pause) `halt_resubmits`.
struct Target {
    chain: std::sync::Arc<ServedChain>,
    address: alloy::primitives::Address,
    submitter: String,
    reason: String,
    halt_resubmits: bool,
}

fn target(
    state: &AppState,
    caller: &Caller,
    address: &str,
    pairs: Result<Query<Vec<(String, String)>>, QueryRejection>,
    body: &PauseBody,
    takes_halt: bool,
) -> ApiResult<Target> {
    let address = parse_address("address", address)?;
    let (chain, halt_resubmits) = params(state, pairs, takes_halt)?;
    caller.check_submitter_on(chain.chain_id, &address)?;
    Ok(Target {
        chain,
        address,
        submitter: format!("{address:#x}"),
        reason: reason(body)?.to_owned(),
        halt_resubmits,
    })
}

fn reason(body: &PauseBody) -> ApiResult<&str> {
    let reason = body.reason.trim();
    if reason.is_empty() {
        return Err(ApiError::invalid(
            "reason",
            "reason must be 1 to 1000 characters",
        ));
    }
    super::text::validate_text("reason", reason, MAX_REASON_CHARS)?;
    Ok(reason)
}

/// The refusals a pause and a resume document (one list for both routes).
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // Only its derive is used: it describes, it is never built.
enum PauseRefusals {
    #[response(
        status = 400,
        description = "invalid_request: not an address, a bad query parameter, or a missing or bad reason (`field` names it)"
    )]
    Invalid(ErrorResponse),
    #[response(
        status = 403,
        description = "forbidden: the token may not use this submitter (`field` = submitter)"
    )]
    Forbidden(ErrorResponse),
    #[response(
        status = 422,
        description = "unknown_submitter: not configured on this node"
    )]
    UnknownSubmitter(ErrorResponse),
    #[response(
        status = 500,
        description = "internal: a database error; nothing was changed"
    )]
    Internal(ErrorResponse),
    #[response(
        status = 503,
        description = "unavailable: no engine in this process, or the database is unavailable; nothing was changed"
    )]
    Unavailable(ErrorResponse),
}

/// `POST /v1/ops/submitters/{address}/pause?halt_resubmits=` with `{reason}`.
#[utoipa::path(post, path = "/v1/ops/submitters/{address}/pause", tag = "ops",
    description = "Pauses the submitter's sending on the chain, cluster-wide and durably: the pause and its audit row commit together, and from then on no allocation draws a nonce for it, on whichever node its leader runs. Intents already allocated keep being tracked, re-broadcast and bumped (stopping them would strand their nonces) unless `halt_resubmits=true`. Creates stay accepted and wait QUEUED, or get 423 `paused` where `pause_accepts_creates = false`. Pausing a paused submitter updates its reason and `halt_resubmits`.",
    params(("address" = String, Path, description = "the submitter", pattern = "^0x[0-9a-fA-F]{40}$"),
        ("chain_id" = Option<u64>, Query, description = "the chain; required when several chains are served"),
        ("halt_resubmits" = Option<bool>, Query, description = "also stop re-broadcasts and fee bumps of in-flight intents (they may then sit unmined in pools until the resume); default false")),
    request_body = PauseBody,
    responses((status = 200, description = "paused", body = PauseView), PauseRefusals))]
pub(crate) async fn pause(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(address): ApiPath<String>,
    pairs: Result<Query<Vec<(String, String)>>, QueryRejection>,
    ApiJson(body): ApiJson<PauseBody>,
) -> ApiResult<Json<PauseView>> {
    let Target {
        chain,
        address,
        submitter,
        reason,
        halt_resubmits,
    } = target(&state, &caller, &address, pairs, &body, true)?;
    let engine = engine(&chain)?;
    let reason = reason.as_str();
    let action = if halt_resubmits {
        "pause_halt_resubmits"
    } else {
        "pause"
    };
    let entry = audit_entry(
        engine.node_id(),
        &caller.name,
        action,
        Some((chain.chain_id, &submitter)),
        Some(reason),
    );
    let pause = Pause {
        reason: reason.to_owned(),
        halt_resubmits,
        paused_by: caller.name.to_string(),
    };
    let result = engine.pause_sending(address, pause, &entry).await;
    log_action(&entry, outcome(result.is_ok()));
    let before = result.map_err(ops_error)?;
    Ok(Json(PauseView {
        submitter,
        chain_id: chain.chain_id.get(),
        action: "pause",
        paused: true,
        halt_resubmits,
        previous_reason: before.map(|p| p.reason),
        node_id: engine.node_id().to_owned(),
    }))
}

/// `POST /v1/ops/submitters/{address}/resume` with `{reason}`.
#[utoipa::path(post, path = "/v1/ops/submitters/{address}/resume", tag = "ops",
    description = "Lifts the pause (with its audit row, in one transaction) and wakes the leader: QUEUED intents go out in their order. Resuming a submitter that is not paused changes nothing and writes no audit row (`paused` false, no `previous_reason`).",
    params(("address" = String, Path, description = "the submitter", pattern = "^0x[0-9a-fA-F]{40}$"),
        ("chain_id" = Option<u64>, Query, description = "the chain; required when several chains are served")),
    request_body = PauseBody,
    responses((status = 200, description = "resumed (or was not paused)", body = PauseView), PauseRefusals))]
pub(crate) async fn resume(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(address): ApiPath<String>,
    pairs: Result<Query<Vec<(String, String)>>, QueryRejection>,
    ApiJson(body): ApiJson<PauseBody>,
) -> ApiResult<Json<PauseView>> {
    let Target {
        chain,
        address,
        submitter,
        reason,
        ..
    } = target(&state, &caller, &address, pairs, &body, false)?;
    let engine = engine(&chain)?;
    let reason = reason.as_str();
    let entry = audit_entry(
        engine.node_id(),
        &caller.name,
        "resume",
        Some((chain.chain_id, &submitter)),
        Some(reason),
    );
    let result = engine.resume_sending(address, &entry).await;
    if result.as_ref().map_or(true, Option::is_some) {
        log_action(&entry, outcome(result.is_ok()));
    }
    let lifted = result.map_err(ops_error)?;
    Ok(Json(PauseView {
        submitter,
        chain_id: chain.chain_id.get(),
        action: "resume",
        paused: false,
        halt_resubmits: false,
        previous_reason: lifted.map(|p| p.reason),
        node_id: engine.node_id().to_owned(),
    }))
}

fn outcome(done: bool) -> AuditOutcome {
    if done {
        AuditOutcome::Done
    } else {
        AuditOutcome::Failed
    }
}
