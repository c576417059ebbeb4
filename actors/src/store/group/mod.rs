//! The group committer: the leaders' hot-path fenced writes of a whole node,
//! merged into few PostgreSQL transactions.
//!
//! With many submitters every work cycle carries few intents, and a
//! transaction per leader per step made PostgreSQL spend most of its time
//! on transaction overhead. Here the leaders hand their write sets ([`Part`])
//! to a node-wide committer; a worker takes every part waiting (up to
//! [`MAX_PARTS`]) and writes them in one transaction:
//!
//! 1. one statement locks every involved lease row `FOR SHARE` and returns
//!    the parts whose (submitter, owner node, instance, token) still holds a
//!    live lease — the same proof [`FencedTx`](super::FencedTx) gives, per
//!    part; a refused part writes nothing and its leader gets
//!    [`StoreError::Fenced`];
//! 2. set-based statements write the valid parts of each kind together, each
//!    row checked against its part's submitter;
//! 3. one commit, durable unless every part allows relaxed durability.
//!
//! The leaders' queue reads ([`queue_read`](super::queue_read)) go through
//! the same queue: a batch's reads are answered by one statement inside its
//! transaction, after its writes, or alone when no write waits.
//!
//! A batch that fails for another reason (a conflict, a bad row) is rolled
//! back and each of its parts is retried alone, so one part never fails
//! another leader's write. Each leader still waits for its own answer before
//! it goes on, so "committed before broadcast" holds per part.

mod allocate;
mod batch;
mod spend;
mod writes;

pub use spend::{SpendBudget, SpendCost};

use std::{collections::HashSet, sync::Arc, time::Duration};

use alloy::primitives::B256;
use sqlx::PgPool;
use tokio::sync::{mpsc, oneshot, Mutex};
use uuid::Uuid;

use super::{
    pipeline::{NewAttempt, QueuedTx, RetryLater},
    queue_read::{QueueRequest, MAX_REQUESTS},
    LeaseGuard, LeaseOwner, StoreError, StoreResult,
};
use crate::domain::SubmitterKey;

/// Most parts one transaction carries.
pub const MAX_PARTS: usize = 256;

/// Concurrent group transactions per node: while one commits (waiting for
/// the WAL flush), the next batch gathers and is written.
pub const WORKERS: usize = 2;

/// Waiting parts and reads the queue holds before leaders wait to hand
/// theirs over.
const QUEUE_DEPTH: usize = 4 * MAX_PARTS;

/// The lease proof of one leader, as the committer checks it.
#[derive(Debug, Clone)]
pub struct Fence {
    /// The submitter written for.
    pub submitter: SubmitterKey,
    /// The leader's process.
    pub owner: LeaseOwner,
    /// Its fencing token.
    pub token: i64,
}

impl From<&LeaseGuard> for Fence {
    fn from(lease: &LeaseGuard) -> Self {
        Fence {
            submitter: lease.submitter,
            owner: lease.owner.clone(),
            token: lease.token,
        }
    }
}

/// What a leader writes through the committer.
#[derive(Debug, Clone)]
pub enum Write {
    /// Reject `reject` (QUEUED, no nonce yet), then draw nonces for
    /// `tx_ids` (in this order, released nonces first) and make the ones
    /// still QUEUED ALLOCATED; a nonce drawn for an intent that left QUEUED
    /// meanwhile goes back to the cursor in the same transaction.
    Allocate {
        /// Intents rejected before allocation, with the reason.
        reject: Vec<(Uuid, String)>,
        /// Intents to allocate, in acceptance order.
        tx_ids: Vec<Uuid>,
        /// First re-broadcast due after this.
        resubmit_interval: Duration,
        /// The submitter's spend limit, with the intents' values.
        spend: Option<SpendBudget>,
        /// Of `tx_ids`, those the leader saw past their deadline: REJECTED
        /// when the database clock agrees, else left QUEUED — never given
        /// a nonce here (they were neither priced nor checked).
        expire_only: Vec<Uuid>,
        /// Nonces the leader drew from its own copy of the cursor, and the
        /// attempts it signed with them: the allocation and the attempts
        /// are written together, and only if the cursor row still says what
        /// the leader drew from and every one of these intents is still
        /// QUEUED — else none of them (their bytes never left the process).
        presigned: Option<Box<Presigned>>,
    },
    /// Persist signed attempts (before any byte is broadcast) and reject the
    /// intents the signer refused (their nonces go back).
    PersistAttempts {
        /// The signed attempts.
        attempts: Vec<NewAttempt>,
        /// Intents the signer refused, with the reason.
        refused: Vec<(Uuid, String)>,
    },
    /// Record a broadcast's classified answers.
    RecordBroadcast(BroadcastRecord),
}

