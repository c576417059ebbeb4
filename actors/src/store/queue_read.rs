//! The node's queue reader: the leaders' reads of their next QUEUED intents,
//! merged into few statements.
//!
//! With many submitters every work cycle finds about one new intent, and
//! each leader's own `SELECT` made the read the largest share of the
//! node's database transactions (1.46 per intent at 1,000 submitters, of
//! which about one was this read). Here a leader hands its request to the
//! node's group committer ([`GroupCommitter`]): a worker takes every read
//! waiting (up to [`MAX_REQUESTS`]) with the writes waiting and answers the
//! reads with one statement — a lateral join over the requests, each side
//! the same indexed read a leader made alone (its submitter's QUEUED range
//! of `managed_tx_open_idx`, in acceptance order), with the same limit, the
//! batch size and the free in-flight slots, per submitter. When writes wait
//! too, the statement runs inside their transaction, after them: no
//! transaction of its own (a read had been about two in five of the
//! engine's transactions at 100 submitters), and it sees the slots those
//! writes take. Otherwise it runs alone.
//!
//! A read is not a critical write: it needs no fence (the allocation that
//! follows is fenced, and allocates only intents still QUEUED), and its
//! result is the same as the leader's own read at the statement's snapshot.
//! Read inside a write transaction, its answer is given before that
//! transaction commits: the writes never make an intent QUEUED, so every
//! intent it returns was QUEUED before them too, and should the commit
//! fail, a read that counted their slots returned fewer intents, not wrong
//! ones.

use sqlx::{PgExecutor, PgPool};
use uuid::Uuid;

use super::{
    group::GroupCommitter,
    pipeline::{corrupt, QueuedTx},
    StoreError, StoreResult,
};
use crate::domain::{ChainId, SubmitterKey};

/// Most requests one statement answers.
pub const MAX_REQUESTS: usize = 256;

/// One leader's read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueRequest {
    /// The submitter.
    pub key: SubmitterKey,
    /// At most this many intents (the batch size).
    pub batch: usize,
    /// The submitter's in-flight bound: the read returns no more than the
    /// free slots.
    pub max_in_flight: u32,
    /// Count mined intents awaiting finality in flight
    /// (`hold_slot_until_final`).
    pub count_mined: bool,
}

/// The handle leaders read through; cheap to clone.
#[derive(Clone)]
pub struct QueueReader {
    committer: GroupCommitter,
}

impl std::fmt::Debug for QueueReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueReader").finish_non_exhaustive()
    }
}

impl QueueReader {
    /// Reads through `committer`'s workers, with its writes.
    pub fn new(committer: GroupCommitter) -> QueueReader {
        QueueReader { committer }
    }

    /// The submitter's next QUEUED intents in acceptance order, at most
    /// `batch` and no more than its free in-flight slots — read together
    /// with other leaders' requests.
    pub async fn read(&self, request: QueueRequest) -> StoreResult<Vec<QueuedTx>> {
        self.committer.read(request).await
    }
}

/// Answers `requests` with one statement; answers come in their order. A
/// failed statement fails each request with the same error; an intent that
/// cannot be decoded fails only its own submitter's read.
pub async fn read_together(
    pool: &PgPool,
    requests: &[QueueRequest],
) -> Vec<StoreResult<Vec<QueuedTx>>> {
    match query(pool, requests).await {
        Ok(rows) => answers(rows, requests.len()),
        Err(err) => failed(err, requests.len()),
    }
}

/// Every one of `count` reads fails with `err`.
fn failed(err: StoreError, count: usize) -> Vec<StoreResult<Vec<QueuedTx>>> {
    let message = err.to_string();
    tracing::debug!(target: "txmgr::store", error = %message, requests = count, "queue read failed");
    let mut answers = vec![Err(err)];
    answers.extend((1..count).map(|_| Err(StoreError::Corrupt(message.clone()))));
    answers
}

