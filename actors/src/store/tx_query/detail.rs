//! What the ops page's transaction view shows besides the transaction
//! itself (README "Operations"): every attempt with its fees and the
//! answer to its broadcast, the feed rows written for it, the webhook dead
//! letters of those rows, and the operators' actions on it.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;
use uuid::Uuid;

use crate::store::StoreResult;

/// One signed attempt.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct AttemptView {
    /// 1, 2, … in signing order.
    pub attempt_no: i32,
    /// `original`, `rebroadcast`, `bump` or `cancel`.
    pub kind: String,
    /// The nonce signed.
    pub nonce: i64,
    /// Its hash.
    pub tx_hash: String,
    /// EIP-1559 max fee per gas, wei (decimal).
    pub max_fee_per_gas: Option<String>,
    /// EIP-1559 priority fee per gas, wei (decimal).
    pub max_priority_fee_per_gas: Option<String>,
    /// Legacy gas price, wei (decimal).
    pub gas_price: Option<String>,
    /// Gas limit signed.
    pub gas_limit: i64,
    /// The last answer to its broadcast (endpoints' verdict), if sent.
    pub broadcast_result: Option<String>,
    /// When it was signed and persisted.
    pub created_at: DateTime<Utc>,
}

/// One feed row of the transaction.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct FeedRowView {
    /// Its sequence number in the feed.
    pub seq: i64,
    /// CONFIRMED, FAILED_FINAL, REJECTED, CANCELLED, STUCK or REORGED_OUT.
    pub state: String,
    /// Why, for anything but CONFIRMED.
    pub reason: Option<String>,
    /// When it was written.
    pub completed_at: DateTime<Utc>,
}

/// A webhook delivery of one of its feed rows that failed for good.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct DeadLetterView {
    /// The webhook.
    pub webhook: String,
    /// The feed row.
    pub feed_seq: i64,
    /// Attempts made.
    pub attempts: i32,
    /// The last HTTP status, if any.
    pub last_status: Option<i32>,
    /// The last error.
    pub last_error: String,
    /// Delivered later by a redeliver.
    pub delivered_at: Option<DateTime<Utc>>,
}

/// An operator's action on the transaction.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct AuditView {
    /// When.
    pub at: DateTime<Utc>,
    /// The token's name.
    pub actor: String,
    /// What (`cancel`, `speedup`, …).
    pub action: String,
    /// The operator's reason.
    pub reason: Option<String>,
    /// `started`, `done`, `failed`…
    pub outcome: Option<String>,
}

/// Everything about one transaction beyond its row.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct TxDetail {
    /// Signing order.
    pub attempts: Vec<AttemptView>,
    /// Feed order.
    pub feed: Vec<FeedRowView>,
    /// Failed deliveries of those rows.
    pub dead_letters: Vec<DeadLetterView>,
    /// The newest [`AUDIT_ROWS_SHOWN`], oldest first.
    pub audit: Vec<AuditView>,
    /// How many audit rows the transaction has in all.
    pub audit_total: i64,
}

/// Audit rows a transaction view shows at most (the newest): actions on one
/// intent are many when an operator repeats them, and a view must not load
/// them all.
pub const AUDIT_ROWS_SHOWN: i64 = 50;

