//! The ops views of the webhooks (database views: any node answers): each
//! webhook's cursor, lag and failures, and the open dead letters.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;

use super::split_scope;
use crate::{domain::ChainId, store::StoreResult};

/// One webhook as the ops view shows it (database view: any node answers).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct WebhookStatus {
    /// `[[webhooks]].name`.
    pub name: String,
    /// The node delivering (or that last delivered) for it.
    pub owner_node: Option<String>,
    /// True while that node's lease is live.
    pub lease_live: bool,
    /// The durable position: every event up to it was delivered or dead-lettered.
    #[schema(pattern = "^[0-9]+-[0-9]+$")]
    pub cursor: String,
    /// Feed events after the cursor (not all of them may be for this
    /// webhook), counted up to [`LAG_COUNT_CAP`]: that value means "at least".
    pub lag_events: i64,
    /// Age in seconds of the oldest event after the cursor (0 when none).
    pub lag_seconds: f64,
    /// Events delivered (2xx) since the webhook was first configured.
    pub delivered: i64,
    /// Attempts that failed (timeouts, errors, non-2xx).
    pub failed_attempts: i64,
    /// The last failure seen.
    pub last_error: Option<String>,
    /// Last 2xx.
    pub last_delivered_at: Option<DateTime<Utc>>,
    /// Dead letters not redelivered.
    pub dead_letters: i64,
}

/// Feed events after a cursor are counted up to this many: the count runs
/// every few seconds on every node, and must not grow with the feed.
pub const LAG_COUNT_CAP: i64 = 10_000;

/// The status of every webhook with a row (delivery started at least once),
/// or of those named in `only`: webhook rows keyed by `chain_id`, their lag
/// counted over the feed events of every chain (a webhook delivers them all,
/// whatever chains the node asking serves).
/// Bounded work per webhook: the lag is counted up to [`LAG_COUNT_CAP`]
/// rows, and its age is that of the first row after the cursor, both along
/// the feed's `(xid, seq)` index.
pub async fn statuses(
    pool: &PgPool,
    chain_id: ChainId,
    only: Option<&[String]>,
) -> StoreResult<Vec<WebhookStatus>> {
    Ok(sqlx::query_as!(
        WebhookStatus,
        r#"SELECT w.webhook AS name, w.owner_node AS "owner_node?",
                  w.expires_at > now() AS "lease_live!",
                  w.cursor_xid::text || '-' || w.cursor_seq AS "cursor!",
                  (SELECT count(*) FROM (
                      SELECT 1 FROM tx_completion c
                       WHERE (c.xid, c.seq) > (w.cursor_xid, w.cursor_seq)
                       LIMIT $3) capped) AS "lag_events!",
                  COALESCE((SELECT EXTRACT(EPOCH FROM now() - c.completed_at)::float8
                              FROM tx_completion c
                             WHERE (c.xid, c.seq) > (w.cursor_xid, w.cursor_seq)
                             ORDER BY c.xid, c.seq LIMIT 1), 0) AS "lag_seconds!",
                  w.delivered, w.failed_attempts, w.last_error AS "last_error?",
                  w.last_delivered_at AS "last_delivered_at?",
                  (SELECT count(*) FROM webhook_dead_letter d
                    WHERE d.chain_id = w.chain_id AND d.webhook = w.webhook
                      AND d.delivered_at IS NULL) AS "dead_letters!"
             FROM webhook_cursor w
            WHERE w.chain_id = $1 AND ($2::text[] IS NULL OR w.webhook = ANY($2))
            ORDER BY w.webhook"#,
        chain_id as _,
        only,
        LAG_COUNT_CAP,
    )
    .fetch_all(pool)
    .await?)
}

/// One dead letter as the ops view lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct DeadLetter {
    /// The webhook it belongs to.
    pub webhook: String,
    /// Pass to `redeliver` as `id`.
    pub id: i64,
    /// The delivery id the receiver saw.
    pub delivery_id: String,
    /// Attempts made.
    pub attempts: i32,
    /// Last HTTP status, when there was an answer.
    pub last_status: Option<i32>,
    /// What went wrong last.
    pub last_error: String,
    /// When it was given up on.
    pub created_at: DateTime<Utc>,
    /// True while a redelivery is asked for and not yet made.
    pub redelivery_pending: bool,
}

/// Open dead letters of every webhook, oldest first, at most `limit`; with a
/// `scope` (`(chain id, lower-case address)` pairs) only those of events of
/// these submitters on these chains.
pub async fn dead_letters(
    pool: &PgPool,
    chain_id: ChainId,
    limit: i64,
    scope: Option<&[(ChainId, String)]>,
) -> StoreResult<Vec<DeadLetter>> {
    let (scope_chains, scope_addresses) = split_scope(scope);
    Ok(sqlx::query_as!(
        DeadLetter,
        r#"SELECT d.webhook, d.id, d.delivery_id, d.attempts, d.last_status, d.last_error,
                  d.created_at, d.redeliver_asked IS NOT NULL AS "redelivery_pending!"
             FROM webhook_dead_letter d
            WHERE d.chain_id = $1 AND d.delivered_at IS NULL
              AND ($3::bigint[] IS NULL OR EXISTS (
                   SELECT 1 FROM tx_completion c
                    WHERE c.seq = d.feed_seq
                      AND (c.chain_id, c.submitter) IN (SELECT * FROM UNNEST($3::bigint[], $4::text[]))))
            ORDER BY d.id LIMIT $2"#,
        chain_id as _,
        limit,
        scope_chains.as_deref() as _,
        scope_addresses.as_deref(),
    )
    .fetch_all(pool)
    .await?)
}
