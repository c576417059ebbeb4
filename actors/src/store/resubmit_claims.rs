//! Resubmission: claiming due intents (fenced, claim before send), STUCK,
//! fee-bumped attempts, and the resubmit timers' schedule (README
//! "Resubmission, fee bumps, STUCK and cancel").

use std::time::Duration;

use alloy::primitives::{Bytes, B256};
use sqlx::PgPool;
use uuid::Uuid;

pub use super::resubmit_schedule::{head_of_line, schedule};
use super::{millis, FencedTx, StoreError, StoreResult};
use crate::domain::{AttemptKind, Intent, SubState, TxState};

/// What an operator asked for on one transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperatorAction {
    /// Replace it with a 0-value self-transfer at its nonce.
    Cancel,
    /// Bump its fees now, within the caps (even with bumping off).
    Speedup,
    /// Re-broadcast its newest attempt now.
    Rebroadcast,
    /// Send again with a fresh nonce: only for an intent whose nonce a
    /// transaction that is not ours consumed (it never executed). Carried
    /// out at once by the node that takes it, never stored as a request.
    Requeue,
}

impl OperatorAction {
    /// The name stored in `managed_tx.requested_action` and used in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            OperatorAction::Cancel => "cancel",
            OperatorAction::Speedup => "speedup",
            OperatorAction::Rebroadcast => "rebroadcast",
            OperatorAction::Requeue => "requeue",
        }
    }

    fn parse(name: &str) -> StoreResult<Self> {
        match name {
            "cancel" => Ok(OperatorAction::Cancel),
            "speedup" => Ok(OperatorAction::Speedup),
            "rebroadcast" => Ok(OperatorAction::Rebroadcast),
            other => Err(StoreError::Corrupt(format!("requested_action {other}"))),
        }
    }
}

/// The fees and shape of an attempt.
#[derive(Debug, Clone)]
pub struct AttemptFees {
    /// EIP-1559 max fee, or `None` for legacy.
    pub max_fee_per_gas: Option<u128>,
    /// EIP-1559 priority fee, or `None` for legacy.
    pub max_priority_fee_per_gas: Option<u128>,
    /// Legacy gas price, or `None` for EIP-1559.
    pub gas_price: Option<u128>,
    /// Gas limit signed.
    pub gas_limit: u64,
}

/// An intent whose resubmission this leader has just claimed.
#[derive(Debug, Clone)]
pub struct ClaimedResubmit {
    /// The intent.
    pub tx_id: Uuid,
    /// Its nonce.
    pub nonce: u64,
    /// Its state when claimed (ALLOCATED: no node has accepted it yet).
    pub state: TxState,
    /// What to send.
    pub intent: Intent,
    /// Resubmits claimed so far, this one included.
    pub resubmits: u32,
    /// Time since a node first accepted an attempt (`None`: never accepted).
    pub since_first_broadcast: Option<Duration>,
    /// Time since the intent got its nonce (`None` for rows older than
    /// that column).
    pub since_allocated: Option<Duration>,
    /// The operator's request, if that is why it is due.
    pub requested: Option<OperatorAction>,
    /// Its scheduled resubmit time had come (else only the request made it
    /// due).
    pub on_schedule: bool,
    /// Who asked (token name), with the request.
    pub requested_by: Option<String>,
    /// The newest attempt's hash (replacements are priced from it).
    pub latest_hash: B256,
    /// The newest attempt's bytes.
    pub latest_raw: Bytes,
    /// What a re-broadcast sends: the newest attempt a node accepted, else
    /// the newest.
    pub resend_hash: B256,
    /// Its bytes.
    pub resend_raw: Bytes,
    /// The newest attempt's kind (a cancel in progress stays a cancel).
    pub latest_kind: AttemptKind,
    /// The newest attempt's fees.
    pub latest_fees: AttemptFees,
}

/// One claimed row as the claim query returns it.
struct ClaimRow {
    tx_id: Uuid,
    nonce: i64,
    state: String,
    intent: serde_json::Value,
    resubmits: i32,
    since_ms: Option<i64>,
    allocated_ms: Option<i64>,
    requested_action: Option<String>,
    requested_by: Option<String>,
    on_schedule: bool,
    tx_hash: String,
    raw_tx: Vec<u8>,
    kind: String,
    max_fee: Option<String>,
    priority_fee: Option<String>,
    gas_price: Option<String>,
    gas_limit: i64,
    resend_hash: String,
    resend_raw: Vec<u8>,
}

