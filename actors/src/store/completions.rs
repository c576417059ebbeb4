//! The completion feed (README "Data model and leases", `tx_completion`): one row per
//! terminal transition (and per entry into STUCK), written in the same
//! transaction as the transition, read by clients page by page without ever
//! skipping a row.
//!
//! ```text
//! writer txn:  UPDATE managed_tx … ─► record() ─► INSERT tx_completion + NOTIFY ─► COMMIT
//! reader:      read(after) ─► rows with xid < horizon, (xid, seq) > after ─► next_after
//! ```
//!
//! Why `(xid, seq)` and the horizon: `seq` is drawn at insert time but a
//! row becomes visible at commit time, so a reader paging by `seq` alone can
//! move past a lower `seq` whose transaction commits later, and never return to
//! it. Serving only rows whose writing transaction id is below the horizon —
//! the oldest transaction of the reading snapshot that may belong to this
//! database (`txmgr_feed_horizon()`, migration `20261206000002`, which
//! writes the race analysis down) — means every transaction that could still
//! add a row sorts after everything served, so a cursor never has to go back.
//!
//! A long-running write transaction in *this* database holds the feed back:
//! rows committed after it began are not served until it ends (delayed, never
//! wrong). One in another database on the same server does not (until
//! migration `20261206000002` the horizon was the snapshot's server-wide
//! `xmin`, and it did).

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

pub use super::feed_cursor::{FeedCursor, InvalidFeedCursor};
use super::{feed_cursor::digits, StoreError, StoreResult};
use crate::domain::{ChainId, FeedEvent, SubmitterKey};

/// The `LISTEN`/`NOTIFY` channel woken at the commit of every completion; the
/// payload is the chain id in decimal.
pub const COMPLETION_CHANNEL: &str = "txmgr_completion";

/// Records the completion of `tx_id` from its `managed_tx` row as it stands in
/// this transaction (state, submitter, request id), and queues a notification
/// on [`COMPLETION_CHANNEL`]. Call it inside the transaction that makes the
/// transition: the row and the notification both take effect at its commit,
/// or neither does.
///
/// A completion row is what a client is told, so the transaction that writes
/// it always commits durably: this turns `synchronous_commit` back on for
/// the transaction, whatever it relaxed before (a REJECTED a client read
/// must not be undone by a server crash).
///
/// Fails with [`StoreError::Corrupt`] when there is no such intent: a
/// transition without its completion row must not commit.
pub async fn record(conn: &mut PgConnection, tx_id: Uuid) -> StoreResult<()> {
    let row = sqlx::query!(
        r#"INSERT INTO tx_completion (tx_id, chain_id, submitter, request_id, state,
                                    tx_hash, block_number, nonce, reason)
         SELECT tx_id, chain_id, submitter, request_id, state,
                COALESCE(mined_tx_hash, tx_hash), receipt_block_number, nonce,
                CASE WHEN state = 'CONFIRMED' THEN NULL ELSE last_error END
           FROM managed_tx WHERE tx_id = $1
         RETURNING chain_id AS "chain_id: ChainId", state"#,
        tx_id,
    )
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else {
        return Err(StoreError::Corrupt(format!(
            "completion of unknown transaction {tx_id}"
        )));
    };
    // Counted when written, in the writer's transaction (one that rolls
    // back afterwards is counted too: rare, and the next try counts again).
    metrics::counter!(crate::metrics::COMPLETIONS, "chain" => crate::metrics::chain_label(row.chain_id), "state" => row.state)
        .increment(1);
    notify_durably(conn, row.chain_id).await
}

/// A submitter's balance crossing its threshold, as [`record_funds`] writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FundsEvent {
    /// The submitter whose balance crossed.
    pub submitter: SubmitterKey,
    /// [`FeedEvent::LowBalance`] or [`FeedEvent::BalanceRestored`].
    pub event: FeedEvent,
    /// The balance read, in wei (decimal).
    pub balance_wei: String,
    /// The threshold, in wei (decimal).
    pub min_balance_wei: String,
}

/// Records a funds event in the feed, with the same commit rules as
/// [`record`]: call it inside the fenced transaction that flips the
/// submitter's funds state, so a crossing is reported exactly once.
pub async fn record_funds(conn: &mut PgConnection, event: &FundsEvent) -> StoreResult<()> {
    if !event.event.is_funds() {
        return Err(StoreError::Corrupt(format!(
            "{} is not a funds event",
            event.event
        )));
    }
    sqlx::query!(
        "INSERT INTO tx_completion (chain_id, submitter, state, balance_wei, min_balance_wei)
         VALUES ($1, $2, $3, $4::text::numeric, $5::text::numeric)",
        event.submitter.chain_id as _,
        event.submitter.address_hex(),
        event.event.as_str(),
        &event.balance_wei,
        &event.min_balance_wei,
    )
    .execute(&mut *conn)
    .await?;
    notify_durably(conn, event.submitter.chain_id).await
}

