//! Funds monitoring (README "Funds"): each submitter's low/ok state, its
//! crossings, and the top-ups sent for it. Written only by the submitter's
//! leader inside a [`FencedTx`], so a crossing is reported — and topped up —
//! once, however many nodes run.

use uuid::Uuid;

use super::{
    audit::{self, AuditEntry, AuditOutcome},
    completions::{self, FundsEvent},
    intents::WORK_CHANNEL,
    FencedTx, StoreError, StoreResult,
};
use crate::domain::{FeedEvent, NewIntent};

/// The stored funds state of a submitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FundsState {
    /// Below `min_balance` at the last crossing.
    pub low: bool,
    /// Downward crossings so far.
    pub crossings: i64,
}

/// The submitter's funds state, locked for this transaction; `None` before
/// its first check.
pub async fn lock_state(ftx: &mut FencedTx) -> StoreResult<Option<FundsState>> {
    let key = ftx.submitter();
    let row = sqlx::query_as!(
        FundsState,
        "SELECT low, crossings FROM submitter_funds
          WHERE chain_id = $1 AND submitter = $2 FOR UPDATE",
        key.chain_id as _,
        key.address_hex(),
    )
    .fetch_optional(ftx.conn())
    .await?;
    Ok(row)
}

/// Stores a new state, and the feed row of the crossing when `event` is set.
pub async fn save(
    ftx: &mut FencedTx,
    state: FundsState,
    balance: u128,
    min_balance: u128,
    event: Option<FeedEvent>,
) -> StoreResult<()> {
    let key = ftx.submitter();
    let token = ftx.token();
    sqlx::query!(
        "INSERT INTO submitter_funds
                (chain_id, submitter, low, balance_wei, min_balance_wei, crossings, fencing_token)
         VALUES ($1, $2, $3, $4::text::numeric, $5::text::numeric, $6, $7)
         ON CONFLICT (chain_id, submitter) DO UPDATE
            SET low = EXCLUDED.low, balance_wei = EXCLUDED.balance_wei,
                min_balance_wei = EXCLUDED.min_balance_wei, crossings = EXCLUDED.crossings,
                fencing_token = EXCLUDED.fencing_token, checked_at = now()",
        key.chain_id as _,
        key.address_hex(),
        state.low,
        balance.to_string(),
        min_balance.to_string(),
        state.crossings,
        token,
    )
    .execute(ftx.conn())
    .await?;
    if let Some(event) = event {
        completions::record_funds(
            ftx.conn(),
            &FundsEvent {
                submitter: key,
                event,
                balance_wei: balance.to_string(),
                min_balance_wei: min_balance.to_string(),
            },
        )
        .await?;
    }
    Ok(())
}

/// Wei sent (or on its way) to the submitter by top-ups in the last 24
/// hours. Top-ups that ended without moving value for good (FAILED_FINAL,
/// CANCELLED) do not count; a REJECTED one does: its signed bytes may
/// still be mined after a retry was sent, and the cap must hold then too.
pub async fn topped_up_last_day(ftx: &mut FencedTx) -> StoreResult<u128> {
    let key = ftx.submitter();
    let sum = sqlx::query_scalar!(
        r#"SELECT COALESCE(sum(t.value_wei), 0)::text AS "sum!"
           FROM funds_top_up t JOIN managed_tx m ON m.tx_id = t.tx_id
          WHERE t.chain_id = $1 AND t.submitter = $2 AND t.created_at > now() - interval '1 day'
            AND m.state NOT IN ('FAILED_FINAL', 'CANCELLED')"#,
        key.chain_id as _,
        key.address_hex(),
    )
    .fetch_one(ftx.conn())
    .await?;
    sum.parse()
        .map_err(|_| StoreError::Corrupt(format!("top-up sum {sum:?}")))
}