/// An allocation the leader drew and signed before writing it (see
/// [`Write::Allocate`]).
#[derive(Debug, Clone)]
pub struct Presigned {
    /// The cursor the leader drew from: `(next_nonce, released)`.
    pub from: (u64, Vec<u64>),
    /// One signed attempt per allocated intent, in the part's `tx_ids`
    /// order, each with the nonce drawn for it.
    pub attempts: Vec<NewAttempt>,
}

/// The classified answers of one broadcast batch.
#[derive(Debug, Clone, Default)]
pub struct BroadcastRecord {
    /// Accepted (or already known): `(tx_id, hash, result label)`.
    pub accepted: Vec<(Uuid, B256, &'static str)>,
    /// Not accepted yet: retried after `retry_after`.
    pub retries: Vec<RetryLater>,
    /// Refused for good with the nonce releasable: REJECTED.
    pub rejects: Vec<(Uuid, String)>,
    /// Next re-broadcast of accepted ones after this.
    pub resubmit_interval: Duration,
    /// Broadcast retry delay.
    pub retry_after: Duration,
}

impl BroadcastRecord {
    /// True when nothing is to be written.
    pub fn is_empty(&self) -> bool {
        self.accepted.is_empty() && self.retries.is_empty() && self.rejects.is_empty()
    }
}

impl Write {
    /// The operation name for metrics and logs.
    pub fn operation(&self) -> &'static str {
        match self {
            Write::Allocate { .. } => "allocate",
            Write::PersistAttempts { .. } => "persist_attempts",
            Write::RecordBroadcast(_) => "record_broadcast",
        }
    }

    /// True when losing this write in a crash is harmless: only a
    /// broadcast's accepted and retried answers without an unknown one
    /// (recovery re-sends the identical persisted bytes). Allocation,
    /// attempts, rejections and the `maybe_pooled` mark must be durable.
    pub fn may_relax(&self) -> bool {
        match self {
            Write::RecordBroadcast(r) => {
                r.rejects.is_empty() && !r.retries.iter().any(|r| r.unknown)
            }
            _ => false,
        }
    }
}

/// A committed part's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// `Allocate`: the intents that got a nonce, with it, in draw order
    /// (with `presigned`: all of them, or none when the draw no longer
    /// held).
    Allocated(Vec<(Uuid, u64)>),
    /// Any other write.
    Done,
}

/// One leader's write set and where its answer goes.
#[derive(Debug)]
struct Part {
    fence: Fence,
    write: Write,
    reply: oneshot::Sender<StoreResult<Answer>>,
}

/// One leader's queue read ([`queue_read`](super::queue_read)) and where
/// its answer goes.
#[derive(Debug)]
struct Read {
    request: QueueRequest,
    reply: oneshot::Sender<StoreResult<Vec<QueuedTx>>>,
}

/// What a worker takes from the queue.
#[derive(Debug)]
enum Job {
    Write(Box<Part>),
    Read(Read),
}

/// The handle leaders write through; cheap to clone.
#[derive(Debug, Clone)]
pub struct GroupCommitter {
    queue: mpsc::Sender<Job>,
}

impl GroupCommitter {
    /// Starts [`WORKERS`] workers writing to `pool`. They stop when every
    /// handle is dropped.
    pub fn spawn(pool: PgPool) -> GroupCommitter {
        let (queue, jobs) = mpsc::channel(QUEUE_DEPTH);
        let jobs = Arc::new(Mutex::new(jobs));
        for _ in 0..WORKERS {
            tokio::spawn(work(pool.clone(), jobs.clone()));
        }
        GroupCommitter { queue }
    }

    /// Writes `write` for the lease holder `lease`, merged with other
    /// leaders' parts, and waits until it is committed (or refused).
    pub async fn write(&self, lease: &LeaseGuard, write: Write) -> StoreResult<Answer> {
        let (reply, answer) = oneshot::channel();
        let part = Part {
            fence: Fence::from(lease),
            write,
            reply,
        };
        self.queue
            .send(Job::Write(Box::new(part)))
            .await
            .map_err(|_| StoreError::Corrupt("group committer stopped".into()))?;
        answer
            .await
            .map_err(|_| StoreError::Corrupt("group committer dropped a write".into()))?
    }

    /// Reads the submitter's next QUEUED intents with the reads waiting —
    /// inside the next batch's transaction when writes wait too.
    pub async fn read(&self, request: QueueRequest) -> StoreResult<Vec<QueuedTx>> {
        let (reply, answer) = oneshot::channel();
        self.queue
            .send(Job::Read(Read { request, reply }))
            .await
            .map_err(|_| StoreError::Corrupt("queue reader stopped".into()))?;
        answer
            .await
            .map_err(|_| StoreError::Corrupt("queue reader dropped a read".into()))?
    }
}

/// Writes `parts` as one batch right away, bypassing the queue: what a
/// worker does with the parts it took (for tests and tools that need to
/// know which parts share a transaction). Parts must be of distinct
/// submitters. Answers come in the order of `parts`.
pub async fn write_together(
    pool: &PgPool,
    parts: Vec<(LeaseGuard, Write)>,
) -> Vec<StoreResult<Answer>> {
    write_and_read_together(pool, parts, Vec::new()).await.0
}

