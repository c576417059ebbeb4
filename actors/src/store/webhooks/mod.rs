//! A webhook's durable progress over the completion feed (README "Webhooks"):
//! its cursor, the events done beyond it, dead letters, and the ops view.
//!
//! ```text
//! feed: … e1 e2 e3 e4 e5 …      cursor = e2: everything up to e2 is done
//!             └ done ┘ │  └ done (webhook_done), e3 still pending
//!                      pending
//! ```
//!
//! Every write here is fenced by the webhook lease's token: the progress
//! statement updates the cursor row only where the token still matches, and
//! the rest of the transaction runs only when it did.

use sqlx::PgPool;

use super::{completions::FeedCursor, webhook_lease::WebhookKey, StoreResult};

mod views;
use crate::domain::ChainId;
pub use views::{dead_letters, statuses, DeadLetter, WebhookStatus, LAG_COUNT_CAP};

/// The chain whose id keys the deployment's webhook rows (cursor, lease,
/// done markers, dead letters) already in the database, for the webhooks
/// `names`: a served chain (of `served`) first, else any — so that adding,
/// removing or renaming chains never moves a webhook off its cursor; the
/// one with most cursors, ties to the lowest id. `None`: no row yet.
pub async fn keyed_chain(
    pool: &PgPool,
    served: &[ChainId],
    names: &[String],
) -> StoreResult<Option<ChainId>> {
    Ok(sqlx::query_scalar!(
        r#"SELECT chain_id AS "chain_id!: ChainId" FROM webhook_cursor
            WHERE webhook = ANY($2)
            GROUP BY chain_id
            ORDER BY chain_id = ANY($1) DESC, count(*) DESC, chain_id
            LIMIT 1"#,
        served as _,
        names,
    )
    .fetch_optional(pool)
    .await?)
}

/// Where a new holder resumes: the cursor and the events done beyond it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resume {
    /// Everything at or before it was delivered or dead-lettered.
    pub cursor: FeedCursor,
    /// Done events after the cursor (their submitters' earlier events were done too).
    pub done: Vec<FeedCursor>,
}

/// Reads where the webhook's delivery stands.
pub async fn resume(pool: &PgPool, key: &WebhookKey) -> StoreResult<Resume> {
    let cursor = sqlx::query!(
        r#"SELECT cursor_xid::text AS "xid!", cursor_seq
             FROM webhook_cursor WHERE chain_id = $1 AND webhook = $2"#,
        key.chain_id as _,
        &key.name,
    )
    .fetch_optional(pool)
    .await?
    .map(|row| (row.xid, row.cursor_seq));
    let done: Vec<(String, i64)> = sqlx::query!(
        r#"SELECT xid::text AS "xid!", seq FROM webhook_done
            WHERE chain_id = $1 AND webhook = $2 ORDER BY xid, seq"#,
        key.chain_id as _,
        &key.name,
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(|row| (row.xid, row.seq))
    .collect();
    let parse = |(xid, seq): (String, i64)| FeedCursor::parse(&format!("{xid}-{seq}")).ok();
    Ok(Resume {
        cursor: cursor.and_then(parse).unwrap_or_default(),
        done: done.into_iter().filter_map(parse).collect(),
    })
}

/// An event given up on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewDeadLetter {
    /// Its feed row.
    pub feed_seq: i64,
    /// The delivery id the receiver saw.
    pub delivery_id: String,
    /// Attempts made.
    pub attempts: u32,
    /// The last HTTP status, when there was an answer.
    pub last_status: Option<u16>,
    /// What went wrong last.
    pub last_error: String,
}

/// What a holder has finished since its last commit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    /// The new cursor, when the done prefix moved.
    pub cursor: Option<FeedCursor>,
    /// Events done beyond the (new) cursor.
    pub done: Vec<FeedCursor>,
    /// Events given up on (also in `done` or before `cursor`).
    pub dead: Vec<NewDeadLetter>,
    /// Events delivered (2xx).
    pub delivered: u64,
    /// Attempts that failed.
    pub failed_attempts: u64,
    /// The last failure, if any.
    pub last_error: Option<String>,
    /// Dead letters redelivered (2xx) by id.
    pub redelivered: Vec<i64>,
    /// Dead letters whose redelivery failed again, by id.
    pub redelivery_failed: Vec<(i64, String)>,
}

impl Progress {
    /// True when there is nothing to write.
    pub fn is_empty(&self) -> bool {
        *self == Progress::default()
    }

    /// Adds `other`'s outcomes and counts to these (a failed commit's,
    /// kept for the next one); the cursor and markers are recomputed then.
    pub fn absorb(&mut self, other: Progress) {
        self.dead.extend(other.dead);
        self.delivered += other.delivered;
        self.failed_attempts += other.failed_attempts;
        if self.last_error.is_none() {
            self.last_error = other.last_error;
        }
        self.redelivered.extend(other.redelivered);
        self.redelivery_failed.extend(other.redelivery_failed);
    }
}