/// Wei `funder` sent (or has on its way) in top-ups to any submitter in the
/// last 24 hours, counted as [`topped_up_last_day`] does. Takes a
/// transaction-scoped lock on the funder first, so the leaders of two
/// targets (on any nodes) check and queue against its funder-wide cap one
/// after the other.
pub async fn funded_last_day(ftx: &mut FencedTx, funder: &str) -> StoreResult<u128> {
    let chain_id = ftx.submitter().chain_id;
    sqlx::query!(
        "SELECT FROM pg_advisory_xact_lock(hashtextextended('txmgr-funder:' || $1::text || ':' || $2::text, 0))",
        chain_id.to_string(),
        funder,
    )
    .execute(ftx.conn())
    .await?;
    let sum = sqlx::query_scalar!(
        r#"SELECT COALESCE(sum(t.value_wei), 0)::text AS "sum!"
           FROM funds_top_up t JOIN managed_tx m ON m.tx_id = t.tx_id
          WHERE t.chain_id = $1 AND t.funder = $2 AND t.created_at > now() - interval '1 day'
            AND m.state NOT IN ('FAILED_FINAL', 'CANCELLED')"#,
        chain_id as _,
        funder,
    )
    .fetch_one(ftx.conn())
    .await?;
    sum.parse()
        .map_err(|_| StoreError::Corrupt(format!("funder sum {sum:?}")))
}

/// The top-ups of one crossing so far.
#[derive(Debug, Clone, PartialEq)]
pub struct CrossingTopUps {
    /// How many were queued.
    pub sent: i64,
    /// The latest one's state (None when there is none).
    pub latest_state: Option<String>,
    /// Seconds since the latest one last changed (database clock).
    pub latest_age_secs: f64,
}

/// The top-ups queued for the submitter's crossing `crossing` so far, and
/// the state and age of the latest one.
pub async fn crossing_top_ups(
    ftx: &mut FencedTx,
    crossing_prefix: &str,
) -> StoreResult<CrossingTopUps> {
    let key = ftx.submitter();
    let row = sqlx::query!(
        r#"SELECT count(*) AS "sent!", latest.state AS "latest_state?", latest.age AS "latest_age?"
           FROM funds_top_up t
           LEFT JOIN LATERAL (
                SELECT m.state, EXTRACT(EPOCH FROM now() - m.updated_at)::float8 AS age
                  FROM funds_top_up t2 JOIN managed_tx m ON m.tx_id = t2.tx_id
                 WHERE t2.chain_id = $1 AND t2.submitter = $2
                   AND (t2.request_id = $3 OR t2.request_id LIKE $3 || ':%')
                 ORDER BY t2.created_at DESC LIMIT 1) latest ON true
          WHERE t.chain_id = $1 AND t.submitter = $2
            AND (t.request_id = $3 OR t.request_id LIKE $3 || ':%')
          GROUP BY latest.state, latest.age"#,
        key.chain_id as _,
        key.address_hex(),
        crossing_prefix,
    )
    .fetch_optional(ftx.conn())
    .await?
    .map_or((0, None, None), |row| {
        (row.sent, row.latest_state, row.latest_age)
    });
    Ok(CrossingTopUps {
        sent: row.0,
        latest_state: row.1,
        latest_age_secs: row.2.unwrap_or(0.0),
    })
}

/// What became of a top-up's request id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopUpQueued {
    /// A new intent of the funder, with this id.
    Queued(Uuid),
    /// This top-up was queued before (its `funds_top_up` row exists): nothing new.
    AlreadyQueued,
    /// An intent that is not this top-up holds the request id (made before
    /// the engine's prefixes were reserved, or by hand in the database):
    /// nothing was written; the caller tries the next id.
    Taken,
}

