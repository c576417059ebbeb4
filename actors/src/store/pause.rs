//! The `submitter_pause` table (README "Guardrails"): an operator's pause
//! of one (chain, submitter), durable and cluster-wide. While its row
//! exists the allocation draws no nonce for the submitter (checked in the
//! statement that locks the cursors, `group::allocate`) and the queue
//! reader returns none of its QUEUED intents; pausing and resuming write
//! their audit row in the same transaction.

use alloy::primitives::Address;
use sqlx::PgPool;

use super::{
    audit::{self, AuditEntry, AuditOutcome},
    intents::WORK_CHANNEL,
    StoreError, StoreResult,
};
use crate::domain::{ChainId, SubmitterKey};

/// A pause as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pause {
    /// Why (the operator's reason).
    pub reason: String,
    /// Re-broadcasts and fee bumps of in-flight intents stop too.
    pub halt_resubmits: bool,
    /// The token's name that paused it.
    pub paused_by: String,
}

/// Pauses `key` (or updates its pause) with the audit row `entry`, in one
/// transaction. Returns the pause it replaced, if any.
pub async fn pause(
    pool: &PgPool,
    key: SubmitterKey,
    pause: &Pause,
    entry: &AuditEntry<'_>,
) -> StoreResult<Option<Pause>> {
    let mut tx = pool.begin().await?;
    let before = read_on(&mut tx, key).await?;
    sqlx::query!(
        "INSERT INTO submitter_pause (chain_id, submitter, reason, halt_resubmits, paused_by)
         VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (chain_id, submitter) DO UPDATE
            SET reason = EXCLUDED.reason, halt_resubmits = EXCLUDED.halt_resubmits,
                paused_by = EXCLUDED.paused_by, paused_at = now()",
        key.chain_id as _,
        key.address_hex(),
        pause.reason,
        pause.halt_resubmits,
        pause.paused_by,
    )
    .execute(&mut *tx)
    .await?;
    audit::insert(&mut tx, entry, AuditOutcome::Done).await?;
    tx.commit().await?;
    Ok(before)
}

/// Lifts the pause of `key` with the audit row `entry`, in one transaction,
/// and wakes its leader (it allocates again at once). Returns the pause
/// lifted; `None` (and no audit row) when it was not paused.
pub async fn resume(
    pool: &PgPool,
    key: SubmitterKey,
    entry: &AuditEntry<'_>,
) -> StoreResult<Option<Pause>> {
    let mut tx = pool.begin().await?;
    let row = sqlx::query!(
        "DELETE FROM submitter_pause WHERE chain_id = $1 AND submitter = $2
         RETURNING reason, halt_resubmits, paused_by",
        key.chain_id as _,
        key.address_hex(),
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    audit::insert(&mut tx, entry, AuditOutcome::Done).await?;
    let payload = format!("{}:{}", key.chain_id, key.address_hex());
    sqlx::query!("SELECT FROM pg_notify($1, $2)", WORK_CHANNEL, payload)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(Some(Pause {
        reason: row.reason,
        halt_resubmits: row.halt_resubmits,
        paused_by: row.paused_by,
    }))
}

async fn read_on(conn: &mut sqlx::PgConnection, key: SubmitterKey) -> StoreResult<Option<Pause>> {
    let row = sqlx::query!(
        "SELECT reason, halt_resubmits, paused_by FROM submitter_pause
          WHERE chain_id = $1 AND submitter = $2",
        key.chain_id as _,
        key.address_hex(),
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|row| Pause {
        reason: row.reason,
        halt_resubmits: row.halt_resubmits,
        paused_by: row.paused_by,
    }))
}

/// Every paused submitter of `chain_id`, in one query.
pub async fn paused_on(pool: &PgPool, chain_id: ChainId) -> StoreResult<Vec<(Address, Pause)>> {
    let rows = sqlx::query!(
        "SELECT submitter, reason, halt_resubmits, paused_by FROM submitter_pause
          WHERE chain_id = $1",
        chain_id as _,
    )
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|row| {
            let address = row.submitter.parse().map_err(|_| {
                StoreError::Corrupt(format!("submitter {:?} is not an address", row.submitter))
            })?;
            Ok((
                address,
                Pause {
                    reason: row.reason,
                    halt_resubmits: row.halt_resubmits,
                    paused_by: row.paused_by,
                },
            ))
        })
        .collect()
}