/// [`write_together`] with queue reads in the same batch, as a worker that
/// took both answers them: in the parts' transaction after their writes
/// (alone when there are no parts, or when that transaction fails). Read
/// answers come in the order of `reads`.
pub async fn write_and_read_together(
    pool: &PgPool,
    parts: Vec<(LeaseGuard, Write)>,
    reads: Vec<QueueRequest>,
) -> (Vec<StoreResult<Answer>>, Vec<StoreResult<Vec<QueuedTx>>>) {
    let mut answers = Vec::with_capacity(parts.len());
    let parts: Vec<Part> = parts
        .into_iter()
        .map(|(lease, write)| {
            let (reply, answer) = oneshot::channel();
            answers.push(answer);
            Part {
                fence: Fence::from(&lease),
                write,
                reply,
            }
        })
        .collect();
    let mut read_answers = Vec::with_capacity(reads.len());
    let reads: Vec<Read> = reads
        .into_iter()
        .map(|request| {
            let (reply, answer) = oneshot::channel();
            read_answers.push(answer);
            Read { request, reply }
        })
        .collect();
    batch::write(pool, parts, reads).await;
    let mut out = Vec::with_capacity(answers.len());
    for answer in answers {
        out.push(
            answer.await.unwrap_or_else(|_| {
                Err(StoreError::Corrupt("group commit dropped a write".into()))
            }),
        );
    }
    let mut read_out = Vec::with_capacity(read_answers.len());
    for answer in read_answers {
        read_out.push(
            answer
                .await
                .unwrap_or_else(|_| Err(StoreError::Corrupt("group commit dropped a read".into()))),
        );
    }
    (out, read_out)
}

/// One worker: takes the first waiting job, then every job already
/// waiting — parts one per submitter (a second one of the same submitter
/// waits for the next batch) up to [`MAX_PARTS`], reads up to
/// [`MAX_REQUESTS`] — and writes the parts together, the reads answered in
/// their transaction.
async fn work(pool: PgPool, jobs: Arc<Mutex<mpsc::Receiver<Job>>>) {
    let mut carry: Vec<Part> = Vec::new();
    loop {
        let mut batch = std::mem::take(&mut carry);
        let mut reads = Vec::new();
        {
            let mut queue = jobs.lock().await;
            if batch.is_empty() {
                match queue.recv().await {
                    Some(Job::Write(part)) => batch.push(*part),
                    Some(Job::Read(read)) => reads.push(read),
                    None => return,
                }
            }
            while batch.len() < MAX_PARTS && reads.len() < MAX_REQUESTS {
                match queue.try_recv() {
                    Ok(Job::Write(part)) => batch.push(*part),
                    Ok(Job::Read(read)) => reads.push(read),
                    Err(_) => break,
                }
            }
        }
        let mut seen = HashSet::new();
        let (now, later): (Vec<Part>, Vec<Part>) = batch
            .into_iter()
            .partition(|part| seen.insert(part.fence.submitter));
        carry = later;
        // On a task of its own: should writing a batch ever panic, its
        // leaders see their write or read dropped (and retry) and this
        // worker goes on.
        let pool = pool.clone();
        if let Err(err) = tokio::spawn(async move { batch::write(&pool, now, reads).await }).await {
            tracing::error!(target: "txmgr::store", error = %err, "a group commit task failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::pipeline::RetryLater;

    fn record(retries: Vec<RetryLater>, rejects: Vec<(Uuid, String)>) -> Write {
        Write::RecordBroadcast(BroadcastRecord {
            accepted: vec![(Uuid::nil(), B256::ZERO, "accepted")],
            retries,
            rejects,
            ..BroadcastRecord::default()
        })
    }

    fn retry(unknown: bool) -> RetryLater {
        RetryLater {
            tx_id: Uuid::nil(),
            tx_hash: B256::ZERO,
            error: "x".into(),
            unknown,
        }
    }

    #[test]
    fn only_reconstructible_broadcast_records_may_skip_the_wal_flush() {
        assert!(record(vec![retry(false)], Vec::new()).may_relax());
        assert!(
            !record(vec![retry(true)], Vec::new()).may_relax(),
            "maybe_pooled must survive a crash"
        );
        assert!(!record(Vec::new(), vec![(Uuid::nil(), "refused".into())]).may_relax());
        let allocate = Write::Allocate {
            reject: Vec::new(),
            tx_ids: vec![Uuid::nil()],
            resubmit_interval: Duration::from_secs(1),
            spend: None,
            expire_only: Vec::new(),
            presigned: None,
        };
        assert!(!allocate.may_relax());
        let persist = Write::PersistAttempts {
            attempts: Vec::new(),
            refused: Vec::new(),
        };
        assert!(!persist.may_relax());
    }
}
