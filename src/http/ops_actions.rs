//! `/v1/ops/*` actions on a submitter's actor and on the node: restart,
//! unprotect, reload (README "HTTP API"). Every action is logged with the
//! token's name and written to `ops_audit`, atomically with the action where
//! the action is a database write (unprotect), and as `started` → `done` |
//! `failed` around an action on running state (restart, reload); see
//! `store::audit`.

use axum::{
    extract::{rejection::QueryRejection, Query, State},
    Json,
};
use txmgr_actors::{node::OpsError, store::audit::AuditOutcome};

use super::{
    auth::Caller,
    error::{ApiError, ApiResult, ErrorResponse},
    intent_body::parse_address,
    json::ApiJson,
    ops::{chain_param, engine},
    ops_audit::{audit_entry, audited, log_action, node_name},
    ops_state::ReloadReport,
    ops_views::{ActionView, UnprotectBody},
    path::ApiPath,
    AppState,
};

/// Longest unprotect `reason`, in characters.
const MAX_UNPROTECT_REASON_CHARS: usize = 1000;

pub(super) fn ops_error(err: OpsError) -> ApiError {
    match err {
        OpsError::UnknownSubmitter(address) => {
            ApiError::UnknownSubmitter(format!("submitter {address:#x} is not configured"))
        }
        OpsError::NotLeader { owner, .. } => ApiError::NotLeader { owner },
        OpsError::Store(err) => err.into(),
        other => {
            tracing::warn!(target: "txmgr::ops", error = %other, "operator action failed");
            ApiError::Unavailable(format!("the action did not complete: {other}"))
        }
    }
}

/// `POST /v1/ops/submitters/{address}/restart`.
#[utoipa::path(post, path = "/v1/ops/submitters/{address}/restart", tag = "ops",
    description = "The supervisor drains the actor (it releases its lease; open work stays in the database) and spawns a fresh one; also clears a failed actor. Audited: `started`, then `done` or `failed`.",
    params(("address" = String, Path, description = "the submitter", pattern = "^0x[0-9a-fA-F]{40}$"),
        ("chain_id" = Option<u64>, Query, description = "the chain; required when several chains are served")),
    responses(
        (status = 200, description = "restarted", body = ActionView),
        (status = 400, description = "invalid_request: not an address", body = ErrorResponse),
        (status = 403, description = "forbidden: the token may not use this submitter (`field` = submitter)", body = ErrorResponse),
        (status = 422, description = "unknown_submitter: not configured on this node", body = ErrorResponse),
        (status = 500, description = "internal: the audit row could not be written; nothing was done", body = ErrorResponse),
        (status = 503, description = "unavailable: no engine in this process, the supervisor did not answer, or the database is unavailable", body = ErrorResponse)))]
pub(crate) async fn restart(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(address): ApiPath<String>,
    pairs: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> ApiResult<Json<ActionView>> {
    let address = parse_address("address", &address)?;
    let chain = chain_param(&state, pairs)?;
    caller.check_submitter_on(chain.chain_id, &address)?;
    let engine = engine(&chain)?;
    let who = caller.name.to_string();
    let submitter = format!("{address:#x}");
    let entry = audit_entry(
        engine.node_id(),
        &who,
        "restart",
        Some((chain.chain_id, &submitter)),
        None,
    );
    audited(&state, &entry, async {
        engine.restart(address).await.map_err(ops_error)
    })
    .await?;
    Ok(Json(ActionView {
        submitter,
        action: "restart",
        node_id: engine.node_id().to_owned(),
        previous_reason: None,
        next_nonce: None,
    }))
}

/// `POST /v1/ops/submitters/{address}/unprotect` with `{reason}`.
#[utoipa::path(post, path = "/v1/ops/submitters/{address}/unprotect", tag = "ops",
    description = "Clears PROTECT: this node takes (or renews) the lease, moves the nonce cursor up to the chain's pending nonce, clears the reason and writes the audit row in one fenced transaction (all or nothing), then respawns the actor.",
    params(("address" = String, Path, description = "the submitter", pattern = "^0x[0-9a-fA-F]{40}$"),
        ("chain_id" = Option<u64>, Query, description = "the chain; required when several chains are served")),
    request_body = UnprotectBody,
    responses(
        (status = 200, description = "PROTECT cleared", body = ActionView),
        (status = 400, description = "invalid_request: not an address, or a missing or bad reason (`field` names it)", body = ErrorResponse),
        (status = 403, description = "forbidden: the token may not use this submitter (`field` = submitter)", body = ErrorResponse),
        (status = 409, description = "not_leader: another node holds a live lease; `owner` names it", body = ErrorResponse),
        (status = 422, description = "unknown_submitter: not configured on this node", body = ErrorResponse),
        (status = 500, description = "internal: a database error; nothing was changed", body = ErrorResponse),
        (status = 503, description = "unavailable: no engine in this process, the supervisor or the chain did not answer, or the database is unavailable; nothing was changed", body = ErrorResponse)))]