/// The transaction one of whose attempts has this hash (lower-case `0x`
/// hex), on any chain: reads are not limited to the chains a node serves
/// (an intent of a chain a reload removed stays readable).
///
/// The hash index is ordered by the hour an attempt was signed (migration
/// 20261207000001: inserts land in the current hour's region however long
/// the history), so the lookup probes each hour from the oldest attempt's
/// to the newest's, one index descent per hour; the hash's first 8 bytes
/// pick the entry within an hour, its full text confirms it. The range is
/// read from the index itself (not from the clock, which may have stepped
/// back since), clamped to Ethereum's launch and a day past now so a stray
/// timestamp cannot make it endless. Anything but `0x` and 64 hex digits is
/// no attempt's hash (and would not cast to the index's 8-byte key).
pub async fn find_by_attempt_hash(pool: &PgPool, hash: &str) -> StoreResult<Option<Uuid>> {
    let well_formed = hash.len() == 66
        && hash.starts_with("0x")
        && hash[2..].bytes().all(|b| b.is_ascii_hexdigit());
    if !well_formed {
        return Ok(None);
    }
    Ok(sqlx::query_scalar!(
        "SELECT tx_id FROM tx_attempt
          WHERE date_trunc('hour', created_at AT TIME ZONE 'UTC') = ANY (ARRAY(
                    SELECT generate_series(
                        GREATEST((SELECT min(date_trunc('hour', created_at AT TIME ZONE 'UTC'))
                                    FROM tx_attempt),
                                 timestamp '2015-07-30'),
                        LEAST((SELECT max(date_trunc('hour', created_at AT TIME ZONE 'UTC'))
                                 FROM tx_attempt),
                              date_trunc('hour', now() AT TIME ZONE 'UTC') + interval '1 day'),
                        interval '1 hour')))
            AND ('x' || substr(tx_hash, 3, 16))::bit(64)::bigint
                = ('x' || substr($1::text, 3, 16))::bit(64)::bigint
            AND tx_hash = $1
          LIMIT 1",
        hash,
    )
    .fetch_optional(pool)
    .await?)
}

/// The attempts, feed rows, dead letters and audit rows of `tx_id`.
pub async fn detail(pool: &PgPool, tx_id: Uuid) -> StoreResult<TxDetail> {
    let attempts = sqlx::query_as!(
        AttemptView,
        // An accepted attempt's answer is its intent's `accepted_hash` when
        // none was written on the attempt (migration 20261201000015).
        r#"SELECT t.attempt_no, t.kind, t.nonce, t.tx_hash,
                  t.max_fee_per_gas::text AS "max_fee_per_gas?",
                  t.max_priority_fee_per_gas::text AS "max_priority_fee_per_gas?",
                  t.gas_price::text AS "gas_price?", t.gas_limit,
                  COALESCE(t.broadcast_result,
                           CASE WHEN t.tx_hash = m.accepted_hash THEN 'accepted' END)
                      AS "broadcast_result?",
                  t.created_at
             FROM tx_attempt t JOIN managed_tx m ON m.tx_id = t.tx_id
            WHERE t.tx_id = $1 ORDER BY t.attempt_no"#,
        tx_id,
    )
    .fetch_all(pool)
    .await?;
    let feed = sqlx::query_as!(
        FeedRowView,
        "SELECT seq, state, reason, completed_at FROM tx_completion WHERE tx_id = $1 ORDER BY seq",
        tx_id,
    )
    .fetch_all(pool)
    .await?;
    let dead_letters = sqlx::query_as!(
        DeadLetterView,
        "SELECT d.webhook, d.feed_seq, d.attempts, d.last_status, d.last_error, d.delivered_at
           FROM webhook_dead_letter d JOIN tx_completion c ON c.seq = d.feed_seq
          WHERE c.tx_id = $1 ORDER BY d.feed_seq, d.webhook",
        tx_id,
    )
    .fetch_all(pool)
    .await?;
    // The newest rows along the (tx_id, at) index, then oldest first.
    let mut audit = sqlx::query_as!(
        AuditView,
        "SELECT at, actor, action, reason, outcome FROM ops_audit WHERE tx_id = $1
          ORDER BY at DESC, id DESC LIMIT $2",
        tx_id,
        AUDIT_ROWS_SHOWN,
    )
    .fetch_all(pool)
    .await?;
    audit.reverse();
    let audit_total = sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM ops_audit WHERE tx_id = $1"#,
        tx_id
    )
    .fetch_one(pool)
    .await?;
    Ok(TxDetail {
        attempts,
        feed,
        dead_letters,
        audit,
        audit_total,
    })
}
