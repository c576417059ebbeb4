//! The submitter pipeline's reads and fenced writes: allocation,
//! rejections, and (in the submodules) attempts with their broadcast answers
//! and the ALLOCATED intents waiting for a (re)broadcast (README
//! "How an intent is executed"-8).

mod allocated;
mod attempts;
mod paused_expiry;

use std::time::Duration;

use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

pub use allocated::{
    load_allocated_unsigned, load_due_allocated, next_allocated_retry, retry_allocated_now,
    PendingAttempt,
};
pub(super) use attempts::insert_attempt_rows;
pub use attempts::{insert_attempts, record_attempt_results, record_retry, NewAttempt, RetryLater};
pub use paused_expiry::{expire_queued, PausedExpiry};

use super::{millis, nonce_cursor, FencedTx, StoreError, StoreResult};
use crate::domain::{Intent, SubmitterKey};

/// A QUEUED intent waiting for a nonce.
#[derive(Debug, Clone)]
pub struct QueuedTx {
    /// Its id.
    pub tx_id: Uuid,
    /// What to send.
    pub intent: Intent,
}

pub(in crate::store) fn corrupt(e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

pub(in crate::store) fn nonce_db(nonce: u64) -> StoreResult<i64> {
    i64::try_from(nonce).map_err(corrupt)
}

fn nonce_of(n: i64) -> StoreResult<u64> {
    u64::try_from(n).map_err(corrupt)
}

/// The oldest QUEUED intents that fit the free in-flight slots, in one
/// round trip: at most `batch`, and at most `max_in_flight` minus the intents
/// occupying a slot (ALLOCATED, STUCK, and TRACKING — with a receipt only
/// when `count_mined`, i.e. strict mode counts until final).
pub async fn load_queued_within(
    pool: &PgPool,
    key: SubmitterKey,
    batch: usize,
    max_in_flight: u32,
    count_mined: bool,
) -> StoreResult<Vec<QueuedTx>> {
    let request = super::queue_read::QueueRequest {
        key,
        batch,
        max_in_flight,
        count_mined,
    };
    super::queue_read::read_together(pool, &[request])
        .await
        .pop()
        .unwrap_or_else(|| Ok(Vec::new()))
}

/// REJECTED: the intent never used a nonce on chain. When it held one (no
/// node ever accepted any attempt, and no send had an unknown answer) the
/// nonce goes back to the cursor. Returns false (and changes nothing) when
/// the intent is no longer rejectable — an attempt was accepted meanwhile,
/// or its bytes may be in a pool (`maybe_pooled`).
pub async fn reject(ftx: &mut FencedTx, tx_id: Uuid, reason: &str) -> StoreResult<bool> {
    let submitter = ftx.submitter();
    let token = ftx.token();
    reject_on(ftx.conn(), submitter, token, tx_id, reason).await
}

/// [`reject`] on a connection whose transaction the caller has fenced for
/// `submitter` (the group committer). Only an intent of that submitter is
/// touched.
/// REJECTED `expired`: QUEUED intents whose `valid_until` passed before a
/// nonce was drawn (the allocation, fenced, on its locked rows).
pub(in crate::store) async fn expire_on(
    conn: &mut PgConnection,
    submitter: SubmitterKey,
    token: i64,
    tx_ids: &[Uuid],
) -> StoreResult<()> {
    let expired = sqlx::query_scalar!(
        "UPDATE managed_tx SET state = 'REJECTED', sub_state = $2, nonce = NULL,
                last_error = 'expired: valid_until ' || (intent->>'valid_until') || ' passed before a nonce was drawn',
                requested_action = NULL, requested_by = NULL, fencing_token = $3, updated_at = now()
          WHERE tx_id = ANY($1) AND state = 'QUEUED' AND chain_id = $4 AND submitter = $5
          RETURNING tx_id",
        tx_ids,
        crate::domain::SubState::Expired as _,
        token,
        submitter.chain_id as _,
        submitter.address_hex(),
    )
    .fetch_all(&mut *conn)
    .await?;
    for tx_id in expired {
        super::completions::record(conn, tx_id).await?;
    }
    Ok(())
}

pub(in crate::store) async fn reject_on(
    conn: &mut PgConnection,
    submitter: SubmitterKey,
    token: i64,
    tx_id: Uuid,
    reason: &str,
) -> StoreResult<bool> {
    // The cursor before the intent's row (the store's lock order: a group
    // transaction has taken it already, with its other parts' cursors).
    nonce_cursor::lock_in_key_order(conn, &[submitter.chain_id], &[submitter.address_hex()])
        .await?;
    let released = sqlx::query_scalar!(
        r#"UPDATE managed_tx m SET state = 'REJECTED', sub_state = NULL, nonce = NULL, last_error = $2,
                requested_action = NULL, requested_by = NULL, fencing_token = $3, updated_at = now()
           FROM (SELECT tx_id, nonce FROM managed_tx WHERE tx_id = $1 FOR UPDATE) old
          WHERE m.tx_id = old.tx_id AND m.state IN ('QUEUED', 'ALLOCATED') AND m.submit_attempts = 0
            AND NOT m.maybe_pooled AND m.chain_id = $4 AND m.submitter = $5
          RETURNING old.nonce AS "nonce?""#,
        tx_id,
        reason,
        token,
        submitter.chain_id as _,
        submitter.address_hex(),
    )
    .fetch_optional(&mut *conn)
    .await?;
    let Some(nonce) = released else {
        return Ok(false);
    };
    if let Some(nonce) = nonce {
        nonce_cursor::release_on(conn, submitter, token, &[nonce_of(nonce)?]).await?;
    }
    super::completions::record(conn, tx_id).await?;
    Ok(true)
}

/// Locks the intents among `ids` that are still QUEUED, in the caller's
/// fenced transaction, before nonces are drawn for them: an operator's
/// cancel that got there first has committed (and they are skipped), one
/// that comes later waits and then finds them ALLOCATED. So every nonce
/// drawn is assigned, and a cancel never leaves a gap.
pub async fn lock_queued(ftx: &mut FencedTx, ids: &[Uuid]) -> StoreResult<Vec<Uuid>> {
    Ok(sqlx::query_scalar!(
        "SELECT tx_id FROM managed_tx WHERE tx_id = ANY($1) AND state = 'QUEUED'
          ORDER BY ingress_seq FOR UPDATE",
        ids,
    )
    .fetch_all(ftx.conn())
    .await?)
}

/// Gives the nonces to QUEUED intents (one allocation transaction with
/// [`nonce_cursor::allocate`]) and marks them ALLOCATED. An intent that left
/// QUEUED meanwhile (an operator cancelled it) is skipped and its nonce goes
/// back to the cursor in the same transaction. Returns the intents that got
/// their nonce.
pub async fn assign_nonces(
    ftx: &mut FencedTx,
    assignments: &[(Uuid, u64)],
    resubmit_interval: Duration,
) -> StoreResult<Vec<Uuid>> {
    let ids: Vec<Uuid> = assignments.iter().map(|(id, _)| *id).collect();
    let nonces = assignments
        .iter()
        .map(|(_, n)| nonce_db(*n))
        .collect::<StoreResult<Vec<_>>>()?;
    let token = ftx.token();
    let assigned: Vec<Uuid> = sqlx::query_scalar!(
        "UPDATE managed_tx m SET state = 'ALLOCATED', nonce = a.nonce, sub_state = NULL,
                fencing_token = $3, updated_at = now(), retry_at = now(), allocated_at = now(),
                maybe_pooled = false, next_resubmit_at = now() + $4::bigint * interval '1 millisecond'
           FROM UNNEST($1::uuid[], $2::bigint[]) AS a(tx_id, nonce)
          WHERE m.tx_id = a.tx_id AND m.state = 'QUEUED'
         RETURNING m.tx_id",
        &ids,
        &nonces,
        token,
        millis(resubmit_interval),
    )
    .fetch_all(ftx.conn())
    .await?;
    if assigned.len() != assignments.len() {
        let mut unused: Vec<u64> = assignments
            .iter()
            .filter(|(id, _)| !assigned.contains(id))
            .map(|(_, n)| *n)
            .collect();
        unused.sort_unstable();
        nonce_cursor::release(ftx, &unused).await?;
    }
    Ok(assigned)
}
