//! `POST /v1/transactions`: create an intent. The reads of `/v1/transactions…`
//! are in `tx_reads.rs`.

use axum::{
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use tracing::Instrument as _;
use txmgr_actors::domain::{
    ChainId, CreateError, CreateOutcome, NewIntent, SubmitterKey, TxSummary,
};

use crate::config::Role;

use super::{
    auth::Caller,
    create_metrics::{CreateAnswered, NO_CHAIN},
    create_trace::CreateTrace,
    error::{ApiError, ApiResult, ErrorResponse},
    intent_body::{CreateBody, ValidateCreate},
    json::ApiJson,
    AppState,
};

/// Header that may carry the idempotency key instead of `request_id`.
const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// Answer to a create: 202 when new, 200 on a replay.
pub(crate) use txmgr_api::CreatedBody;

/// The answer to a create of `summary` on `chain_id`.
fn created_body(chain_id: ChainId, summary: TxSummary) -> CreatedBody {
    CreatedBody {
        chain_id: chain_id.get(),
        tx_id: summary.tx_id,
        state: summary.state,
        submitter: format!("{:#x}", summary.submitter),
        request_id: summary.request_id,
    }
}

/// `POST /v1/transactions`; its answer carries its chain (its name; `none`
/// when refused before a served chain was named) and result for
/// `txmgr_creates_total` and `txmgr_create_ack_seconds`, which the outer
/// [`count_creates`](super::create_metrics::count_creates) layer records
/// for every answer, the layers' refusals too.
#[utoipa::path(post, path = "/v1/transactions", tag = "transactions",
    description = "Accepts an intent once it is committed to PostgreSQL. Idempotent on `(chain_id, submitter, request_id)`.",
    request_body = CreateBody,
    params(("Idempotency-Key" = Option<String>, Header, description = "the request_id, instead of the body field (both must agree)"),
        ("traceparent" = Option<String>, Header, description = "W3C Trace Context of the caller's span: with `[telemetry]` on, the intent's trace continues it (README \"Tracing\"); an invalid value is ignored")),
    responses(
        (status = 202, description = "accepted: a new intent", body = CreatedBody),
        (status = 200, description = "replay of the same request_id with the same body", body = CreatedBody),
        (status = 400, description = "invalid_request: malformed JSON, bad field (`field` names it), a chain not served here or a submitter not enabled on it; missing_field: `chain_id` when several chains are served", body = ErrorResponse),
        (status = 403, description = "forbidden: the token may not use this submitter; or policy_violation: the submitter's policy refuses the intent (`field` and `rule` name it), nothing stored", body = ErrorResponse),
        (status = 409, description = "idempotency_conflict: same request_id, different body", body = ErrorResponse),
        (status = 422, description = "unknown_submitter: not configured here, or being removed", body = ErrorResponse),
        (status = 423, description = "submitter_protected: PROTECT after external use of the key; or paused: the submitter is paused with `pause_accepts_creates = false`", body = ErrorResponse),
        (status = 429, description = "overloaded: the submitter's ingress queue is full; or rate_limited: the token is over its `rate`. Retry after `Retry-After` seconds; nothing was stored", body = ErrorResponse),
        (status = 503, description = "unavailable: not persisted in time; retrying with the same request_id is safe", body = ErrorResponse)))]
pub(crate) async fn create(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    body: Result<ApiJson<CreateBody>, ApiError>,
) -> Response {
    let started = std::time::Instant::now();
    let mut chain = None;
    let history = state.ops.history.clone();
    let trace = CreateTrace::start(&headers);
    // Every create counts against its token's rate, a refused body too.
    let result = match caller.check_create_rate().and(body) {
        Ok(ApiJson(body)) => {
            // Checked by the create: a 202 means it is an address.
            let submitter = body.submitter.to_ascii_lowercase();
            let result = create_inner(state, caller, headers, body, &mut chain, &trace)
                .instrument(trace.span())
                .await;
            if matches!(&result, Ok(r) if r.status() == StatusCode::ACCEPTED) {
                history.record_create(&submitter, started.elapsed());
            }
            result
        }
        Err(err) => Err(err),
    };
    let label = match &result {
        Ok(response) if response.status() == StatusCode::ACCEPTED => "created",
        Ok(_) => "replayed",
        Err(err) => err.code(),
    };
    trace.finish(None, result.as_ref().err().map(|err| err.code()));
    let mut response = result.unwrap_or_else(IntoResponse::into_response);
    response.extensions_mut().insert(CreateAnswered {
        chain: chain.unwrap_or_else(|| NO_CHAIN.to_owned()),
        result: label,
    });
    response
}

/// What a client token's 423 `paused` says instead of the operator's reason
/// (ops views keep the reason).
const CLIENT_PAUSE_MESSAGE: &str =
    "an operator paused this submitter and it accepts no creates meanwhile; retry later";

/// Sets `chain_name` once the request's chain is resolved (for the metric).
async fn create_inner(
    state: AppState,
    caller: Caller,
    headers: HeaderMap,
    body: CreateBody,
    chain_name: &mut Option<String>,
    trace: &CreateTrace,
) -> ApiResult<Response> {
    let header_key = match headers.get(IDEMPOTENCY_KEY) {
        Some(value) => Some(value.to_str().map_err(|_| {
            ApiError::invalid(
                "request_id",
                "the Idempotency-Key header is not visible ASCII",
            )
        })?),
        None => None,
    };
    let valid = body.validate(
        header_key,
        state.limits.data_limit_bytes,
        state.limits.max_valid_for,
    )?;
    let chain = state.chains.resolve(valid.chain_id, "chain_id")?;
    *chain_name = Some(chain.name.clone());
    if valid.intent.private && !chain.private_sends {
        return Err(ApiError::invalid(
            "private",
            format!(
                "private sending needs a send_only endpoint, and chain {} ({}) has none",
                chain.chain_id, chain.name
            ),
        ));
    }
    caller.check_submitter_on(chain.chain_id, &valid.submitter)?;
    let submitter = SubmitterKey::new(chain.chain_id, valid.submitter);
    let created = chain
        .submissions
        .create(
            NewIntent::new(submitter, valid.request_id, valid.intent).with_trace(trace.stored()),
        )
        .instrument(trace.insert_span())
        .await;
    let outcome = match created {
        Err(CreateError::UnknownSubmitter(address)) if state.chains.list().len() > 1 => {
            return Err(ApiError::invalid(
                "chain_id",
                format!(
                    "submitter {address:#x} is not enabled on chain {} ({})",
                    chain.chain_id, chain.name
                ),
            ));
        }
        // The operator's pause reason is free text for operators (names,
        // incidents): a client learns only that the submitter is paused.
        Err(CreateError::Paused(_)) if caller.role != Role::Ops => {
            return Err(ApiError::Paused(CLIENT_PAUSE_MESSAGE.to_owned()));
        }
        other => other?,
    };
    let chain_id = chain.chain_id;
    match outcome {
        CreateOutcome::Created(summary) => {
            tracing::debug!(target: "http", tx_id = %summary.tx_id, %submitter, "intent accepted");
            trace.finish(Some(summary.tx_id), None);
            let body = created_body(chain_id, summary);
            Ok((StatusCode::ACCEPTED, Json(body)).into_response())
        }
        CreateOutcome::Existing(summary) => {
            Ok((StatusCode::OK, Json(created_body(chain_id, summary))).into_response())
        }
        CreateOutcome::Conflict { tx_id } => Err(ApiError::IdempotencyConflict { tx_id }),
    }
}