/// Writes `progress` in one transaction if `token` still holds the lease;
/// false (nothing written) when it does not.
pub async fn commit(
    pool: &PgPool,
    key: &WebhookKey,
    token: i64,
    progress: &Progress,
) -> StoreResult<bool> {
    let mut tx = pool.begin().await?;
    let (xid, seq) = progress
        .cursor
        .map_or((None, None), |c| (Some(c.xid().to_string()), Some(c.seq())));
    let fenced = sqlx::query!(
        "UPDATE webhook_cursor
            SET cursor_xid = COALESCE($4::text::xid8, cursor_xid),
                cursor_seq = COALESCE($5::bigint, cursor_seq),
                delivered = delivered + $6::bigint, failed_attempts = failed_attempts + $7::bigint,
                last_delivered_at = CASE WHEN $6::bigint > 0 THEN now() ELSE last_delivered_at END,
                last_error = COALESCE($8::text, last_error), updated_at = now()
          WHERE chain_id = $1 AND webhook = $2 AND fencing_token = $3",
        key.chain_id as _,
        &key.name,
        token,
        xid,
        seq,
        i64::try_from(progress.delivered).unwrap_or(i64::MAX),
        i64::try_from(progress.failed_attempts).unwrap_or(i64::MAX),
        progress.last_error.as_deref(),
    )
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 0;
    if fenced {
        return Ok(false);
    }
    if let Some(cursor) = progress.cursor {
        sqlx::query!(
            "DELETE FROM webhook_done WHERE chain_id = $1 AND webhook = $2
                AND (xid, seq) <= ($3::text::xid8, $4::bigint)",
            key.chain_id as _,
            &key.name,
            cursor.xid().to_string(),
            cursor.seq(),
        )
        .execute(&mut *tx)
        .await?;
    }
    if !progress.done.is_empty() {
        let xids: Vec<String> = progress.done.iter().map(|c| c.xid().to_string()).collect();
        let seqs: Vec<i64> = progress.done.iter().map(|c| c.seq()).collect();
        sqlx::query!(
            "INSERT INTO webhook_done (chain_id, webhook, xid, seq)
             SELECT $1, $2, x::xid8, s FROM unnest($3::text[], $4::bigint[]) AS d(x, s)
             ON CONFLICT DO NOTHING",
            key.chain_id as _,
            &key.name,
            &xids,
            &seqs,
        )
        .execute(&mut *tx)
        .await?;
    }
    for dead in &progress.dead {
        sqlx::query!(
            "INSERT INTO webhook_dead_letter
                    (chain_id, webhook, delivery_id, feed_seq, attempts, last_status, last_error)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (chain_id, webhook, feed_seq) DO UPDATE
                SET attempts = webhook_dead_letter.attempts + EXCLUDED.attempts,
                    last_status = EXCLUDED.last_status, last_error = EXCLUDED.last_error,
                    delivered_at = NULL, redeliver_asked = NULL",
            key.chain_id as _,
            &key.name,
            &dead.delivery_id,
            dead.feed_seq,
            i32::try_from(dead.attempts).unwrap_or(i32::MAX),
            dead.last_status.map(i32::from),
            &dead.last_error,
        )
        .execute(&mut *tx)
        .await?;
    }
    if !progress.redelivered.is_empty() {
        sqlx::query!(
            "UPDATE webhook_dead_letter SET delivered_at = now(), redeliver_asked = NULL
              WHERE chain_id = $1 AND webhook = $2 AND id = ANY($3)",
            key.chain_id as _,
            &key.name,
            &progress.redelivered,
        )
        .execute(&mut *tx)
        .await?;
    }
    for (id, error) in &progress.redelivery_failed {
        sqlx::query!(
            "UPDATE webhook_dead_letter SET redeliver_asked = NULL, last_error = $4
              WHERE chain_id = $1 AND webhook = $2 AND id = $3",
            key.chain_id as _,
            &key.name,
            id,
            error,
        )
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(true)
}

/// A dead letter an operator asked to deliver again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedeliveryAsked {
    /// The dead letter's id.
    pub id: i64,
    /// Its feed row.
    pub feed_seq: i64,
}

/// Up to `limit` dead letters of the webhook waiting for redelivery.
pub async fn redeliveries(
    pool: &PgPool,
    key: &WebhookKey,
    limit: i64,
) -> StoreResult<Vec<RedeliveryAsked>> {
    Ok(sqlx::query_as!(
        RedeliveryAsked,
        "SELECT id, feed_seq FROM webhook_dead_letter
          WHERE chain_id = $1 AND webhook = $2 AND delivered_at IS NULL
            AND redeliver_asked IS NOT NULL
          ORDER BY id LIMIT $3",
        key.chain_id as _,
        &key.name,
        limit,
    )
    .fetch_all(pool)
    .await?)
}

/// Asks for the redelivery of one dead letter (`id`) or of every open one;
/// returns how many were asked for. With a `scope` (`(chain id, lower-case
/// address)` pairs) only dead letters of events of these submitters on
/// these chains are touched.
pub async fn ask_redelivery(
    pool: &PgPool,
    key: &WebhookKey,
    id: Option<i64>,
    scope: Option<&[(ChainId, String)]>,
) -> StoreResult<u64> {
    let (scope_chains, scope_addresses) = split_scope(scope);
    let result = sqlx::query!(
        "UPDATE webhook_dead_letter d SET redeliver_asked = now()
          WHERE d.chain_id = $1 AND d.webhook = $2 AND d.delivered_at IS NULL
            AND ($3::bigint IS NULL OR d.id = $3)
            AND ($4::bigint[] IS NULL OR EXISTS (
                 SELECT 1 FROM tx_completion c
                  WHERE c.seq = d.feed_seq
                    AND (c.chain_id, c.submitter) IN (SELECT * FROM UNNEST($4::bigint[], $5::text[]))))",
        key.chain_id as _,
        &key.name,
        id,
        scope_chains.as_deref() as _,
        scope_addresses.as_deref(),
    )
    .execute(pool)
    .await?;
    Ok(result.rows_affected())
}

/// A scope's pairs as the two arrays the queries unnest.
pub(super) fn split_scope(
    scope: Option<&[(ChainId, String)]>,
) -> (Option<Vec<ChainId>>, Option<Vec<String>>) {
    match scope {
        Some(pairs) => {
            let (chains, addresses) = pairs.iter().cloned().unzip();
            (Some(chains), Some(addresses))
        }
        None => (None, None),
    }
}