fn corrupt(e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

fn amount(value: Option<String>) -> StoreResult<Option<u128>> {
    value.map(|v| v.parse().map_err(corrupt)).transpose()
}

fn kind_of(name: &str) -> StoreResult<AttemptKind> {
    match name {
        "original" => Ok(AttemptKind::Original),
        "rebroadcast" => Ok(AttemptKind::Rebroadcast),
        "bump" => Ok(AttemptKind::Bump),
        "cancel" => Ok(AttemptKind::Cancel),
        other => Err(corrupt(format!("attempt kind {other}"))),
    }
}

/// Claims the submitter's intents that are due for a resubmit — accepted,
/// unmined, `next_resubmit_at` passed — and those an operator asked about,
/// restricted to `only` when given. The claim moves `next_resubmit_at` to
/// `interval` from now, counts the resubmit and takes the operator's
/// request, all in the caller's fenced transaction: a competing claimer
/// (the sweep, a timer, a stale leader) finds nothing to send.
///
/// Every claim counts towards `max_resubmits`, an operator's request too,
/// and restarts the schedule: requests cannot resubmit without bound, and a
/// scheduled bump does not follow an operator's bump at once.
pub async fn claim_due(
    ftx: &mut FencedTx,
    only: Option<&[Uuid]>,
    limit: usize,
    interval: Duration,
) -> StoreResult<Vec<ClaimedResubmit>> {
    let key = ftx.submitter();
    let token = ftx.token();
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let only = only.map(<[Uuid]>::to_vec);
    let rows = sqlx::query_as!(
        ClaimRow,
        r#"WITH due AS (
             SELECT m.tx_id, m.requested_action, m.requested_by,
                    COALESCE(m.next_resubmit_at <= now(), false) AS on_schedule
               FROM managed_tx m
              WHERE m.chain_id = $1 AND m.submitter = $2 AND m.receipt IS NULL
                AND ($6::uuid[] IS NULL OR m.tx_id = ANY($6))
                -- A nonce another key consumed: nothing to resubmit, ever.
                AND m.sub_state IS DISTINCT FROM $7
                AND m.state IN ('ALLOCATED', 'TRACKING', 'STUCK') AND m.phase = 1
                AND (m.next_resubmit_at <= now() OR m.requested_action IS NOT NULL)
                AND EXISTS (SELECT 1 FROM tx_attempt t WHERE t.tx_id = m.tx_id AND t.nonce = m.nonce)
              ORDER BY m.nonce LIMIT $3 FOR UPDATE SKIP LOCKED),
         claimed AS (
             -- Every claim counts towards max_resubmits, an operator's
             -- request too. An ALLOCATED intent (no node accepted it
             -- yet) escalates on the same schedule; the pipeline's short
             -- broadcast retry (retry_at) goes on beside it.
             UPDATE managed_tx m
                SET next_resubmit_at = CASE WHEN m.next_resubmit_at IS NULL THEN NULL
                                            ELSE now() + $4::bigint * interval '1 millisecond' END,
                    resubmits = m.resubmits + 1,
                    -- A claimed cancel marks the intent at once, before its
                    -- attempt is signed, so a cancel asked for meanwhile sees
                    -- it and changes nothing (store::actions).
                    sub_state = CASE WHEN due.requested_action = 'cancel' THEN $8
                                     ELSE m.sub_state END,
                    requested_action = NULL, requested_by = NULL,
                    fencing_token = $5, updated_at = now()
               FROM due WHERE m.tx_id = due.tx_id
             RETURNING m.tx_id, m.nonce, m.state, m.intent, m.resubmits, m.first_broadcast_at,
                       m.allocated_at, m.accepted_hash, due.requested_action, due.requested_by,
                       due.on_schedule)
         SELECT c.tx_id AS "tx_id!", c.nonce AS "nonce!", c.state AS "state!",
                c.intent AS "intent!", c.resubmits AS "resubmits!",
                (EXTRACT(EPOCH FROM (now() - c.first_broadcast_at)) * 1000)::bigint AS "since_ms?",
                (EXTRACT(EPOCH FROM (now() - c.allocated_at)) * 1000)::bigint AS "allocated_ms?",
                c.requested_action AS "requested_action?", c.requested_by AS "requested_by?",
                c.on_schedule AS "on_schedule!",
                a.tx_hash AS "tx_hash!", a.raw_tx AS "raw_tx!", a.kind AS "kind!",
                a.max_fee_per_gas::text AS "max_fee?", a.max_priority_fee_per_gas::text AS "priority_fee?",
                a.gas_price::text AS "gas_price?", a.gas_limit AS "gas_limit!",
                r.tx_hash AS "resend_hash!", r.raw_tx AS "resend_raw!"
           FROM claimed c
           JOIN LATERAL (SELECT * FROM tx_attempt t WHERE t.tx_id = c.tx_id AND t.nonce = c.nonce
                          ORDER BY attempt_no DESC LIMIT 1) a ON true
           -- What a re-broadcast sends: the newest attempt a node accepted
           -- (a refused replacement must not displace it), else the newest.
           -- An attempt without a written answer was accepted when the
           -- intent's `accepted_hash` names it.
           JOIN LATERAL (SELECT tx_hash, raw_tx FROM tx_attempt t WHERE t.tx_id = c.tx_id
                            AND t.nonce = c.nonce
                          ORDER BY (COALESCE(t.broadcast_result,
                                             CASE WHEN t.tx_hash = c.accepted_hash
                                                  THEN 'accepted' END)
                                    IN ('accepted', 'already_known')) IS TRUE DESC,
                                   attempt_no DESC LIMIT 1) r ON true
          ORDER BY c.nonce"#,
        key.chain_id as _,
        key.address_hex(),
        limit,
        millis(interval),
        token,
        only.as_deref(),
        SubState::NonceConsumedExternally as _,
        SubState::Cancelling as _,
    )
    .fetch_all(ftx.conn())
    .await?;
    rows.into_iter().map(claimed_from_row).collect()
}