/// The answers of `count` reads from the rows of their statement: an
/// intent that cannot be decoded fails only its own submitter's read.
pub(super) fn answers(
    rows: Vec<(i64, Uuid, serde_json::Value)>,
    count: usize,
) -> Vec<StoreResult<Vec<QueuedTx>>> {
    let mut answers: Vec<StoreResult<Vec<QueuedTx>>> = (0..count).map(|_| Ok(Vec::new())).collect();
    for (i, tx_id, intent) in rows {
        // ORDINALITY counts from 1; the statement returns only these.
        let Some(slot) = usize::try_from(i - 1).ok().and_then(|i| answers.get_mut(i)) else {
            continue;
        };
        if let Ok(list) = slot {
            match serde_json::from_value(intent) {
                Ok(intent) => list.push(QueuedTx { tx_id, intent }),
                Err(err) => *slot = Err(corrupt(format!("intent {tx_id}: {err}"))),
            }
        }
    }
    answers
}

/// The statement that answers `requests`, on `conn` (the pool, or a
/// group transaction after its writes): one row per intent returned, the
/// request's number (from 1), the intent's id and its stored intent.
pub async fn query(
    conn: impl PgExecutor<'_>,
    requests: &[QueueRequest],
) -> StoreResult<Vec<(i64, Uuid, serde_json::Value)>> {
    let chain_ids: Vec<ChainId> = requests.iter().map(|r| r.key.chain_id).collect();
    let submitters: Vec<String> = requests.iter().map(|r| r.key.address_hex()).collect();
    let limits: Vec<i64> = requests
        .iter()
        .map(|r| i64::try_from(r.batch).unwrap_or(i64::MAX))
        .collect();
    let bounds: Vec<i64> = requests
        .iter()
        .map(|r| i64::from(r.max_in_flight))
        .collect();
    let count_mined: Vec<bool> = requests.iter().map(|r| r.count_mined).collect();
    let rows = sqlx::query!(
        r#"SELECT r.i AS "i!", q.tx_id AS "tx_id!", q.intent AS "intent!"
           FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::bigint[], $5::bool[])
                WITH ORDINALITY AS r(chain_id, submitter, lim, bound, count_mined, i)
           CROSS JOIN LATERAL (
                SELECT m.tx_id, m.intent, m.ingress_seq FROM managed_tx m
                 WHERE m.chain_id = r.chain_id AND m.submitter = r.submitter AND m.state = 'QUEUED'
                   AND m.phase = 0
                   AND NOT EXISTS (SELECT 1 FROM submitter_pause p
                                    WHERE p.chain_id = r.chain_id AND p.submitter = r.submitter)
                 ORDER BY m.ingress_seq
                 -- The in-flight count stops at the bound: past it no
                 -- slot is free, and a backlog of unmined intents is not
                 -- counted on every read. Unless mined intents hold their
                 -- slots, only unmined ones are counted, from the index of
                 -- unmined intents: the submitter's mined intents awaiting
                 -- finality (a chain's whole finality depth of them) are
                 -- not read on every read.
                 LIMIT GREATEST(0, LEAST(r.lim, r.bound - CASE WHEN r.count_mined
                       THEN (SELECT count(*) FROM (
                              SELECT 1 FROM managed_tx f
                               WHERE f.chain_id = r.chain_id AND f.submitter = r.submitter
                                 AND f.state IN ('ALLOCATED', 'TRACKING', 'STUCK') AND f.phase = 1
                               LIMIT GREATEST(r.bound, 0)) in_flight)
                       ELSE (SELECT count(*) FROM (
                              SELECT 1 FROM managed_tx f
                               WHERE f.chain_id = r.chain_id AND f.submitter = r.submitter
                                 AND f.state IN ('ALLOCATED', 'TRACKING', 'STUCK') AND f.phase = 1
                                 AND f.receipt IS NULL
                               LIMIT GREATEST(r.bound, 0)) unmined) END))) q
          ORDER BY r.i, q.ingress_seq"#,
        &chain_ids as _,
        &submitters,
        &limits,
        &bounds,
        &count_mined,
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.i, r.tx_id, r.intent)).collect())
}
