//! `GET /v1/completions?after=CURSOR&limit=N&wait=30s` — the completion feed
//! (README "Data model and leases" and "HTTP API"), with long polling.
//!
//! ```text
//! PostgreSQL ──NOTIFY txmgr_completion──► one PgListener task per process
//!                                              │ watch (generation, listening)
//!                                              ▼
//! GET /v1/completions ─► read ─► rows? ─► answer
//!                          ▲       │ none: wait for a wake-up (or the deadline),
//!                          └───────┘ then re-check every RECHECK_INTERVAL
//! ```
//!
//! Waiting is bounded per node: at most `http.max_long_polls` requests wait
//! at once (`CompletionNotifier` holds the permits). A request that finds
//! rows is answered whatever the count; one that would wait beyond the cap
//! gets 503 `busy` with `Retry-After` instead of an empty page, because a
//! client answered at once with nothing would ask again at once, and the
//! cap would turn waiting clients into a busy loop.
//!
//! Pages are bounded in bytes as well as rows (`http.page_max_bytes`): a page
//! ends early and `next_after` continues after its last row.
//!
//! Every chain's rows, whatever this node serves: the cursor is one for the
//! whole feed, and serving a row needs no chain RPC, so any node behind a
//! load balancer answers the same page, and a reload that adds or removes a
//! chain changes nothing. Only the request's `chain_id`s and the token's
//! scope filter what is shown.
//!
//! Why re-check after a wake-up: the feed serves only rows below the snapshot
//! `xmin` (see `txmgr_actors::store::completions`), so a completion whose
//! transaction has committed may still be held back while an older transaction
//! anywhere on the server is running. The NOTIFY says "something committed";
//! bounded re-checks until the deadline pick the row up once the older
//! transaction ends, which sends no notification of its own.

use std::time::Duration;

use axum::extract::{rejection::QueryRejection, Query, State};
use tokio::{sync::OwnedSemaphorePermit, time::Instant};
use txmgr_actors::store::completions::{self, CompletionRow, FeedCursor};

use super::{
    capacity::BUSY_RETRY_AFTER,
    error::{ApiError, ApiResult, ErrorResponse},
    query, AppState,
};

/// Page size when `limit` is not given.
pub(crate) const DEFAULT_LIMIT: u32 = 100;
/// Largest page a client may ask for.
pub(crate) const MAX_LIMIT: u32 = 1000;
/// Longest long poll a client may ask for.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(60);
/// How often a long poll re-reads once woken (or while the listener is down):
/// often enough that a held-back row is served soon after the horizon moves,
/// rarely enough that a waiting client costs a handful of queries a second.
const RECHECK_INTERVAL: Duration = Duration::from_millis(200);
/// Query parameters, checked by hand so that each problem names its parameter.
#[derive(Debug)]
struct FeedQuery {
    /// Only these chains (`chain_id`, repeatable, served here or not); every
    /// chain when empty.
    chain_ids: Vec<u64>,
    after: Option<FeedCursor>,
    /// `after=end`: start after the feed's current end.
    from_end: bool,
    limit: u32,
    wait: Duration,
    /// Serve funds events (`LOW_BALANCE`, `BALANCE_RESTORED`) too.
    funds: bool,
}