fn claimed_from_row(row: ClaimRow) -> StoreResult<ClaimedResubmit> {
    Ok(ClaimedResubmit {
        tx_id: row.tx_id,
        nonce: u64::try_from(row.nonce).map_err(corrupt)?,
        state: row.state.parse().map_err(corrupt)?,
        intent: serde_json::from_value(row.intent).map_err(corrupt)?,
        resubmits: u32::try_from(row.resubmits).map_err(corrupt)?,
        since_first_broadcast: row
            .since_ms
            .map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0))),
        since_allocated: row
            .allocated_ms
            .map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0))),
        requested: row
            .requested_action
            .as_deref()
            .map(OperatorAction::parse)
            .transpose()?,
        requested_by: row.requested_by,
        on_schedule: row.on_schedule,
        latest_hash: row.tx_hash.parse().map_err(corrupt)?,
        latest_raw: row.raw_tx.into(),
        resend_hash: row.resend_hash.parse().map_err(corrupt)?,
        resend_raw: row.resend_raw.into(),
        latest_kind: kind_of(&row.kind)?,
        latest_fees: AttemptFees {
            max_fee_per_gas: amount(row.max_fee)?,
            max_priority_fee_per_gas: amount(row.priority_fee)?,
            gas_price: amount(row.gas_price)?,
            gas_limit: u64::try_from(row.gas_limit).map_err(corrupt)?,
        },
    })
}

/// Resubmitted bytes accepted (or already known): counts the broadcast and
/// keeps the state (a STUCK intent stays STUCK until it is mined).
pub async fn record_resubmitted(
    ftx: &mut FencedTx,
    accepted: &[(Uuid, B256, String)],
) -> StoreResult<()> {
    let token = ftx.token();
    let ids: Vec<Uuid> = accepted.iter().map(|a| a.0).collect();
    sqlx::query!(
        "UPDATE managed_tx m SET state = CASE WHEN m.state = 'ALLOCATED' THEN 'TRACKING' ELSE m.state END,
                submit_attempts = submit_attempts + 1, last_submit_at = now(),
                first_broadcast_at = COALESCE(m.first_broadcast_at, now()),
                fencing_token = $2, updated_at = now()
           FROM UNNEST($1::uuid[]) AS a(tx_id)
          WHERE m.tx_id = a.tx_id AND m.state IN ('ALLOCATED', 'TRACKING', 'STUCK')",
        &ids,
        token,
    )
    .execute(ftx.conn())
    .await?;
    super::pipeline::record_attempt_results(
        ftx,
        accepted.iter().map(|(id, h, r)| (*id, *h, r.clone())),
    )
    .await
}

