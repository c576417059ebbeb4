//! The spend limit of an allocation (README "Guardrails"): which of a
//! part's intents fit the submitter's rolling window, read and written in
//! the allocation's transaction while it holds the submitter's nonce
//! cursor lock (so allocations of one (chain, submitter) are serialised
//! across every node, and the window's total never exceeds the limit).

use std::{collections::HashMap, time::Duration};

use alloy::primitives::U256;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::{
    domain::{SubState, SubmitterKey},
    store::{millis, StoreError, StoreResult},
};

/// The spend limit an allocation keeps, with what its intents would spend.
#[derive(Debug, Clone)]
pub struct SpendBudget {
    /// Wei of `value` per window, if limited.
    pub value_limit: Option<u128>,
    /// Wei of fees per window, if limited.
    pub fees_limit: Option<u128>,
    /// The rolling window.
    pub window: Duration,
    /// How long an intent may wait for room before it is REJECTED.
    pub wait: Duration,
    /// Per intent of the part: its `value` and its worst-case fees
    /// (`gas_limit × max_fee_per_gas` of the attempt it will be signed as).
    pub costs: HashMap<Uuid, SpendCost>,
}

/// What one intent draws from the window when it gets a nonce.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpendCost {
    /// Its `value`, wei.
    pub value: U256,
    /// Its worst-case fees, wei: raised by each later attempt and trued up
    /// at its receipt.
    pub fees: U256,
}

/// The window's totals: value drawn, and fees paid or reserved.
struct Spent {
    value: U256,
    fees: U256,
}

/// Why an intent does not fit, as the reason it is REJECTED with.
fn too_large(budget: &SpendBudget, cost: SpendCost) -> Option<String> {
    let window = humantime::format_duration(budget.window);
    if let Some(limit) = budget.value_limit.map(U256::from) {
        if cost.value > limit {
            return Some(format!(
                "spend_limit: its value is above the submitter's limit of {limit} wei per {window}"
            ));
        }
    }
    if let Some(limit) = budget.fees_limit.map(U256::from) {
        if cost.fees > limit {
            return Some(format!(
                "spend_limit: its worst-case fees ({} wei) are above the submitter's fee limit of {limit} wei per {window}",
                cost.fees
            ));
        }
    }
    None
}

/// `spent + cost` within both limits.
fn fits(budget: &SpendBudget, spent: &Spent, cost: SpendCost) -> bool {
    let within = |limit: Option<u128>, total: U256, more: U256| {
        limit.is_none_or(|limit| total.saturating_add(more) <= U256::from(limit))
    };
    within(budget.value_limit, spent.value, cost.value)
        && within(budget.fees_limit, spent.fees, cost.fees)
}

