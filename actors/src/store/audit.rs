//! The `ops_audit` table: who did what to which submitter or transaction,
//! why, on which node, and whether it took effect (README "HTTP API").
//!
//! ```text
//! action is a database write (unprotect, cancel, …):  BEGIN ─ write ─ audit(done) ─ COMMIT
//! action is on running state (restart, reload):       audit(started) ─ act ─ set_outcome(done | failed)
//! ```
//!
//! Either way an action never takes effect without its row, and a row never
//! claims an effect that did not happen.

use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use super::StoreResult;

/// One operator action as the audit table records it.
#[derive(Debug, Clone, Copy)]
pub struct AuditEntry<'a> {
    /// The token's name (never the token), `anonymous` without auth.
    pub actor: &'a str,
    /// `restart`, `unprotect`, `reload`, `tx_cancel`, …
    pub action: &'a str,
    /// The chain of the submitter or transaction acted on; `None` for
    /// node-wide actions.
    pub chain_id: Option<crate::domain::ChainId>,
    /// Lower-case `0x` address, when the action has a submitter.
    pub submitter: Option<&'a str>,
    /// The operator's free-text reason, if given.
    pub reason: Option<&'a str>,
    /// The node that took the request.
    pub node_id: Option<&'a str>,
    /// The transaction acted on, for transaction actions.
    pub tx_id: Option<Uuid>,
}

/// Where an audited action stands (`ops_audit.outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditOutcome {
    /// Recorded before acting on running state; updated once it is known.
    Started,
    /// The action took effect.
    Done,
    /// The action was attempted and did not take effect.
    Failed,
}

impl AuditOutcome {
    /// The value stored in `ops_audit.outcome`.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditOutcome::Started => "started",
            AuditOutcome::Done => "done",
            AuditOutcome::Failed => "failed",
        }
    }
}

/// Writes `entry` with `outcome` on `conn` — inside the action's own
/// transaction when the action is a database write. Returns the row's id.
pub async fn insert(
    conn: &mut PgConnection,
    entry: &AuditEntry<'_>,
    outcome: AuditOutcome,
) -> StoreResult<i64> {
    let id = sqlx::query_scalar!(
        "INSERT INTO ops_audit (actor, action, submitter, reason, node_id, tx_id, outcome, chain_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
        entry.actor,
        entry.action,
        entry.submitter,
        entry.reason,
        entry.node_id,
        entry.tx_id,
        outcome.as_str(),
        entry.chain_id as _,
    )
    .fetch_one(conn)
    .await?;
    Ok(id)
}

/// Records how a [`AuditOutcome::Started`] action ended.
pub async fn set_outcome(pool: &PgPool, id: i64, outcome: AuditOutcome) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE ops_audit SET outcome = $2 WHERE id = $1",
        id,
        outcome.as_str()
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// Oldest audit rows looked at per [`prune_batch`].
pub const PRUNE_BATCH: i64 = 1_000;

/// Deletes one batch of `ops_audit` rows older than `retain`
/// (`feed.audit_retain`); returns how many. A batch that deletes fewer than
/// [`PRUNE_BATCH`] means the round is done.
///
/// The rows of an intent still open (QUEUED, ALLOCATED, TRACKING, STUCK)
/// stay whatever their age: the limit on a client's actions reads them, and
/// an operator looking at a live intent needs its history. They are not
/// candidates, so they cannot stall the rows behind them; once the intent
/// is final its rows go with the next round.
pub async fn prune_batch(pool: &PgPool, retain: std::time::Duration) -> StoreResult<u64> {
    let retain_ms = i64::try_from(retain.as_millis()).unwrap_or(i64::MAX);
    let deleted = sqlx::query!(
        "WITH oldest AS (
             SELECT a.id FROM ops_audit a
              WHERE a.at < now() - make_interval(secs => $1::bigint::float8 / 1000)
                AND NOT EXISTS (SELECT 1 FROM managed_tx m
                                 WHERE m.tx_id = a.tx_id
                                   AND m.state IN ('QUEUED', 'ALLOCATED', 'TRACKING', 'STUCK'))
              ORDER BY a.at LIMIT $2)
         DELETE FROM ops_audit a USING oldest o WHERE a.id = o.id",
        retain_ms,
        PRUNE_BATCH,
    )
    .execute(pool)
    .await?;
    Ok(deleted.rows_affected())
}
