//! The reads of `/v1/transactions`: get by id, find by request id, list a
//! submitter's transactions (README "Read"). A token with an allow-list
//! reads only its submitters' transactions, on the chains it may use them
//! on; reads by id cover every chain, also one this node no longer serves.

use alloy::primitives::Address;
use axum::{
    extract::{rejection::QueryRejection, Query, State},
    response::{IntoResponse, Response},
    Extension, Json,
};
use serde::Serialize;
use serde_json::value::RawValue;
use txmgr_actors::{
    domain::{SubmitterKey, TxState},
    store::{
        history_retention,
        tx_query::{self, Cursor, TxView},
    },
};
use utoipa::ToSchema;
use uuid::Uuid;

use super::{
    auth::Caller,
    error::{ApiError, ApiResult, ErrorResponse},
    intent_body::parse_address,
    path::ApiPath,
    query, AppState,
};

/// Page size when `limit` is not given.
pub(crate) const DEFAULT_LIST_LIMIT: u32 = 50;
/// Largest page a client may ask for.
pub(crate) const MAX_LIST_LIMIT: u32 = 500;

/// `GET /v1/transactions/{tx_id}`.
#[utoipa::path(get, path = "/v1/transactions/{tx_id}", tag = "transactions",
    params(("tx_id" = Uuid, Path, description = "the intent's id")),
    responses(
        (status = 200, description = "the transaction", body = TxView),
        (status = 400, description = "invalid_request: tx_id is not a UUID", body = ErrorResponse),
        (status = 404, description = "not_found: no such transaction (or another submitter's, for a token with an allow-list); aged_out: no such transaction, and the id is older than history.retain (retention may have removed it)", body = ErrorResponse),
        (status = 500, description = "internal: corrupt data; details only in the node's log", body = ErrorResponse),
        (status = 503, description = "unavailable: the database is unavailable", body = ErrorResponse)))]
pub(crate) async fn get_one(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(tx_id): ApiPath<String>,
) -> ApiResult<Json<TxView>> {
    let tx_id =
        Uuid::parse_str(&tx_id).map_err(|_| ApiError::invalid("tx_id", "tx_id must be a UUID"))?;
    // Any chain: an intent of a chain a reload removed stays readable.
    let Some(view) = tx_query::get(&state.pool, None, tx_id).await? else {
        return Err(missing(&state, tx_id).await);
    };
    if let Ok(address) = view.submitter.parse::<Address>() {
        // Another submitter's transaction is reported as absent: its id
        // alone must not reveal that it exists.
        if caller
            .check_submitter_on(view.chain_id.into(), &address)
            .is_err()
        {
            return Err(ApiError::NotFound(format!("no transaction {tx_id}")));
        }
    }
    Ok(Json(node_view(&state, view)))
}

/// The error for an id no row carries: `aged_out` when retention may have
/// removed it (its UUIDv7 time is before the last completed pass's
/// cutoff), `not_found` otherwise.
pub(crate) async fn missing(state: &AppState, tx_id: Uuid) -> ApiError {
    match history_retention::aged_out(&state.pool, tx_id).await {
        Ok(true) => ApiError::AgedOut(format!(
            "no transaction {tx_id}: it is older than history.retain, so retention may have removed it"
        )),
        Ok(false) => ApiError::NotFound(format!("no transaction {tx_id}")),
        Err(err) => err.into(),
    }
}

/// A stored view as this node answers it: `confirmations` from its head,
/// and `sub_state` `paused` on a QUEUED intent its configuration pauses.
pub(crate) fn node_view(state: &AppState, view: TxView) -> TxView {
    let chain = state.chains.by_id(view.chain_id.into());
    let head = chain.as_ref().and_then(|c| c.head());
    let paused = chain
        .as_ref()
        .and_then(|c| c.engine.as_ref())
        .zip(view.submitter.parse::<Address>().ok())
        .is_some_and(|(engine, address)| engine.config_paused(address));
    view.with_head(head).with_config_pause(paused)
}

