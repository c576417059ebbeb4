//! The merged ALLOCATED update of a group transaction, which also writes an
//! intent's first signed attempt on its own row when the leader drew and
//! signed before writing (migration `first_attempt_on_intent`): insert,
//! allocation with the bytes, acceptance — three row versions per intent.

use std::collections::HashMap;

use sqlx::PgConnection;
use uuid::Uuid;

use super::{
    allocate::Drawn,
    writes::{AllocatePart, Columns},
};
use crate::{
    domain::AttemptKind,
    store::{millis, pipeline, pipeline::NewAttempt, StoreResult},
};

/// The first attempt's columns of each row of the update (`None` where the
/// row has none: an allocation that signs after it commits).
#[derive(Default)]
struct FirstAttempts {
    hashes: Vec<Option<String>>,
    raws: Vec<Option<Vec<u8>>>,
    max_fees: Vec<Option<String>>,
    priority_fees: Vec<Option<String>>,
    gas_prices: Vec<Option<String>>,
    gas_limits: Vec<Option<i64>>,
}

impl FirstAttempts {
    fn push(&mut self, attempt: Option<&NewAttempt>) {
        let amount = |v: Option<u128>| v.map(|v| v.to_string());
        self.hashes
            .push(attempt.map(|a| format!("{:#x}", a.tx_hash)));
        self.raws.push(attempt.map(|a| a.raw.to_vec()));
        self.max_fees
            .push(attempt.and_then(|a| amount(a.max_fee_per_gas)));
        self.priority_fees
            .push(attempt.and_then(|a| amount(a.max_priority_fee_per_gas)));
        self.gas_prices
            .push(attempt.and_then(|a| amount(a.gas_price)));
        self.gas_limits
            .push(attempt.map(|a| i64::try_from(a.gas_limit).unwrap_or(i64::MAX)));
    }
}

