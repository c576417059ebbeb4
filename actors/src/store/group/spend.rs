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

/// The spend limit an allocation keeps, with the values of its intents.
#[derive(Debug, Clone)]
pub struct SpendBudget {
    /// Wei of `value` per window.
    pub limit: u128,
    /// The rolling window.
    pub window: Duration,
    /// How long an intent may wait for room before it is REJECTED.
    pub wait: Duration,
    /// The `value` of each intent of the part.
    pub values: HashMap<Uuid, U256>,
}

/// The longest prefix of `queued` (acceptance order) whose values fit the
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
    let spent: String = sqlx::query_scalar!(
        r#"SELECT COALESCE(sum(value), 0)::text AS "spent!" FROM spend_ledger
            WHERE chain_id = $1 AND submitter = $2
              AND at > now() - $3::bigint * interval '1 millisecond'"#,
        submitter.chain_id as _,
        submitter.address_hex(),
        millis(budget.window),
    )
    .fetch_one(&mut *conn)
    .await?;
    let spent: U256 = spent
        .parse()
        .map_err(|e| StoreError::Corrupt(format!("spend ledger sum {spent:?}: {e}")))?;
    let limit = U256::from(budget.limit);
    let mut total = spent;
    let mut admitted = Vec::new();
    let mut never = Vec::new();
    let mut waiting = Vec::new();
    for tx_id in queued {
        let value = budget.values.get(tx_id).copied().unwrap_or_default();
        if value > limit {
            never.push(*tx_id);
            continue;
        }
        // First in, first out: once one waits, the later ones wait too.
        if waiting.is_empty() && total.saturating_add(value) <= limit {
            total = total.saturating_add(value);
            admitted.push(*tx_id);
        } else {
            waiting.push(*tx_id);
        }
    }
    if !never.is_empty() {
        let reason = format!(
            "spend_limit: its value is above the submitter's limit of {limit} wei per {}",
            humantime::format_duration(budget.window)
        );
        reject(conn, submitter, token, &never, &reason, None).await?;
    }
    if !waiting.is_empty() {
        let reason = format!(
            "spend_limit: no room for its value in {} of waiting (limit {limit} wei per {})",
            humantime::format_duration(budget.wait),
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

/// The ledger rows of the intents that got a nonce under the limit.
pub(super) async fn record(
    conn: &mut PgConnection,
    submitter: SubmitterKey,
    budget: &SpendBudget,
    assigned: &[Uuid],
) -> StoreResult<()> {
    if assigned.is_empty() {
        return Ok(());
    }
    let values: Vec<String> = assigned
        .iter()
        .map(|id| {
            budget
                .values
                .get(id)
                .copied()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    sqlx::query!(
        "INSERT INTO spend_ledger (tx_id, chain_id, submitter, value)
         SELECT t, $2, $3, v::numeric FROM UNNEST($1::uuid[], $4::text[]) AS a(t, v)
         ON CONFLICT (tx_id) DO NOTHING",
        assigned,
        submitter.chain_id as _,
        submitter.address_hex(),
        &values,
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}