/// Query parameters of `GET /v1/transactions`, checked by hand so that each
/// problem names its parameter.
#[derive(Debug, Default)]
struct ListQuery {
    chain_ids: Vec<u64>,
    submitter: Option<Address>,
    request_id: Option<String>,
    state: Option<TxState>,
    limit: Option<u32>,
    after: Option<Cursor>,
}

impl ListQuery {
    fn parse(pairs: Vec<(String, String)>) -> ApiResult<Self> {
        let mut query = ListQuery::default();
        let (chains, pairs): (Vec<_>, Vec<_>) =
            pairs.into_iter().partition(|(key, _)| key == "chain_id");
        // Repeatable: `chain_id=1&chain_id=8453`.
        for (_, value) in chains {
            query.chain_ids.push(query::chain_id("chain_id", &value)?);
        }
        query::each_once(pairs, |key, value| {
            match key {
                "submitter" => query.submitter = Some(parse_address("submitter", &value)?),
                "request_id" => {
                    super::text::validate_request_id(&value)?;
                    query.request_id = Some(value);
                }
                "state" => {
                    query.state = Some(value.parse::<TxState>().map_err(|_| {
                        let names: Vec<&str> = TxState::ALL.iter().map(|s| s.as_str()).collect();
                        ApiError::invalid("state", format!("state must be one of {names:?}"))
                    })?)
                }
                "limit" => query.limit = Some(query::limit(&value, MAX_LIST_LIMIT)?),
                "after" => {
                    query.after = Some(value.parse::<Cursor>().map_err(|_| {
                        ApiError::invalid("after", "after is not a cursor this API handed out")
                    })?)
                }
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(query)
    }
}

/// One page of a listing: each item already serialised, so the page's
/// byte budget is measured on exactly what is sent.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Page {
    /// In acceptance order.
    #[schema(value_type = Vec<TxView>)]
    items: Vec<Box<RawValue>>,
    /// Pass as `after` for the next page; `null` on the last page.
    next: Option<String>,
}

impl Page {
    /// Takes `rows` in order while their JSON fits `budget` bytes (the first
    /// always fits); `more` says rows follow them in the listing. The cursor
    /// continues after the last item taken.
    fn fill(
        rows: Vec<(Cursor, TxView)>,
        more: bool,
        budget: usize,
        shown: impl Fn(TxView) -> TxView,
    ) -> Result<Page, serde_json::Error> {
        let total = rows.len();
        let mut items = Vec::with_capacity(total);
        let mut used = 0usize;
        let mut last = None;
        for (cursor, view) in rows {
            let item = serde_json::value::to_raw_value(&shown(view))?;
            // +1: the comma between items.
            let size = item.get().len() + 1;
            if !items.is_empty() && used + size > budget {
                break;
            }
            used += size;
            last = Some(cursor);
            items.push(item);
        }
        let next = if more || items.len() < total {
            last.map(|cursor| cursor.to_string())
        } else {
            None
        };
        Ok(Page { items, next })
    }
}

/// `GET /v1/transactions`: one transaction (by `request_id`) or a page.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub(crate) enum QueryAnswer {
    /// With `request_id`: that transaction (boxed: a page is much smaller).
    One(Box<TxView>),
    /// Without: a page.
    Page(Page),
}

/// `GET /v1/transactions?submitter=..&request_id=..` (one, or 404) and
/// `GET /v1/transactions?submitter=..&state=..&limit=..&after=..` (a page).
#[utoipa::path(get, path = "/v1/transactions", tag = "transactions",
    params(
        ("chain_id" = Option<Vec<u64>>, Query, description = "only these chains (repeatable; default every chain served); with request_id, required when several chains are served", explode = true),
        ("submitter" = String, Query, description = "the submitter's address", pattern = "^0x[0-9a-fA-F]{40}$"),
        ("request_id" = Option<String>, Query, description = "selects one transaction; not combined with the others", min_length = 1, max_length = 256),
        ("state" = Option<TxState>, Query, description = "only transactions in this state"),
        ("limit" = Option<u32>, Query, description = "page size (default 50)", minimum = 1, maximum = 500),
        ("after" = Option<String>, Query, description = "the `next` cursor of the previous page", pattern = "^[0-9]+$")),
    responses(
        (status = 200, description = "with request_id: that transaction; otherwise a page (it ends early once its items reach `http.page_max_bytes` of JSON; follow `next`)", body = QueryAnswer),
        (status = 400, description = "invalid_request: a bad or unknown parameter (`field` names it)", body = ErrorResponse),
        (status = 403, description = "forbidden: the token may not use this submitter", body = ErrorResponse),
        (status = 404, description = "not_found: no transaction with this request_id", body = ErrorResponse),
        (status = 500, description = "internal: corrupt data; details only in the node's log", body = ErrorResponse),
        (status = 503, description = "unavailable: the database is unavailable", body = ErrorResponse)))]