/// Queues the funder's intent of a top-up (an ordinary QUEUED intent of the
/// funder, under a request id that names the submitter and the crossing),
/// records it for the daily cap and the audit table, and wakes the funder's
/// leader. A request id that exists already is never taken for this
/// top-up's: it is [`TopUpQueued::AlreadyQueued`] only when it was this
/// submitter's top-up.
pub async fn queue_top_up(
    ftx: &mut FencedTx,
    intent: &NewIntent,
    value: u128,
    node_id: &str,
) -> StoreResult<TopUpQueued> {
    let key = ftx.submitter();
    let request_id = intent
        .request_id
        .clone()
        .ok_or_else(|| StoreError::Corrupt("a top-up needs its request id".into()))?;
    let json = serde_json::to_value(&intent.intent)
        .map_err(|e| StoreError::Corrupt(format!("intent does not serialise: {e}")))?;
    let request_hash = intent.intent.request_hash(&intent.submitter);
    let inserted = sqlx::query_scalar!(
        "INSERT INTO managed_tx (tx_id, chain_id, submitter, request_id, request_hash, intent, state)
         VALUES ($1, $2, $3, $4, $5, $6, 'QUEUED')
         ON CONFLICT (chain_id, submitter, request_id) WHERE request_id IS NOT NULL DO NOTHING
         RETURNING tx_id",
        intent.tx_id,
        intent.submitter.chain_id as _,
        intent.submitter.address_hex(),
        &request_id,
        request_hash.as_slice(),
        json,
    )
    .fetch_optional(ftx.conn())
    .await?;
    let Some(tx_id) = inserted else {
        let ours = sqlx::query_scalar!(
            r#"SELECT EXISTS (SELECT 1 FROM funds_top_up
                             WHERE chain_id = $1 AND submitter = $2 AND request_id = $3) AS "ours!""#,
            key.chain_id as _,
            key.address_hex(),
            &request_id,
        )
        .fetch_one(ftx.conn())
        .await?;
        return Ok(if ours {
            TopUpQueued::AlreadyQueued
        } else {
            TopUpQueued::Taken
        });
    };
    sqlx::query!(
        "INSERT INTO funds_top_up (chain_id, submitter, funder, request_id, tx_id, value_wei)
         VALUES ($1, $2, $3, $4, $5, $6::text::numeric)",
        key.chain_id as _,
        key.address_hex(),
        intent.submitter.address_hex(),
        &request_id,
        tx_id,
        value.to_string(),
    )
    .execute(ftx.conn())
    .await?;
    let submitter = key.address_hex();
    let reason = format!(
        "top-up of {value} wei from {} (request {request_id})",
        intent.submitter.address_hex()
    );
    let entry = AuditEntry {
        actor: "txmgr",
        action: "top_up",
        chain_id: Some(key.chain_id),
        submitter: Some(&submitter),
        reason: Some(&reason),
        node_id: Some(node_id),
        tx_id: Some(tx_id),
    };
    audit::insert(ftx.conn(), &entry, AuditOutcome::Done).await?;
    sqlx::query!(
        "SELECT FROM pg_notify($1, $2)",
        WORK_CHANNEL,
        format!(
            "{}:{}",
            intent.submitter.chain_id,
            intent.submitter.address_hex()
        ),
    )
    .execute(ftx.conn())
    .await?;
    Ok(TopUpQueued::Queued(tx_id))
}

/// Records, for the audit table, that a crossing's top-up was not sent
/// because the daily cap was reached.
pub async fn record_capped(ftx: &mut FencedTx, reason: &str, node_id: &str) -> StoreResult<()> {
    let submitter = ftx.submitter().address_hex();
    let entry = AuditEntry {
        actor: "txmgr",
        action: "top_up",
        chain_id: Some(ftx.submitter().chain_id),
        submitter: Some(&submitter),
        reason: Some(reason),
        node_id: Some(node_id),
        tx_id: None,
    };
    audit::insert(ftx.conn(), &entry, AuditOutcome::Failed).await?;
    Ok(())
}

/// Of the intents a funder's leader refused before a nonce (its policy, a
/// failed gas estimate), the top-ups get a `top_up` audit row with outcome
/// `failed` and the reason, under the funded submitter (README "Funds"):
/// the monitor sends another while the balance stays low, backing off.
pub async fn record_refused_top_ups(
    pool: &sqlx::PgPool,
    refused: &[(Uuid, String)],
    node_id: &str,
) -> StoreResult<()> {
    if refused.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = refused.iter().map(|(id, _)| *id).collect();
    let reasons: Vec<String> = refused
        .iter()
        .map(|(_, reason)| format!("top-up refused before it was sent: {reason}"))
        .collect();
    sqlx::query!(
        "INSERT INTO ops_audit (actor, action, submitter, reason, node_id, tx_id, outcome, chain_id)
         SELECT 'txmgr', 'top_up', split_part(m.request_id, ':', 2), r.reason, $3, m.tx_id,
                'failed', m.chain_id
           FROM UNNEST($1::uuid[], $2::text[]) AS r(tx_id, reason)
           JOIN managed_tx m ON m.tx_id = r.tx_id
          WHERE m.request_id LIKE 'txmgr-top-up:%' AND m.state = 'REJECTED'",
        &ids,
        &reasons,
        node_id,
    )
    .execute(pool)
    .await?;
    Ok(())
}
