//! The merged statements of a group transaction: one statement per kind of
//! row for all parts together (the allocation is in `allocate`). Every row carries its part's submitter and
//! token, and a row of another submitter is never touched.

use std::time::Duration;

use sqlx::PgConnection;
use uuid::Uuid;

use super::{BroadcastRecord, Fence};
use crate::{
    chain::BroadcastClass,
    domain::{ChainId, SubState, SubmitterKey},
    store::{
        millis,
        pipeline::{self, NewAttempt},
        StoreResult,
    },
};

/// `(chain_id, address)` as stored: the key of a submitter's rows.
pub(super) type RowKey = (ChainId, String);

/// The key of `fence`'s submitter as its rows store it.
pub(super) fn row_key(fence: &Fence) -> RowKey {
    (fence.submitter.chain_id, fence.submitter.address_hex())
}

/// Per-row columns of a merged statement: the intent, its part's submitter
/// and token, and a number and a duration the statement needs.
#[derive(Default)]
pub(super) struct Columns {
    pub(super) tx_ids: Vec<Uuid>,
    pub(super) chains: Vec<ChainId>,
    pub(super) addresses: Vec<String>,
    pub(super) tokens: Vec<i64>,
    pub(super) numbers: Vec<i64>,
    pub(super) millis: Vec<i64>,
}

impl Columns {
    pub(super) fn push(&mut self, fence: &Fence, tx_id: Uuid) {
        let (chain, address) = row_key(fence);
        self.tx_ids.push(tx_id);
        self.chains.push(chain);
        self.addresses.push(address);
        self.tokens.push(fence.token);
    }
}

/// An `Allocate` part, borrowed from the batch.
pub(super) struct AllocatePart<'a> {
    pub(super) fence: &'a Fence,
    pub(super) reject: &'a [(Uuid, String)],
    pub(super) tx_ids: &'a [Uuid],
    pub(super) resubmit_interval: Duration,
    pub(super) spend: Option<&'a super::SpendBudget>,
    pub(super) expire_only: &'a [Uuid],
    pub(super) presigned: Option<&'a super::Presigned>,
}

/// A `PersistAttempts` part.
pub(super) struct PersistPart<'a> {
    pub(super) fence: &'a Fence,
    pub(super) attempts: &'a [NewAttempt],
    pub(super) refused: &'a [(Uuid, String)],
}

/// A `RecordBroadcast` part.
pub(super) struct RecordPart<'a> {
    pub(super) fence: &'a Fence,
    pub(super) record: &'a BroadcastRecord,
}