pub(crate) async fn query(
    State(state): State<AppState>,
    caller: Caller,
    Extension(pages): Extension<super::PageBudget>,
    pairs: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> ApiResult<Response> {
    let Query(pairs) =
        pairs.map_err(|e| ApiError::invalid_request(format!("malformed query string: {e}")))?;
    let query = ListQuery::parse(pairs)?;
    let address = query
        .submitter
        .ok_or_else(|| ApiError::invalid("submitter", "submitter is required"))?;
    let mut chain_ids = state.chains.filter(&query.chain_ids, "chain_id")?;
    if query.chain_ids.is_empty() {
        // No filter: the chains this caller may use the submitter on (a
        // token scoped to one chain lists that chain).
        chain_ids.retain(|chain_id| caller.may_use_on(*chain_id, &address));
        if chain_ids.is_empty() {
            // None of the chains served is one the token may use it on
            // (its chain may have been removed by a reload): refused, as
            // naming such a chain is.
            return Err(ApiError::Forbidden {
                message: format!(
                    "token {:?} may not use submitter {address:#x} on any chain served here",
                    &*caller.name
                ),
                field: Some("submitter".to_owned()),
            });
        }
    }
    for chain_id in &chain_ids {
        caller.check_submitter_on(*chain_id, &address)?;
    }

    if let Some(request_id) = query.request_id {
        let chain = match &query.chain_ids[..] {
            [] => state.chains.resolve(None, "chain_id")?,
            [one] => state.chains.resolve(Some(*one), "chain_id")?,
            _ => {
                return Err(ApiError::invalid(
                    "chain_id",
                    "request_id selects one transaction: name one chain",
                ))
            }
        };
        // The chain the lookup reads, checked itself: with no chain named it
        // is the only one served, which need not be one the token may use.
        caller.check_submitter_on(chain.chain_id, &address)?;
        let submitter = SubmitterKey::new(chain.chain_id, address);
        if query.state.is_some() || query.limit.is_some() || query.after.is_some() {
            return Err(ApiError::invalid(
                "request_id",
                "request_id selects one transaction; it cannot be combined with state, limit or after",
            ));
        }
        let view = tx_query::find_by_request_id(&state.pool, submitter, &request_id)
            .await?
            .ok_or_else(|| {
                ApiError::NotFound(format!("no transaction with request_id {request_id:?}"))
            })?;
        return Ok(Json(QueryAnswer::One(Box::new(node_view(&state, view)))).into_response());
    }

    let limit = query.limit.unwrap_or(DEFAULT_LIST_LIMIT);
    let budget = state.limits.page_max_bytes;
    // The page's bytes count against the node's budget from the read to
    // the send.
    let permit = pages.reserve()?;
    let (rows, more) = tx_query::list_within(
        &state.pool,
        &chain_ids,
        address,
        query.state,
        limit,
        query.after,
        budget,
    )
    .await?;
    let shown = |view: TxView| node_view(&state, view);
    let page = Page::fill(rows, more, budget, shown).map_err(|err| {
        tracing::error!(target: "http", error = %err, "a listed transaction did not serialise");
        ApiError::Internal
    })?;
    Ok(super::capacity::json_holding(
        &QueryAnswer::Page(page),
        permit,
    ))
}
