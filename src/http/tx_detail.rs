//! `GET /v1/ops/transactions/{key}`: one transaction as the ops page's
//! transaction view shows it — found by its id, any attempt's hash or, with
//! its submitter, its request id — with every attempt, its feed rows, their
//! dead letters and the operators' actions on it.
//!
//! A request id is unique only per `(chain, submitter)`: looked up alone it
//! would pick one of several clients' `order-42`, and the page's buttons
//! would then act on the wrong intent. So a request id needs `submitter`
//! (and `chain_id` when several chains are served). A token limited to some
//! submitters reads another submitter's transaction as absent (404).

use alloy::primitives::Address;
use axum::{
    extract::{rejection::QueryRejection, Query, State},
    Json,
};
use serde::Serialize;
use txmgr_actors::{
    domain::{ChainId, SubmitterKey},
    store::tx_query::{self, AttemptView, AuditView, DeadLetterView, FeedRowView, TxView},
};
use uuid::Uuid;

use super::{
    auth::Caller,
    error::{ApiError, ApiResult},
    intent_body::parse_address,
    path::ApiPath,
    tx_reads::node_view,
    AppState,
};

/// Body of `GET /v1/ops/transactions/{key}`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TxDetailView {
    /// The transaction, as `GET /v1/transactions/{tx_id}` answers it.
    pub transaction: TxView,
    /// Every signed attempt, in signing order.
    pub attempts: Vec<AttemptView>,
    /// Its feed rows (what webhooks deliver), in feed order.
    pub feed: Vec<FeedRowView>,
    /// Deliveries of those rows that failed for good.
    pub dead_letters: Vec<DeadLetterView>,
    /// Operators' actions on it: the newest 50, oldest first.
    pub audit: Vec<AuditView>,
    /// How many actions it has in all (more than `audit` holds when over 50).
    pub audit_total: i64,
}

/// What the path's `key` is.
#[derive(Debug, PartialEq, Eq)]
enum Key {
    /// A transaction id.
    TxId(Uuid),
    /// An attempt's hash, lower-cased.
    Hash(String),
    /// Anything else: a request id.
    RequestId(String),
}

impl Key {
    fn parse(key: &str) -> Self {
        if let Ok(tx_id) = Uuid::parse_str(key) {
            return Key::TxId(tx_id);
        }
        let hash = key.to_ascii_lowercase();
        if hash.len() == 66
            && hash.starts_with("0x")
            && hash[2..].bytes().all(|b| b.is_ascii_hexdigit())
        {
            return Key::Hash(hash);
        }
        Key::RequestId(key.to_owned())
    }
}

/// `submitter` and `chain_id` of the query string.
#[derive(Debug, Default)]
struct Narrowing {
    submitter: Option<Address>,
    chain_id: Option<u64>,
}