impl FeedQuery {
    fn parse(pairs: Vec<(String, String)>) -> ApiResult<Self> {
        let mut query = FeedQuery {
            chain_ids: Vec::new(),
            after: None,
            from_end: false,
            limit: DEFAULT_LIMIT,
            wait: Duration::ZERO,
            funds: false,
        };
        let (chains, pairs): (Vec<_>, Vec<_>) =
            pairs.into_iter().partition(|(key, _)| key == "chain_id");
        for (_, value) in chains {
            query.chain_ids.push(query::chain_id("chain_id", &value)?);
        }
        query::each_once(pairs, |key, value| {
            match key {
                "after" if value == "end" => query.from_end = true,
                "after" => {
                    query.after =
                        Some(FeedCursor::parse(&value).map_err(|err| {
                            ApiError::invalid("after", format!("{err}, or `end`"))
                        })?);
                }
                "limit" => query.limit = query::limit(&value, MAX_LIMIT)?,
                "wait" => {
                    query.wait = humantime::parse_duration(&value)
                        .ok()
                        .filter(|wait| *wait <= MAX_WAIT)
                        .ok_or_else(|| {
                            ApiError::invalid(
                                "wait",
                                format!(
                                    "wait must be a duration such as \"30s\" or \"500ms\", at most {}",
                                    humantime::format_duration(MAX_WAIT)
                                ),
                            )
                        })?;
                }
                "funds" => {
                    query.funds = match value.as_str() {
                        "true" => true,
                        "false" => false,
                        _ => return Err(ApiError::invalid("funds", "funds must be true or false")),
                    };
                }
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(query)
    }
}

/// One page of the feed, as the API crate defines it.
pub(crate) use txmgr_api::FeedPage;

/// Serves `rows` in feed order while their JSON fits `budget` bytes (the
/// first served row always fits). Rows the caller may not see are
/// skipped, and the cursor still moves past them. `next_after` is the
/// cursor of the last row passed, served or skipped; `after` when none.
fn fill_page(
    rows: Vec<CompletionRow>,
    after: Option<FeedCursor>,
    visible: impl Fn(&CompletionRow) -> bool,
    budget: usize,
) -> FeedPage {
    let mut next_after = after.map(|cursor| cursor.to_token());
    let mut items = Vec::new();
    let mut used = 0usize;
    for row in rows {
        if !visible(&row) {
            next_after = Some(row.cursor.clone());
            continue;
        }
        // +1: the comma between items. A row always serialises.
        let size = serde_json::to_vec(&row).map_or(0, |json| json.len()) + 1;
        if !items.is_empty() && used + size > budget {
            break;
        }
        used += size;
        next_after = Some(row.cursor.clone());
        items.push(row);
    }
    FeedPage { items, next_after }
}

/// `GET /v1/completions`: the next rows after `after`; when there are none
/// yet, waits up to `wait` for one — if fewer than `http.max_long_polls`
/// requests wait already, else 503 `busy`.
///
/// A client token with a submitter allow-list sees only its submitters'
/// completions; the cursor still moves past the others.
#[utoipa::path(get, path = "/v1/completions", tag = "transactions",
    description = "Every terminal transition and every entry into STUCK (and, with `funds=true`, every balance crossing of a submitter's `min_balance`), in commit order; long-polls up to `wait` when nothing is new. A page also ends once its items reach `http.page_max_bytes` of JSON; `next_after` continues after its last row.",
    params(
        ("chain_id" = Option<Vec<u64>>, Query, description = "only these chains (repeatable; default every chain): a filter on the one feed, whose cursor covers every chain; any chain id, whether or not the answering node serves it", explode = true),
        ("after" = Option<String>, Query, description = "the `next_after` of the previous page; absent = from the beginning; `end` = after the feed's current end (only what completes from now on; the answer's `next_after` is that position, to store before creating what you will wait for)", pattern = "^([0-9]+-[0-9]+|end)$"),
        ("limit" = Option<u32>, Query, description = "page size (default 100)", minimum = 1, maximum = 1000),
        ("wait" = Option<String>, Query, description = "long poll when nothing is new, e.g. `30s`; at most 60 s and 90 % of `http.request_timeout`"),
        ("funds" = Option<bool>, Query, description = "also serve funds events (LOW_BALANCE, BALANCE_RESTORED: no `tx_id`, with `balance_wei`); default false")),
    responses(
        (status = 200, description = "the next completions (possibly none)", body = FeedPage),
        (status = 400, description = "invalid_request: a bad or unknown parameter (`field` names it)", body = ErrorResponse),
        (status = 500, description = "internal: corrupt data; details only in the node's log", body = ErrorResponse),
        (status = 503, description = "unavailable: the database is unavailable; or busy: `http.max_long_polls` requests wait already and this one would wait too (`Retry-After`)", body = ErrorResponse)))]
pub(crate) async fn feed(
    State(state): State<AppState>,
    caller: super::auth::Caller,
    axum::Extension(pages): axum::Extension<super::PageBudget>,
    pairs: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> ApiResult<axum::response::Response> {
    let Query(pairs) =
        pairs.map_err(|e| ApiError::invalid_request(format!("malformed query string: {e}")))?;
    let mut query = FeedQuery::parse(pairs)?;
    if query.from_end {
        query.after = completions::end(&state.pool).await?;
    }
    // Answer an ordinary empty page before the request timeout would turn
    // the long poll into a 503.
    let timeout = state.limits.request_timeout;
    let wait = query.wait.min(timeout - timeout / 10);
    let deadline = Instant::now() + wait;
    // Subscribe before the first read, so a commit between that read and the
    // wait below still wakes this request.
    let mut signal = state.completions.subscribe();
    let mut rechecking = !signal.borrow().listening;
    // Taken before the first wait, kept until the answer.
    let mut waiting: Option<OwnedSemaphorePermit> = None;
    let visible = |row: &CompletionRow| {
        (query.chain_ids.is_empty() || query.chain_ids.contains(&row.chain_id))
            && (query.funds || !row.state.is_funds())
            && row
                .submitter
                .parse::<alloy::primitives::Address>()
                .is_ok_and(|address| caller.may_use_on(row.chain_id.into(), &address))
    };
    loop {
        // The page's bytes count against the node's budget from the read to
        // the send; a long poll holds nothing while it waits.
        let permit = pages.reserve()?;
        let (rows, _) = completions::read(&state.pool, query.after, query.limit).await?;
        if !rows.is_empty() || Instant::now() >= deadline {
            let page = fill_page(rows, query.after, visible, state.limits.page_max_bytes);
            return Ok(super::capacity::json_holding(&page, permit));
        }
        drop(permit);
        if waiting.is_none() {
            waiting = Some(state.completions.wait_permit().ok_or(ApiError::Busy {
                what: "long polls waiting",
                retry_after: BUSY_RETRY_AFTER,
            })?);
        }
        if rechecking {
            // Woken before (or no listener): the rows may be held back by an
            // older transaction, which ends without a notification.
            tokio::time::sleep_until((Instant::now() + RECHECK_INTERVAL).min(deadline)).await;
        } else {
            tokio::select! {
                // An error means the listener is gone: fall back to re-checks.
                _ = signal.changed() => rechecking = true,
                () = tokio::time::sleep_until(deadline) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn field_of(error: ApiError) -> Option<String> {
        match error {
            ApiError::InvalidRequest { field, .. } => field,
            other => panic!("not a 400: {other:?}"),
        }
    }

    fn row(seq: i64, submitter: &str) -> CompletionRow {
        CompletionRow {
            cursor: FeedCursor::new(7, seq).to_token(),
            chain_id: 31337,
            tx_id: Some(uuid::Uuid::nil()),
            submitter: submitter.to_owned(),
            request_id: Some("r".repeat(100)),
            state: txmgr_actors::domain::FeedEvent::Confirmed,
            tx_hash: None,
            block_number: None,
            nonce: None,
            reason: None,
            balance_wei: None,
            min_balance_wei: None,
            completed_at: sqlx::types::chrono::DateTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn a_page_ends_at_its_byte_budget_and_continues_after_its_last_row() {
        let rows: Vec<CompletionRow> = (1..=5).map(|seq| row(seq, "0xa")).collect();
        let one = serde_json::to_vec(&rows[0]).expect("row").len() + 1;
        let page = fill_page(rows.clone(), None, |_| true, 2 * one + one / 2);
        assert_eq!(page.items.len(), 2);
        assert_eq!(page.next_after.as_deref(), Some("7-2"));
        // The first row is served even when it alone is over the budget.
        let page = fill_page(rows.clone(), None, |_| true, 1);
        assert_eq!(page.items.len(), 1);
        assert_eq!(page.next_after.as_deref(), Some("7-1"));
        let page = fill_page(rows, None, |_| true, usize::MAX);
        assert_eq!(page.items.len(), 5);
        assert_eq!(page.next_after.as_deref(), Some("7-5"));
    }

    #[test]
    fn rows_the_caller_may_not_see_move_the_cursor_without_weight() {
        let rows = vec![row(1, "0xa"), row(2, "0xb"), row(3, "0xb"), row(4, "0xa")];
        // Row 1 is served; the budget is spent, but rows 2 and 3 weigh
        // nothing to this caller and are passed; row 4 waits for the next page.
        let page = fill_page(rows.clone(), None, |r| r.submitter == "0xa", 1);
        assert_eq!(page.items.len(), 1);
        assert_eq!(page.next_after.as_deref(), Some("7-3"));
        let page = fill_page(
            rows[1..3].to_vec(),
            Some(FeedCursor::new(7, 1)),
            |r| r.submitter == "0xa",
            1,
        );
        assert!(page.items.is_empty());
        assert_eq!(page.next_after.as_deref(), Some("7-3"));
        let page = fill_page(Vec::new(), Some(FeedCursor::new(7, 3)), |_| true, 1);
        assert_eq!(page.next_after.as_deref(), Some("7-3"));
    }

    #[test]
    fn defaults_apply_when_parameters_are_absent() {
        let query = FeedQuery::parse(Vec::new()).expect("empty query is valid");
        assert_eq!(query.after, None);
        assert_eq!(query.limit, DEFAULT_LIMIT);
        assert_eq!(query.wait, Duration::ZERO);
    }

    #[test]
    fn parameters_are_read() {
        let query = FeedQuery::parse(pairs(&[
            ("after", "7-3"),
            ("limit", "1000"),
            ("wait", "60s"),
        ]))
        .expect("valid query");
        assert_eq!(query.after, Some(FeedCursor::new(7, 3)));
        assert_eq!(query.limit, 1000);
        assert_eq!(query.wait, MAX_WAIT);
    }

    #[test]
    fn bad_parameters_name_their_field() {
        for (key, value) in [
            ("after", "nope"),
            ("limit", "0"),
            ("limit", "1001"),
            ("limit", "ten"),
            ("wait", "61s"),
            ("wait", "soon"),
            ("wait", "-1s"),
            ("cursor", "1-1"),
        ] {
            let error = FeedQuery::parse(pairs(&[(key, value)])).expect_err(value);
            assert_eq!(field_of(error).as_deref(), Some(key), "{key}={value}");
        }
        let twice = FeedQuery::parse(pairs(&[("limit", "1"), ("limit", "2")])).expect_err("twice");
        assert_eq!(field_of(twice).as_deref(), Some("limit"));
    }
}