pub(crate) async fn unprotect(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(address): ApiPath<String>,
    pairs: Result<Query<Vec<(String, String)>>, QueryRejection>,
    ApiJson(body): ApiJson<UnprotectBody>,
) -> ApiResult<Json<ActionView>> {
    let address = parse_address("address", &address)?;
    let chain = chain_param(&state, pairs)?;
    caller.check_submitter_on(chain.chain_id, &address)?;
    let engine = engine(&chain)?;
    let reason = body.reason.trim();
    if reason.is_empty() {
        return Err(ApiError::invalid(
            "reason",
            "reason must be 1 to 1000 characters",
        ));
    }
    super::text::validate_text("reason", reason, MAX_UNPROTECT_REASON_CHARS)?;
    let who = caller.name.to_string();
    let submitter = format!("{address:#x}");
    let entry = audit_entry(
        engine.node_id(),
        &who,
        "unprotect",
        Some((chain.chain_id, &submitter)),
        Some(reason),
    );
    // The audit row is written inside the fenced transaction that clears
    // PROTECT: both commit, or neither.
    let result = engine.unprotect(address, &entry).await;
    log_action(
        &entry,
        if result.is_ok() {
            AuditOutcome::Done
        } else {
            AuditOutcome::Failed
        },
    );
    let done = result.map_err(ops_error)?;
    Ok(Json(ActionView {
        submitter,
        action: "unprotect",
        node_id: engine.node_id().to_owned(),
        previous_reason: done.previous_reason,
        next_nonce: Some(done.next_nonce),
    }))
}

/// `POST /v1/ops/reload`.
#[utoipa::path(post, path = "/v1/ops/reload", tag = "ops",
    description = "Same as SIGHUP: re-reads the configuration file and applies it; a file that fails validation changes nothing. Audited: `started`, then `done` or `failed`.",
    responses(
        (status = 200, description = "applied; what changed", body = ReloadReport),
        (status = 403, description = "forbidden: the token is limited to some submitters", body = ErrorResponse),
        (status = 400, description = "invalid_config: the file was rejected, every `{key, reason}` in `issues`; the running configuration stays", body = ErrorResponse),
        (status = 500, description = "internal: the audit row could not be written; nothing was done", body = ErrorResponse),
        (status = 503, description = "unavailable: reload is not available in this process, or the database is unavailable", body = ErrorResponse)))]
pub(crate) async fn reload(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<Json<ReloadReport>> {
    caller.check_unscoped("reload the configuration")?;
    let reloader =
        state.ops.reloader.clone().ok_or_else(|| {
            ApiError::Unavailable("reload is not available in this process".into())
        })?;
    let who = caller.name.to_string();
    let node_id = node_name(&state);
    let entry = audit_entry(&node_id, &who, "reload", None, None);
    let report = audited(&state, &entry, async {
        reloader.reload().await.map_err(|err| {
            tracing::warn!(target: "txmgr::ops", who, error = %err, "reload rejected; running configuration kept");
            ApiError::InvalidConfig {
                issues: err.issues.into_iter().map(|i| (i.key, i.reason)).collect(),
            }
        })
    })
    .await?;
    Ok(Json(report))
}