/// The longest prefix of `queued` (acceptance order) whose costs fit the
/// room left in the window; the others stay QUEUED `spend_limited`, or are
/// REJECTED when they waited `wait` already or could never fit. Returns
/// the intents to draw nonces for.
pub(super) async fn admit(
    conn: &mut PgConnection,
    submitter: SubmitterKey,
    token: i64,
    budget: &SpendBudget,
    queued: &[Uuid],
) -> StoreResult<Vec<Uuid>> {
    let row = sqlx::query!(
        r#"SELECT COALESCE(sum(value), 0)::text AS "value!",
                  COALESCE(sum(COALESCE(fees_paid, fees_reserved)), 0)::text AS "fees!"
             FROM spend_ledger
            WHERE chain_id = $1 AND submitter = $2
              AND at > now() - $3::bigint * interval '1 millisecond'"#,
        submitter.chain_id as _,
        submitter.address_hex(),
        millis(budget.window),
    )
    .fetch_one(&mut *conn)
    .await?;
    let parse = |sum: &str| {
        sum.parse::<U256>()
            .map_err(|e| StoreError::Corrupt(format!("spend ledger sum {sum:?}: {e}")))
    };
    let mut spent = Spent {
        value: parse(&row.value)?,
        fees: parse(&row.fees)?,
    };
    let mut admitted = Vec::new();
    let mut never: Vec<(Uuid, String)> = Vec::new();
    let mut waiting = Vec::new();
    for tx_id in queued {
        let cost = budget.costs.get(tx_id).copied().unwrap_or_default();
        if let Some(reason) = too_large(budget, cost) {
            never.push((*tx_id, reason));
            continue;
        }
        // First in, first out: once one waits, the later ones wait too.
        if waiting.is_empty() && fits(budget, &spent, cost) {
            spent.value = spent.value.saturating_add(cost.value);
            spent.fees = spent.fees.saturating_add(cost.fees);
            admitted.push(*tx_id);
        } else {
            waiting.push(*tx_id);
        }
    }
    for (tx_id, reason) in &never {
        reject(conn, submitter, token, &[*tx_id], reason, None).await?;
    }
    if !waiting.is_empty() {
        let limits = [
            budget.value_limit.map(|l| format!("{l} wei of value")),
            budget.fees_limit.map(|l| format!("{l} wei of fees")),
        ];
        let reason = format!(
            "spend_limit: no room in {} of waiting (limit {} per {})",
            humantime::format_duration(budget.wait),
            limits
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(" and "),
            humantime::format_duration(budget.window)
        );
        reject(conn, submitter, token, &waiting, &reason, Some(budget.wait)).await?;
        sqlx::query!(
            "UPDATE managed_tx SET sub_state = $2, updated_at = now()
              WHERE tx_id = ANY($1) AND state = 'QUEUED' AND sub_state IS DISTINCT FROM $2",
            &waiting,
            SubState::SpendLimited as _,
        )
        .execute(&mut *conn)
        .await?;
    }
    Ok(admitted)
}

/// REJECTED `spend_limited` (those QUEUED longer than `waited`, or all).
async fn reject(
    conn: &mut PgConnection,
    submitter: SubmitterKey,
    token: i64,
    tx_ids: &[Uuid],
    reason: &str,
    waited: Option<Duration>,
) -> StoreResult<()> {
    let rejected = sqlx::query_scalar!(
        "UPDATE managed_tx SET state = 'REJECTED', sub_state = $2, last_error = $3,
                fencing_token = $4, updated_at = now()
          WHERE tx_id = ANY($1) AND state = 'QUEUED' AND chain_id = $5 AND submitter = $6
            AND ($7::bigint IS NULL OR created_at < now() - $7 * interval '1 millisecond')
         RETURNING tx_id",
        tx_ids,
        SubState::SpendLimited as _,
        reason,
        token,
        submitter.chain_id as _,
        submitter.address_hex(),
        waited.map(millis),
    )
    .fetch_all(&mut *conn)
    .await?;
    for tx_id in rejected {
        crate::store::completions::record(conn, tx_id).await?;
    }
    Ok(())
}

/// The ledger rows of the intents that got a nonce under the limit: the
/// value and the first attempt's worst-case fees.
pub(super) async fn record(
    conn: &mut PgConnection,
    submitter: SubmitterKey,
    budget: &SpendBudget,
    assigned: &[Uuid],
) -> StoreResult<()> {
    if assigned.is_empty() {
        return Ok(());
    }
    let costs: Vec<SpendCost> = assigned
        .iter()
        .map(|id| budget.costs.get(id).copied().unwrap_or_default())
        .collect();
    let values: Vec<String> = costs.iter().map(|c| c.value.to_string()).collect();
    let fees: Vec<String> = costs.iter().map(|c| c.fees.to_string()).collect();
    sqlx::query!(
        "INSERT INTO spend_ledger (tx_id, chain_id, submitter, value, fees_reserved)
         SELECT t, $2, $3, v::numeric, f::numeric
           FROM UNNEST($1::uuid[], $4::text[], $5::text[]) AS a(t, v, f)
         -- Given a nonce again (requeued after a transaction that is not
         -- ours took its nonce: it never executed): a new send, counted now.
         ON CONFLICT (tx_id) DO UPDATE
            SET at = now(), value = EXCLUDED.value, fees_reserved = EXCLUDED.fees_reserved,
                fees_paid = NULL",
        assigned,
        submitter.chain_id as _,
        submitter.address_hex(),
        &values,
        &fees,
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}