/// The merged ALLOCATED update. A presigned part's original attempts are
/// written on their intents' rows by the same update, unless an intent
/// already has an attempt (it was allocated before and its nonce left: its
/// history is in `tx_attempt_rest`, where the new attempt then goes too).
/// Returns the intents it changed, each with whether its attempt is on the
/// row.
pub(super) async fn assign(
    conn: &mut PgConnection,
    parts: &[AllocatePart<'_>],
    drawn: &[Drawn],
) -> StoreResult<HashMap<Uuid, bool>> {
    let mut rows = Columns::default();
    let mut first = FirstAttempts::default();
    for (i, _, assignments, _) in drawn {
        let part = &parts[*i];
        // A presigned part's attempts are in its assignments' order.
        let attempts = part.presigned.map(|p| p.attempts.as_slice());
        for (k, (tx_id, nonce)) in assignments.iter().enumerate() {
            rows.push(part.fence, *tx_id);
            rows.numbers.push(pipeline::nonce_db(*nonce)?);
            rows.millis.push(millis(part.resubmit_interval));
            let attempt = attempts
                .and_then(|a| a.get(k))
                .filter(|a| a.tx_id == *tx_id && a.kind == AttemptKind::Original);
            first.push(attempt);
        }
    }
    let assigned = sqlx::query!(
        r#"UPDATE managed_tx m SET state = 'ALLOCATED', nonce = a.nonce, sub_state = NULL,
                fencing_token = a.token, updated_at = now(), retry_at = now(), allocated_at = now(),
                maybe_pooled = false, next_resubmit_at = now() + a.resubmit_ms * interval '1 millisecond',
                first_tx_hash = CASE WHEN a.on_row THEN a.tx_hash END,
                first_raw_tx = CASE WHEN a.on_row THEN a.raw_tx END,
                first_max_fee_per_gas = CASE WHEN a.on_row THEN a.max_fee::numeric END,
                first_max_priority_fee_per_gas = CASE WHEN a.on_row THEN a.max_prio::numeric END,
                first_gas_price = CASE WHEN a.on_row THEN a.gas_price::numeric END,
                first_gas_limit = CASE WHEN a.on_row THEN a.gas_limit END,
                first_broadcast_result = NULL,
                first_fencing_token = CASE WHEN a.on_row THEN a.token END
           FROM (SELECT u.*,
                        u.tx_hash IS NOT NULL
                        AND NOT EXISTS (SELECT 1 FROM tx_attempt_rest r WHERE r.tx_id = u.tx_id)
                        AS on_row
                   FROM UNNEST($1::uuid[], $2::bigint[], $3::text[], $4::bigint[], $5::bigint[],
                               $6::bigint[], $7::text[], $8::bytea[], $9::text[], $10::text[],
                               $11::text[], $12::bigint[])
                        AS u(tx_id, chain_id, submitter, token, nonce, resubmit_ms, tx_hash,
                             raw_tx, max_fee, max_prio, gas_price, gas_limit)) a
          WHERE m.tx_id = a.tx_id AND m.chain_id = a.chain_id AND m.submitter = a.submitter
            AND m.state = 'QUEUED'
         RETURNING m.tx_id, a.on_row AS "on_row!""#,
        &rows.tx_ids,
        &rows.chains as _,
        &rows.addresses,
        &rows.tokens,
        &rows.numbers,
        &rows.millis,
        // Nullable elements: the SQL casts give the types.
        &first.hashes as _,
        &first.raws as _,
        &first.max_fees as _,
        &first.priority_fees as _,
        &first.gas_prices as _,
        &first.gas_limits as _,
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(assigned
        .into_iter()
        .map(|row| (row.tx_id, row.on_row))
        .collect())
}

/// The signed attempts of every presigned part's allocated intents that
/// are not on their rows, in one insert, and the spend ledger's fee
/// reservations of those that are: committed with the allocation, before
/// any byte is broadcast.
pub(super) async fn insert_presigned(
    conn: &mut PgConnection,
    parts: &[AllocatePart<'_>],
    answers: &[Vec<(Uuid, u64)>],
    assigned: &HashMap<Uuid, bool>,
) -> StoreResult<()> {
    let mut rows = Vec::new();
    let mut reserved: (Vec<Uuid>, Vec<String>) = Default::default();
    for (part, kept) in parts.iter().zip(answers) {
        let Some(presigned) = part.presigned else {
            continue;
        };
        let writer = (part.fence.submitter, part.fence.token);
        let kept: std::collections::HashSet<Uuid> = kept.iter().map(|(id, _)| *id).collect();
        for attempt in &presigned.attempts {
            if !kept.contains(&attempt.tx_id) {
                continue;
            }
            if assigned.get(&attempt.tx_id) == Some(&true) {
                if part.spend.is_some() {
                    reserved.0.push(attempt.tx_id);
                    reserved.1.push(worst_fee(attempt).to_string());
                }
            } else {
                rows.push((attempt, writer));
            }
        }
    }
    pipeline::insert_attempt_rows(conn, &rows).await?;
    if !reserved.0.is_empty() {
        // Under a spend limit, the intent's fee reservation covers its
        // dearest attempt (as `insert_attempt_rows` does for the others).
        sqlx::query!(
            "UPDATE spend_ledger s SET fees_reserved = GREATEST(s.fees_reserved, w.worst::numeric)
               FROM UNNEST($1::uuid[], $2::text[]) AS w(tx_id, worst)
              WHERE s.tx_id = w.tx_id",
            &reserved.0,
            &reserved.1,
        )
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// An attempt's highest fee: gas limit times its max fee (or gas price).
fn worst_fee(attempt: &NewAttempt) -> alloy::primitives::U256 {
    let per_gas = attempt
        .max_fee_per_gas
        .or(attempt.gas_price)
        .unwrap_or_default();
    alloy::primitives::U256::from(attempt.gas_limit) * alloy::primitives::U256::from(per_gas)
}
