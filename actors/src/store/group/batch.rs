//! Writing one batch of parts: the fence for all, the merged writes, one
//! commit; and the fall-back to one transaction per part.

use sqlx::{PgConnection, PgPool};

use super::{
    allocate,
    writes::{self, row_key, AllocatePart, PersistPart, RecordPart},
    Answer, Fence, Part, Read, Write,
};
use crate::{
    domain::ChainId,
    metrics::{FENCED_WRITES, GROUP_COMMIT_PARTS},
    store::{
        nonce_cursor,
        pipeline::QueuedTx,
        queue_read::{self, QueueRequest},
        StoreError, StoreResult,
    },
};

/// Writes `parts` in one transaction, answers `reads` in it after the
/// writes, and answers each leader. When the transaction fails as a whole,
/// each part is written alone, so a part that cannot be stored fails only
/// its own leader, and reads not yet answered are read alone.
pub(super) async fn write(pool: &PgPool, parts: Vec<Part>, reads: Vec<Read>) {
    if parts.is_empty() {
        read_alone(pool, reads).await;
        return;
    }
    // The node's one group committer merges the parts of every chain it
    // serves into one transaction: its series are the node's, without a
    // `chain` label (each part's fenced write is counted with its chain).
    metrics::histogram!(GROUP_COMMIT_PARTS).record(parts.len() as f64);
    let started = std::time::Instant::now();
    let mut reads = Some(reads);
    let attempted = attempt(pool, &parts, &mut reads).await;
    metrics::histogram!(crate::metrics::GROUP_COMMIT_SECONDS)
        .record(started.elapsed().as_secs_f64());
    match attempted {
        Ok(answers) => deliver(parts, answers),
        Err(err) if parts.len() > 1 => {
            tracing::warn!(target: "txmgr::store", parts = parts.len(), error = %err,
                "group commit failed; writing its parts one by one");
            for part in parts {
                let answers = match attempt(pool, std::slice::from_ref(&part), &mut None).await {
                    Ok(answers) => answers,
                    Err(err) => vec![Err(err)],
                };
                deliver(vec![part], answers);
            }
        }
        Err(err) => deliver(parts, vec![Err(err)]),
    }
    if let Some(reads) = reads {
        // The transaction failed before its reads were answered: they are
        // read alone, after the parts' own writes.
        read_alone(pool, reads).await;
    }
}

fn deliver(parts: Vec<Part>, answers: Vec<StoreResult<Answer>>) {
    for (part, answer) in parts.into_iter().zip(answers) {
        let result = match &answer {
            Ok(_) => "ok",
            Err(err) if err.is_fenced() => "fenced",
            Err(_) => "error",
        };
        let chain = crate::metrics::chain_label(part.fence.submitter.chain_id);
        let operation = part.write.operation();
        metrics::counter!(FENCED_WRITES, "chain" => chain, "operation" => operation, "result" => result)
            .increment(1);
        // The leader may have stopped waiting (its actor was killed).
        let _ = part.reply.send(answer);
    }
}

/// The requests of `reads`, in their order.
fn requests(reads: &[Read]) -> Vec<QueueRequest> {
    reads.iter().map(|read| read.request).collect()
}

/// Answers `reads` with a statement of their own.
async fn read_alone(pool: &PgPool, reads: Vec<Read>) {
    if reads.is_empty() {
        return;
    }
    let answers = queue_read::read_together(pool, &requests(&reads)).await;
    deliver_reads(reads, answers);
}

/// Gives each read its answer (answers in the order of `reads`).
fn deliver_reads(reads: Vec<Read>, answers: Vec<StoreResult<Vec<QueuedTx>>>) {
    for (read, answer) in reads.into_iter().zip(answers) {
        // The leader may have stopped waiting (its actor was killed).
        let _ = read.reply.send(answer);
    }
}