/// Every part's attempts in one insert (numbered after the intent's newest
/// attempt); then the signer's refusals, one by one (rare). The intents'
/// `tx_hash` is set when the broadcast is recorded ([`record`]): one update
/// of the intent row fewer per attempt (each is a new row version with its
/// index entries), and the intent names the attempt that was last sent.
pub(super) async fn persist(conn: &mut PgConnection, parts: &[PersistPart<'_>]) -> StoreResult<()> {
    let rows: Vec<(&NewAttempt, (SubmitterKey, i64))> = parts
        .iter()
        .flat_map(|part| {
            let writer = (part.fence.submitter, part.fence.token);
            part.attempts.iter().map(move |attempt| (attempt, writer))
        })
        .collect();
    pipeline::insert_attempt_rows(conn, &rows).await?;
    for part in parts {
        for (tx_id, reason) in part.refused {
            let (submitter, token) = (part.fence.submitter, part.fence.token);
            pipeline::reject_on(conn, submitter, token, *tx_id, reason).await?;
        }
    }
    Ok(())
}

/// Every part's broadcast answers: accepted ones to TRACKING, retries
/// stay ALLOCATED with their retry time (and `maybe_pooled` after an
/// unknown answer), both pointing the intent's `tx_hash` at the attempt
/// sent; an acceptance also names it in `accepted_hash`, which is that
/// attempt's answer (no update of the attempt's row), every other answer is
/// written on its attempt; definitive refusals rejected one by one (rare).
pub(super) async fn record(conn: &mut PgConnection, parts: &[RecordPart<'_>]) -> StoreResult<()> {
    let mut accepted = Columns::default();
    let mut retried = Columns::default();
    let mut errors: Vec<String> = Vec::new();
    let mut unknown: Vec<bool> = Vec::new();
    let mut results = Columns::default();
    let mut labels: Vec<String> = Vec::new();
    let mut hashes: Vec<String> = Vec::new();
    let mut accepted_hashes: Vec<String> = Vec::new();
    let mut retried_hashes: Vec<String> = Vec::new();
    for part in parts {
        let record = part.record;
        for (tx_id, hash, label) in &record.accepted {
            accepted.push(part.fence, *tx_id);
            accepted.millis.push(millis(record.resubmit_interval));
            accepted_hashes.push(format!("{hash:#x}"));
            // A plain acceptance is the intent's `accepted_hash` (written by
            // the acceptance update below), not a row version of the attempt.
            if *label != BroadcastClass::Accepted.label() {
                results.push(part.fence, *tx_id);
                hashes.push(format!("{hash:#x}"));
                labels.push((*label).to_owned());
            }
        }
        for retry in &record.retries {
            retried.push(part.fence, retry.tx_id);
            retried.millis.push(millis(record.retry_after));
            retried_hashes.push(format!("{:#x}", retry.tx_hash));
            errors.push(retry.error.clone());
            unknown.push(retry.unknown);
            results.push(part.fence, retry.tx_id);
            hashes.push(format!("{:#x}", retry.tx_hash));
            labels.push(retry.error.clone());
        }
    }
    if !accepted.tx_ids.is_empty() {
        sqlx::query!(
            "WITH written AS (
                 -- Answers `accepted_hash` cannot carry, written on their
                 -- attempt (both rare): an intent no longer in flight is not
                 -- updated below, so its attempt gets the answer; and the
                 -- attempt an earlier acceptance named keeps its answer when
                 -- `accepted_hash` moves on to this one.
                 UPDATE tx_attempt t SET broadcast_result = 'accepted'
                   FROM UNNEST($1::uuid[], $2::bigint[], $3::text[], $6::text[])
                        AS a(tx_id, chain_id, submitter, tx_hash)
                   JOIN managed_tx m ON m.tx_id = a.tx_id AND m.chain_id = a.chain_id
                                    AND m.submitter = a.submitter
                  WHERE t.tx_id = a.tx_id AND t.tx_hash = CASE WHEN m.state NOT IN ('ALLOCATED', 'TRACKING', 'STUCK')
                                         THEN a.tx_hash
                                         WHEN m.accepted_hash <> a.tx_hash THEN m.accepted_hash END
                    AND t.broadcast_result IS NULL)
             UPDATE managed_tx m SET state = CASE WHEN m.state = 'STUCK' THEN 'STUCK' ELSE 'TRACKING' END,
                    sub_state = COALESCE(m.sub_state, $7),
                    submit_attempts = submit_attempts + 1, last_submit_at = now(),
                    first_broadcast_at = COALESCE(m.first_broadcast_at, now()),
                    next_resubmit_at = now() + a.resubmit_ms * interval '1 millisecond',
                    last_error = NULL, retry_at = NULL, fencing_token = a.token, updated_at = now(),
                    tx_hash = a.tx_hash, accepted_hash = a.tx_hash
               FROM UNNEST($1::uuid[], $2::bigint[], $3::text[], $4::bigint[], $5::bigint[],
                           $6::text[])
                    AS a(tx_id, chain_id, submitter, token, resubmit_ms, tx_hash)
              WHERE m.tx_id = a.tx_id AND m.chain_id = a.chain_id AND m.submitter = a.submitter
                AND m.state IN ('ALLOCATED', 'TRACKING', 'STUCK')",
            &accepted.tx_ids,
            &accepted.chains as _,
            &accepted.addresses,
            &accepted.tokens,
            &accepted.millis,
            &accepted_hashes,
            SubState::AwaitingReceipt as _,
        )
        .execute(&mut *conn)
        .await?;
    }
    if !retried.tx_ids.is_empty() {
        sqlx::query!(
            "UPDATE managed_tx m SET last_error = a.error,
                    retry_at = now() + a.retry_ms * interval '1 millisecond',
                    maybe_pooled = m.maybe_pooled OR a.unknown, fencing_token = a.token,
                    updated_at = now(), tx_hash = a.tx_hash
               FROM UNNEST($1::uuid[], $2::bigint[], $3::text[], $4::bigint[], $5::bigint[],
                           $6::text[], $7::bool[], $8::text[])
                    AS a(tx_id, chain_id, submitter, token, retry_ms, error, unknown, tx_hash)
              WHERE m.tx_id = a.tx_id AND m.chain_id = a.chain_id AND m.submitter = a.submitter
                AND m.state IN ('ALLOCATED', 'TRACKING', 'STUCK')",
            &retried.tx_ids,
            &retried.chains as _,
            &retried.addresses,
            &retried.tokens,
            &retried.millis,
            &errors,
            &unknown,
            &retried_hashes,
        )
        .execute(&mut *conn)
        .await?;
    }
    if !results.tx_ids.is_empty() {
        sqlx::query!(
            "UPDATE tx_attempt t SET broadcast_result = a.result
               FROM UNNEST($1::uuid[], $2::bigint[], $3::text[], $4::text[], $5::text[])
                    AS a(tx_id, chain_id, submitter, tx_hash, result)
               JOIN managed_tx m ON m.tx_id = a.tx_id AND m.chain_id = a.chain_id
                                AND m.submitter = a.submitter
              WHERE t.tx_id = a.tx_id AND t.tx_hash = a.tx_hash",
            &results.tx_ids,
            &results.chains as _,
            &results.addresses,
            &hashes,
            &labels,
        )
        .execute(&mut *conn)
        .await?;
    }
    for part in parts {
        for (tx_id, reason) in &part.record.rejects {
            let (submitter, token) = (part.fence.submitter, part.fence.token);
            pipeline::reject_on(conn, submitter, token, *tx_id, reason).await?;
        }
    }
    Ok(())
}