/// Some send of the intent had an unknown answer: its bytes may be in a
/// pool, so a later refusal must not release its nonce. Durable even in a
/// relaxed transaction.
pub async fn mark_maybe_pooled(ftx: &mut FencedTx, tx_id: Uuid) -> StoreResult<()> {
    // Must survive a crash even in a relaxed transaction.
    ftx.require_durability().await?;
    let token = ftx.token();
    sqlx::query!(
        "UPDATE managed_tx SET maybe_pooled = true, fencing_token = $2, updated_at = now()
          WHERE tx_id = $1 AND state = 'ALLOCATED' AND NOT maybe_pooled",
        tx_id,
        token,
    )
    .execute(ftx.conn())
    .await?;
    Ok(())
}

/// Asks for a cancel of every sent, unmined intent of the fenced submitter
/// whose `valid_until` has passed (database clock) and that has no cancel
/// attempt yet, as an operator's cancel would (README "Guardrails"): the
/// same claim then signs and sends the cancel. Returns the intents asked.
pub async fn request_deadline_cancels(ftx: &mut FencedTx) -> StoreResult<Vec<Uuid>> {
    let key = ftx.submitter();
    let ids = sqlx::query_scalar!(
        "UPDATE managed_tx m SET requested_action = 'cancel', requested_by = 'valid_until',
                last_error = 'expired: valid_until ' || (m.intent->>'valid_until') || ' passed before it was mined; cancelling',
                updated_at = now()
          WHERE m.chain_id = $1 AND m.submitter = $2 AND m.receipt IS NULL
            AND m.state IN ('ALLOCATED', 'TRACKING', 'STUCK') AND m.phase = 1
            AND m.requested_action IS NULL
            AND m.sub_state IS DISTINCT FROM $3
            AND m.intent ? 'valid_until' AND (m.intent->>'valid_until')::timestamptz <= now()
            AND EXISTS (SELECT 1 FROM tx_attempt t WHERE t.tx_id = m.tx_id AND t.nonce = m.nonce)
            AND NOT EXISTS (SELECT 1 FROM tx_attempt t WHERE t.tx_id = m.tx_id AND t.kind = 'cancel')
         RETURNING m.tx_id",
        key.chain_id as _,
        key.address_hex(),
        SubState::NonceConsumedExternally as _,
    )
    .fetch_all(ftx.conn())
    .await?;
    Ok(ids)
}

/// Sets the intent's `sub_state` (and `last_error` when given) while it is
/// still open.
pub async fn set_sub_state(
    ftx: &mut FencedTx,
    tx_id: Uuid,
    sub_state: SubState,
    last_error: Option<&str>,
) -> StoreResult<()> {
    let token = ftx.token();
    sqlx::query!(
        "UPDATE managed_tx SET sub_state = $2, last_error = COALESCE($3, last_error),
                fencing_token = $4, updated_at = now()
          WHERE tx_id = $1 AND state IN ('ALLOCATED', 'TRACKING', 'STUCK') AND receipt IS NULL",
        tx_id,
        sub_state as _,
        last_error,
        token,
    )
    .execute(ftx.conn())
    .await?;
    Ok(())
}

/// Puts back an operator's request the leader claimed but could not carry
/// out (RPC or signer failure, lease lapse), so the next pass acts on it.
/// Not a fenced write: like the request itself, it only asks the leader.
pub async fn restore_request(
    pool: &PgPool,
    tx_id: Uuid,
    action: OperatorAction,
    by: Option<&str>,
) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE managed_tx SET requested_action = COALESCE(requested_action, $2),
                requested_by = COALESCE(requested_by, $3), updated_at = now()
          WHERE tx_id = $1 AND state IN ('ALLOCATED', 'TRACKING', 'STUCK') AND receipt IS NULL",
        tx_id,
        action.as_str(),
        by,
    )
    .execute(pool)
    .await?;
    Ok(())
}