impl Narrowing {
    fn parse(pairs: Result<Query<Vec<(String, String)>>, QueryRejection>) -> ApiResult<Self> {
        let Query(pairs) =
            pairs.map_err(|e| ApiError::invalid_request(format!("malformed query string: {e}")))?;
        let mut narrowing = Narrowing::default();
        super::query::each_once(pairs, |key, value| {
            match key {
                "submitter" => narrowing.submitter = Some(parse_address("submitter", &value)?),
                "chain_id" => {
                    narrowing.chain_id = Some(super::query::chain_id("chain_id", &value)?)
                }
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(narrowing)
    }

    /// Whether `view` is on the named submitter and chain (when named).
    fn admits(&self, view: &TxView) -> bool {
        self.chain_id.is_none_or(|id| id == view.chain_id)
            && self
                .submitter
                .is_none_or(|a| format!("{a:#x}") == view.submitter)
    }
}

/// `GET /v1/ops/transactions/{key}`.
#[utoipa::path(get, path = "/v1/ops/transactions/{key}", tag = "ops",
    description = "One transaction with its attempts, feed rows, dead letters and audit rows; `key` is its tx id, the hash of any of its attempts, or a request id together with `submitter` (request ids are unique per chain and submitter only). Any chain's transaction is readable, also one of a chain this node no longer serves.",
    params(("key" = String, Path, description = "tx id, attempt hash (0x + 64 hex) or request id", min_length = 1, max_length = 256),
        ("submitter" = Option<String>, Query, description = "the submitter: required with a request id; with a tx id or hash, only a transaction of this submitter", pattern = "^0x[0-9a-fA-F]{40}$"),
        ("chain_id" = Option<u64>, Query, description = "the chain: required with a request id when several chains are served; with a tx id or hash, only a transaction of this chain")),
    responses(
        (status = 200, description = "the transaction and its history", body = TxDetailView),
        (status = 400, description = "invalid_request: a request id without `submitter`, or a bad or unknown parameter (`field` names it); missing_field: `chain_id` with a request id when several chains are served", body = super::error_body::ErrorResponse),
        (status = 404, description = "not_found: no such transaction (or another submitter's, for a token with an allow-list); aged_out: no transaction with this tx id, and the id is older than history.retain (retention may have removed it)", body = super::error_body::ErrorResponse)))]
pub(crate) async fn detail(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(key): ApiPath<String>,
    pairs: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> ApiResult<Json<TxDetailView>> {
    let narrowing = Narrowing::parse(pairs)?;
    let not_found = || ApiError::NotFound(format!("no transaction {key:?}"));
    let found = match Key::parse(&key) {
        Key::TxId(tx_id) => tx_query::get(&state.pool, None, tx_id).await?,
        Key::Hash(hash) => match tx_query::find_by_attempt_hash(&state.pool, &hash).await? {
            Some(tx_id) => tx_query::get(&state.pool, None, tx_id).await?,
            None => None,
        },
        Key::RequestId(request_id) => {
            let submitter = narrowing.submitter.ok_or_else(|| {
                ApiError::invalid(
                    "submitter",
                    "a request id names a transaction only with its submitter: add ?submitter=0x… (and chain_id when several chains are served)",
                )
            })?;
            let chain_id = match narrowing.chain_id {
                // Any chain: a removed chain's intents stay readable.
                Some(id) => ChainId::from(id),
                None => state.chains.resolve(None, "chain_id")?.chain_id,
            };
            let key = SubmitterKey::new(chain_id, submitter);
            tx_query::find_by_request_id(&state.pool, key, &request_id).await?
        }
    };
    let view = match found {
        Some(view) => Some(view)
            .filter(|view| narrowing.admits(view))
            .ok_or_else(not_found)?,
        None => match Key::parse(&key) {
            Key::TxId(tx_id) => return Err(super::tx_reads::missing(&state, tx_id).await),
            _ => return Err(not_found()),
        },
    };
    // Another submitter's transaction is absent to a token limited to some
    // submitters: its attempts, feed and audit rows are not the token's.
    let visible = view
        .submitter
        .parse::<Address>()
        .is_ok_and(|address| caller.may_use_on(view.chain_id.into(), &address));
    if !visible {
        return Err(not_found());
    }
    let detail = tx_query::detail(&state.pool, view.tx_id).await?;
    Ok(Json(TxDetailView {
        transaction: node_view(&state, view),
        attempts: detail.attempts,
        feed: detail.feed,
        dead_letters: detail.dead_letters,
        audit: detail.audit,
        audit_total: detail.audit_total,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_an_id_a_hash_or_a_request_id() {
        let id = Uuid::now_v7();
        assert_eq!(Key::parse(&id.to_string()), Key::TxId(id));
        let hash = format!("0x{}", "Ab".repeat(32));
        assert_eq!(Key::parse(&hash), Key::Hash(hash.to_ascii_lowercase()));
        for request_id in ["order-42", "0x1234", &format!("0x{}", "zz".repeat(32))] {
            assert_eq!(
                Key::parse(request_id),
                Key::RequestId(request_id.to_owned())
            );
        }
    }
}