/// Queues the feed's wake-up and makes this transaction's commit durable.
pub(crate) async fn notify_durably(conn: &mut PgConnection, chain_id: ChainId) -> StoreResult<()> {
    sqlx::query!(
        "SELECT FROM pg_notify($1, $2), set_config('synchronous_commit', 'on', true)",
        COMPLETION_CHANNEL,
        chain_id.to_string(),
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// One completion as the feed serves it (the API's row).
pub use txmgr_api::CompletionRow;

/// A `tx_completion` row as [`read`] selects it (each feed query names the
/// same columns; the `query_as!` macros take only literals, so they are
/// spelled out in each).
struct FeedRow {
    chain_id: ChainId,
    xid: String,
    seq: i64,
    tx_id: Option<Uuid>,
    submitter: String,
    request_id: Option<String>,
    state: String,
    tx_hash: Option<String>,
    block_number: Option<i64>,
    nonce: Option<i64>,
    reason: Option<String>,
    balance_wei: Option<String>,
    min_balance_wei: Option<String>,
    completed_at: DateTime<Utc>,
}

impl FeedRow {
    fn into_row(self) -> StoreResult<(FeedCursor, CompletionRow)> {
        let xid = digits(&self.xid).ok_or_else(|| {
            StoreError::Corrupt(format!("completion {}: xid {:?}", self.seq, self.xid))
        })?;
        let state = self
            .state
            .parse::<FeedEvent>()
            .map_err(|e| StoreError::Corrupt(format!("completion {}: {e}", self.seq)))?;
        let cursor = FeedCursor::new(xid, self.seq);
        let row = CompletionRow {
            cursor: cursor.to_token(),
            chain_id: self.chain_id.get(),
            tx_id: self.tx_id,
            submitter: self.submitter,
            request_id: self.request_id,
            state,
            tx_hash: self.tx_hash,
            block_number: self.block_number,
            nonce: self.nonce,
            reason: self.reason,
            balance_wei: self.balance_wei,
            min_balance_wei: self.min_balance_wei,
            completed_at: self.completed_at,
        };
        Ok((cursor, row))
    }
}

/// Up to `limit` completions after `after` (from the beginning when `None`),
/// of every chain, in `(xid, seq)` order, and the cursor to pass next time:
/// the last row's, or `after` itself when nothing is ready yet.
///
/// Every chain's rows, whatever the reading node serves: the cursor is one
/// for the whole feed, so a reader that skipped another chain's rows would
/// move past them for good (a webhook held by a node serving fewer chains,
/// a client behind a load balancer, a reload that adds or removes a chain).
/// Serving a row needs no chain RPC; callers filter by the request's chains
/// and the caller's scope, and still move the cursor past what they hide.
///
/// Only rows whose writing transaction is below the feed's horizon are
/// served — see the module documentation for why, and for the caveat that a
/// long-running write transaction in this database holds the feed back.
/// The horizon and the rows come from one statement, hence one snapshot.
pub async fn read(
    pool: &PgPool,
    after: Option<FeedCursor>,
    limit: u32,
) -> StoreResult<(Vec<CompletionRow>, Option<FeedCursor>)> {
    // xid 0 is never assigned, so (0, 0) sorts before every row; one
    // comparison keeps the (xid, seq) index usable from the first page on.
    let from = after.unwrap_or(FeedCursor::new(0, 0));
    let rows = sqlx::query_as!(
        FeedRow,
        r#"SELECT chain_id AS "chain_id: ChainId", xid::text AS "xid!", seq, tx_id, submitter, request_id, state,
                tx_hash, block_number, nonce, reason, balance_wei::text AS "balance_wei?",
                min_balance_wei::text AS "min_balance_wei?", completed_at
             FROM tx_completion
            WHERE xid < (SELECT txmgr_feed_horizon())
              AND (xid, seq) > ($1::text::xid8, $2::bigint)
            ORDER BY xid, seq
            LIMIT $3"#,
        from.xid().to_string(),
        from.seq(),
        i64::from(limit.max(1)),
    )
    .fetch_all(pool)
    .await?;
    let mut next = after;
    let mut items = Vec::with_capacity(rows.len());
    for row in rows {
        let (cursor, row) = row.into_row()?;
        next = Some(cursor);
        items.push(row);
    }
    Ok((items, next))
}

/// The feed's current end: the cursor of the last row every reader can
/// see now (below the horizon), `None` for an empty feed. A reader that
/// starts after it misses nothing committed later — rows of transactions
/// still running are above the horizon, so after this cursor — and repeats
/// nothing committed before.
pub async fn end(pool: &PgPool) -> StoreResult<Option<FeedCursor>> {
    let row = sqlx::query!(
        r#"SELECT xid::text AS "xid!", seq FROM tx_completion
            WHERE xid < (SELECT txmgr_feed_horizon())
            ORDER BY xid DESC, seq DESC LIMIT 1"#
    )
    .fetch_optional(pool)
    .await?;
    row.map(|row| {
        digits(&row.xid)
            .map(|xid| FeedCursor::new(xid, row.seq))
            .ok_or_else(|| {
                StoreError::Corrupt(format!("completion {}: xid {:?}", row.seq, row.xid))
            })
    })
    .transpose()
}

/// One submitter's feed rows from `from` (inclusive) to `to` (inclusive),
/// in feed order, at most `limit`: a webhook holder reads again the events
/// of a submitter it parked (more were waiting than it keeps in memory).
/// Rows up to `to` were served before, so all of them are visible. Every
/// chain's, as [`read`] serves them.
pub async fn read_submitter(
    pool: &PgPool,
    submitter: &str,
    from: FeedCursor,
    to: FeedCursor,
    limit: u32,
) -> StoreResult<Vec<(FeedCursor, CompletionRow)>> {
    let rows = sqlx::query_as!(
        FeedRow,
        r#"SELECT chain_id AS "chain_id: ChainId", xid::text AS "xid!", seq, tx_id, submitter, request_id, state,
                tx_hash, block_number, nonce, reason, balance_wei::text AS "balance_wei?",
                min_balance_wei::text AS "min_balance_wei?", completed_at
             FROM tx_completion
            -- Every chain in the feed, found by a loose scan of the
            -- submitter index (a few probes), so the index serves the rest.
            WHERE chain_id = ANY(ARRAY(
                    WITH RECURSIVE chains(c) AS (
                        SELECT min(chain_id) FROM tx_completion
                        UNION ALL
                        SELECT (SELECT min(chain_id) FROM tx_completion WHERE chain_id > chains.c)
                          FROM chains WHERE chains.c IS NOT NULL)
                    SELECT c FROM chains WHERE c IS NOT NULL))
              AND submitter = $1
              AND (xid, seq) >= ($2::text::xid8, $3::bigint)
              AND (xid, seq) <= ($4::text::xid8, $5::bigint)
            ORDER BY xid, seq LIMIT $6"#,
        submitter,
        from.xid().to_string(),
        from.seq(),
        to.xid().to_string(),
        to.seq(),
        i64::from(limit.max(1)),
    )
    .fetch_all(pool)
    .await?;
    rows.into_iter().map(FeedRow::into_row).collect()
}

/// The feed rows with these `seq`s (dead letters being redelivered), in feed
/// order, with their cursors, whatever their chain (as [`read`]).
pub async fn read_seqs(
    pool: &PgPool,
    seqs: &[i64],
) -> StoreResult<Vec<(FeedCursor, CompletionRow)>> {
    let rows = sqlx::query_as!(
        FeedRow,
        r#"SELECT chain_id AS "chain_id: ChainId", xid::text AS "xid!", seq, tx_id, submitter, request_id, state,
                tx_hash, block_number, nonce, reason, balance_wei::text AS "balance_wei?",
                min_balance_wei::text AS "min_balance_wei?", completed_at
             FROM tx_completion
            WHERE seq = ANY($1) ORDER BY xid, seq"#,
        seqs,
    )
    .fetch_all(pool)
    .await?;
    rows.into_iter().map(FeedRow::into_row).collect()
}

/// CONFIRMED completions of `chain_ids` per submitter written after `since`
/// (by default the last 10 s) up to the database's now, which is returned
/// too: the ops page's charts (a row whose transaction commits after the
/// next read started may be missed by both reads; the charts are a view,
/// the feed is the record).
pub async fn confirmed_between(
    pool: &PgPool,
    chain_ids: &[ChainId],
    since: Option<chrono::DateTime<chrono::Utc>>,
) -> StoreResult<(
    chrono::DateTime<chrono::Utc>,
    std::collections::HashMap<String, u64>,
)> {
    let rows = sqlx::query!(
        r#"WITH t AS (SELECT now() AS now)
           SELECT t.now AS "now!", c.submitter AS "submitter?", count(c.seq) AS "confirmed!"
             FROM t LEFT JOIN tx_completion c
               ON c.completed_at > COALESCE($2, t.now - interval '10 seconds')
              AND c.completed_at <= t.now
              AND c.chain_id = ANY($1) AND c.state = 'CONFIRMED'
            GROUP BY t.now, c.submitter"#,
        chain_ids as _,
        since,
    )
    .fetch_all(pool)
    .await?;
    let now = rows.first().map_or_else(chrono::Utc::now, |r| r.now);
    let confirmed = rows
        .into_iter()
        .filter_map(|r| Some((r.submitter?, u64::try_from(r.confirmed).unwrap_or(0))))
        .collect();
    Ok((now, confirmed))
}