/// One transaction for `parts`: an answer per part, or the error that made
/// the whole transaction fail (nothing of it was committed then). The reads
/// in `reads` are answered (and taken) once their statement has run after
/// the writes, before the commit (see [`queue_read`]).
async fn attempt(
    pool: &PgPool,
    parts: &[Part],
    reads: &mut Option<Vec<Read>>,
) -> StoreResult<Vec<StoreResult<Answer>>> {
    let mut tx = pool.begin().await?;
    if parts.iter().all(|p| p.write.may_relax()) {
        // set_config(.., true) is SET LOCAL in a form the checked macros
        // can describe.
        sqlx::query!("SELECT FROM set_config('synchronous_commit', 'off', true)")
            .execute(&mut *tx)
            .await?;
    }
    let held = fence(&mut tx, parts).await?;
    let mut answers: Vec<StoreResult<Answer>> = parts
        .iter()
        .zip(&held)
        .map(|(part, held)| {
            if *held {
                Ok(Answer::Done)
            } else {
                tracing::warn!(target: "txmgr::lease", submitter = %part.fence.submitter,
                    fencing_token = part.fence.token, owner = %part.fence.owner,
                    operation = part.write.operation(), "fenced write refused: lease lost");
                Err(StoreError::Fenced {
                    submitter: part.fence.submitter,
                    token: part.fence.token,
                })
            }
        })
        .collect();

    let mut allocating = Vec::new();
    let mut persisting = Vec::new();
    let mut recording = Vec::new();
    for (i, part) in parts.iter().enumerate().filter(|(i, _)| held[*i]) {
        match &part.write {
            Write::Allocate {
                reject,
                tx_ids,
                resubmit_interval,
                spend,
                expire_only,
                presigned,
            } => allocating.push((
                i,
                AllocatePart {
                    fence: &part.fence,
                    reject,
                    tx_ids,
                    resubmit_interval: *resubmit_interval,
                    spend: spend.as_ref(),
                    expire_only,
                    presigned: presigned.as_deref(),
                },
            )),
            Write::PersistAttempts { attempts, refused } => persisting.push(PersistPart {
                fence: &part.fence,
                attempts,
                refused,
            }),
            Write::RecordBroadcast(record) => recording.push(RecordPart {
                fence: &part.fence,
                record,
            }),
        }
    }
    lock_cursors_before_refusals(&mut tx, &allocating, &persisting, &recording).await?;
    if !allocating.is_empty() {
        let (at, allocate): (Vec<usize>, Vec<AllocatePart>) = allocating.into_iter().unzip();
        let drawn = allocate::allocate(&mut tx, &allocate).await?;
        for (i, assigned) in at.into_iter().zip(drawn) {
            answers[i] = Ok(Answer::Allocated(assigned));
        }
    }
    if !persisting.is_empty() {
        writes::persist(&mut tx, &persisting).await?;
    }
    if !recording.is_empty() {
        writes::record(&mut tx, &recording).await?;
    }
    if let Some(waiting) = reads.as_deref().filter(|reads| !reads.is_empty()) {
        let count = waiting.len();
        let rows = queue_read::query(&mut *tx, &requests(waiting)).await?;
        if let Some(waiting) = reads.take() {
            deliver_reads(waiting, queue_read::answers(rows, count));
        }
    }
    tx.commit().await?;
    Ok(answers)
}

/// A refusal gives its nonce back after it has locked its intent's row, and
/// an allocation locks its cursor before its intents' rows: when any part
/// of this transaction refuses, every cursor the transaction may lock is
/// locked here first, in key order (the store's lock order, see
/// [`nonce_cursor::lock_in_key_order`]). Otherwise two transactions, each
/// allocating for one submitter and refusing for the other, would wait on
/// each other. Nothing to do in the usual transaction without a refusal.
async fn lock_cursors_before_refusals(
    conn: &mut PgConnection,
    allocating: &[(usize, AllocatePart<'_>)],
    persisting: &[PersistPart<'_>],
    recording: &[RecordPart<'_>],
) -> StoreResult<()> {
    let refusing: Vec<&Fence> = allocating
        .iter()
        .filter(|(_, part)| !part.reject.is_empty())
        .map(|(_, part)| part.fence)
        .chain(
            persisting
                .iter()
                .filter(|p| !p.refused.is_empty())
                .map(|p| p.fence),
        )
        .chain(
            recording
                .iter()
                .filter(|p| !p.record.rejects.is_empty())
                .map(|p| p.fence),
        )
        .collect();
    if refusing.is_empty() {
        return Ok(());
    }
    let (chains, addresses): (Vec<ChainId>, Vec<String>) = allocating
        .iter()
        .map(|(_, part)| part.fence)
        .chain(refusing)
        .map(row_key)
        .unzip();
    nonce_cursor::lock_in_key_order(conn, &chains, &addresses).await
}

/// Locks the lease row of every part `FOR SHARE` (in key order, so two
/// batches never wait on each other in a cycle) and tells, per part,
/// whether its owner and token still hold a live lease by the database
/// clock. The share locks last until commit: a take-over waits for this
/// transaction, and the new owner sees everything it wrote.
async fn fence(conn: &mut PgConnection, parts: &[Part]) -> StoreResult<Vec<bool>> {
    let index: Vec<i32> = (0..parts.len())
        .map(|i| i32::try_from(i).unwrap_or(i32::MAX))
        .collect();
    let chains: Vec<ChainId> = parts.iter().map(|p| p.fence.submitter.chain_id).collect();
    let addresses: Vec<String> = parts
        .iter()
        .map(|p| p.fence.submitter.address_hex())
        .collect();
    let nodes: Vec<&str> = parts.iter().map(|p| &*p.fence.owner.node_id).collect();
    let instances: Vec<&str> = parts.iter().map(|p| &*p.fence.owner.instance).collect();
    let tokens: Vec<i64> = parts.iter().map(|p| p.fence.token).collect();
    let valid = sqlx::query_scalar!(
        r#"SELECT r.i AS "i!" FROM submitter_lease l
           JOIN UNNEST($1::int4[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::bigint[])
                AS r(i, chain_id, submitter, owner_node, owner_instance, token)
             ON l.chain_id = r.chain_id AND l.submitter = r.submitter
          WHERE l.owner_node = r.owner_node AND l.owner_instance = r.owner_instance
            AND l.fencing_token = r.token AND l.expires_at > now()
          ORDER BY l.chain_id, l.submitter
            FOR SHARE OF l"#,
        &index,
        &chains as _,
        &addresses,
        &nodes as _,
        &instances as _,
        &tokens,
    )
    .fetch_all(conn)
    .await?;
    let mut held = vec![false; parts.len()];
    for i in valid {
        if let Some(slot) = usize::try_from(i).ok().and_then(|i| held.get_mut(i)) {
            *slot = true;
        }
    }
    Ok(held)
}
