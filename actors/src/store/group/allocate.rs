//! The merged allocation of a group transaction: rejections first, then
//! nonces for every allocate part, each drawn from its own submitter's
//! cursor; the cursors of all parts are locked in one statement, their
//! highest nonces on intents read in one (the next nonce is derived from
//! them: `nonce_cursor`), the intents updated in one, and the cursor rows
//! written only when their `released` lists changed (rare).

use std::collections::HashMap;

use sqlx::PgConnection;
use uuid::Uuid;

use super::{
    spend,
    writes::{row_key, AllocatePart, Columns, RowKey},
    Fence, Presigned,
};
use crate::{
    domain::ChainId,
    store::{
        millis,
        nonce_cursor::{self, CursorRow, NonceCursor},
        pipeline, StoreError, StoreResult,
    },
};

/// One part's draw: its index, the cursor after drawing, `(intent, nonce)`,
/// and the cursor's `released` list as read (the row is written only when
/// the list changed).
type Drawn = (usize, NonceCursor, Vec<(Uuid, u64)>, Vec<u64>);

/// Rejections, then nonces for every allocate part: the cursors of all
/// parts are locked in one statement and their highest nonces read in a
/// second, the nonces drawn here, the intents updated in one statement, and
/// the cursor rows whose `released` changed written in one. Returns per
/// part the intents that got a nonce.
pub(super) async fn allocate(
    conn: &mut PgConnection,
    parts: &[AllocatePart<'_>],
) -> StoreResult<Vec<Vec<(Uuid, u64)>>> {
    for part in parts {
        for (tx_id, reason) in part.reject {
            let (submitter, token) = (part.fence.submitter, part.fence.token);
            pipeline::reject_on(conn, submitter, token, *tx_id, reason).await?;
        }
    }
    let mut answers: Vec<Vec<(Uuid, u64)>> = parts.iter().map(|_| Vec::new()).collect();
    // Lock the intents still QUEUED before drawing: an operator's cancel
    // that got there first has committed (they are skipped, and no nonce is
    // drawn for them), one that comes later waits and then finds them
    // ALLOCATED. So every nonce drawn is assigned and none leaves a gap.
    let (queued, expired) = lock_queued(conn, parts).await?;
    // Past their deadline before a nonce was drawn (database clock):
    // REJECTED `expired`, no nonce used (README "Guardrails").
    if !expired.is_empty() {
        for part in parts {
            let ids: Vec<Uuid> = part
                .tx_ids
                .iter()
                .copied()
                .filter(|id| expired.contains(id))
                .collect();
            if !ids.is_empty() {
                pipeline::expire_on(conn, part.fence.submitter, part.fence.token, &ids).await?;
            }
        }
    }
    let mut still: Vec<Vec<Uuid>> = parts
        .iter()
        .map(|part| {
            part.tx_ids
                .iter()
                .copied()
                .filter(|id| queued.contains(id) && !part.expire_only.contains(id))
                .collect()
        })
        .collect();
    let drawing: Vec<usize> = (0..parts.len()).filter(|i| !still[*i].is_empty()).collect();
    if drawing.is_empty() {
        return Ok(answers);
    }
    let (chains, addresses): (Vec<ChainId>, Vec<String>) =
        drawing.iter().map(|i| row_key(parts[*i].fence)).unzip();
    // A paused submitter draws nothing: its pause is read in the statement
    // that locks the cursors, so a pause committed before this allocation
    // is obeyed by it, wherever the leader runs (README "Guardrails").
    let rows = sqlx::query!(
        r#"SELECT c.chain_id AS "chain_id: ChainId", c.submitter, c.next_nonce, c.released,
                  c.protect_reason, c.fencing_token, c.protect_covered_below,
                  EXISTS (SELECT 1 FROM submitter_pause p
                           WHERE p.chain_id = c.chain_id AND p.submitter = c.submitter) AS "paused!"
             FROM submitter_nonce_cursor c
            WHERE (c.chain_id, c.submitter) IN (SELECT * FROM UNNEST($1::bigint[], $2::text[]))
            ORDER BY c.chain_id, c.submitter FOR UPDATE OF c"#,
        &chains as _,
        &addresses,
    )
    .fetch_all(&mut *conn)
    .await?;
    // Under the locks just taken, in a statement of its own (its snapshot
    // then holds every nonce the previous holders of the locks wrote).
    let mut tops = nonce_cursor::highest_nonces(conn, &chains, &addresses).await?;
    let mut paused = std::collections::HashSet::new();
    let mut cursors: HashMap<RowKey, CursorRow> = rows
        .into_iter()
        .map(|row| {
            let key = (row.chain_id, row.submitter);
            if row.paused {
                paused.insert(key.clone());
            }
            let cursor = CursorRow {
                next_nonce: row.next_nonce,
                released: row.released,
                protect_reason: row.protect_reason,
                fencing_token: row.fencing_token,
                protect_covered_below: row.protect_covered_below,
            };
            let top = tops.remove(&key).flatten();
            (key, cursor.with_top(top))
        })
        .collect();

    // Draw per part; one row per intent for the merged update.
    let mut drawn: Vec<Drawn> = Vec::new();
    for &i in &drawing {
        let part = &parts[i];
        // A part without a cursor fails the batch: written alone then, it
        // fails whole (its rejections too), never half.
        let Some(row) = cursors.remove(&row_key(part.fence)) else {
            return Err(StoreError::Missing {
                what: "nonce cursor",
                submitter: part.fence.submitter,
            });
        };
        if paused.contains(&row_key(part.fence)) {
            continue;
        }
        // Drawn and signed by the leader: written whole, or not at all.
        if let Some(presigned) = part.presigned {
            if let Some((held, read)) = presigned_draw(part, presigned, row, &still[i])? {
                drawn.push((i, held, presigned_assignments(presigned), read));
            }
            continue;
        }
        // Under a spend limit, only what fits the window (read under the
        // cursor lock just taken) gets a nonce.
        if let Some(budget) = part.spend {
            let (submitter, token) = (part.fence.submitter, part.fence.token);
            still[i] = spend::admit(conn, submitter, token, budget, &still[i]).await?;
            if still[i].is_empty() {
                continue;
            }
        }
        let mut cursor = nonce_cursor::from_row(part.fence.submitter, row)?;
        let read = cursor.released.clone();
        let nonces = cursor.draw(still[i].len());
        let assignments = still[i].iter().copied().zip(nonces).collect();
        drawn.push((i, cursor, assignments, read));
    }
    let assigned = assign(conn, parts, &drawn).await?;

    // Nonces of intents that left QUEUED meanwhile go back to the cursor.
    // The nonces assigned are on their intents' rows now, which is where
    // the next nonce is derived from: the cursor row is written only when
    // its `released` list changed (a released nonce drawn or given back).
    let mut cursor_rows = CursorWrites::default();
    for (i, mut cursor, assignments, read) in drawn {
        let (kept, unused): (Vec<_>, Vec<_>) = assignments
            .into_iter()
            .partition(|(id, _)| assigned.contains(id));
        let mut back: Vec<u64> = unused.iter().map(|(_, n)| *n).collect();
        back.sort_unstable();
        cursor.give_back(&back)?;
        if cursor.released != read {
            cursor_rows.push(parts[i].fence, &cursor)?;
        }
        if let Some(budget) = parts[i].spend {
            let ids: Vec<Uuid> = kept.iter().map(|(id, _)| *id).collect();
            spend::record(conn, parts[i].fence.submitter, budget, &ids).await?;
        }
        answers[i] = kept;
    }
    cursor_rows.write(conn).await?;
    insert_presigned(conn, parts, &answers).await?;
    Ok(answers)
}

/// The cursor after a leader's own draw, and its `released` list as read,
/// when the draw still holds: the row says what the leader drew from (no
/// other write moved it, no PROTECT since) and every intent it signed for
/// is still QUEUED and not past its deadline. `None`: nothing of the part
/// is allocated.
fn presigned_draw(
    part: &AllocatePart<'_>,
    presigned: &Presigned,
    row: CursorRow,
    queued: &[Uuid],
) -> StoreResult<Option<(NonceCursor, Vec<u64>)>> {
    let from_released = presigned
        .from
        .1
        .iter()
        .map(|n| nonce_cursor::to_db(*n))
        .collect::<StoreResult<Vec<i64>>>()?;
    let unmoved = row.next_nonce == nonce_cursor::to_db(presigned.from.0)?
        && row.released == from_released
        && row.protect_reason.is_none();
    let all_queued = queued.len() == presigned.attempts.len()
        && queued
            .iter()
            .zip(&presigned.attempts)
            .all(|(id, attempt)| *id == attempt.tx_id);
    if !(unmoved && all_queued) {
        return Ok(None);
    }
    // The same draw again from the locked row: the attempts must carry
    // exactly the nonces it gives, in order.
    let mut cursor = nonce_cursor::from_row(part.fence.submitter, row)?;
    let read = cursor.released.clone();
    let nonces = cursor.draw(presigned.attempts.len());
    if let Some((nonce, attempt)) = nonces
        .iter()
        .zip(&presigned.attempts)
        .find(|(nonce, attempt)| **nonce != attempt.nonce)
    {
        return Err(StoreError::Corrupt(format!(
            "attempt {} signed with nonce {} where the draw gives {nonce}",
            attempt.tx_id, attempt.nonce
        )));
    }
    Ok(Some((cursor, read)))
}

fn presigned_assignments(presigned: &Presigned) -> Vec<(Uuid, u64)> {
    presigned
        .attempts
        .iter()
        .map(|attempt| (attempt.tx_id, attempt.nonce))
        .collect()
}

/// The signed attempts of every presigned part's allocated intents, in one
/// insert: committed with the allocation, before any byte is broadcast.
async fn insert_presigned(
    conn: &mut PgConnection,
    parts: &[AllocatePart<'_>],
    answers: &[Vec<(Uuid, u64)>],
) -> StoreResult<()> {
    let mut rows = Vec::new();
    for (part, assigned) in parts.iter().zip(answers) {
        let Some(presigned) = part.presigned else {
            continue;
        };
        let writer = (part.fence.submitter, part.fence.token);
        let assigned: std::collections::HashSet<Uuid> =
            assigned.iter().map(|(id, _)| *id).collect();
        for attempt in &presigned.attempts {
            if assigned.contains(&attempt.tx_id) {
                rows.push((attempt, writer));
            }
        }
    }
    pipeline::insert_attempt_rows(conn, &rows).await
}

/// Locks, in one statement, every part's intents that are still QUEUED
/// (in a fixed order, so concurrent lockers never wait on each other in a
/// cycle); returns those to draw for, and those past their `valid_until`.
async fn lock_queued(
    conn: &mut PgConnection,
    parts: &[AllocatePart<'_>],
) -> StoreResult<(
    std::collections::HashSet<Uuid>,
    std::collections::HashSet<Uuid>,
)> {
    let mut rows = Columns::default();
    for part in parts {
        for tx_id in part.tx_ids {
            rows.push(part.fence, *tx_id);
        }
    }
    if rows.tx_ids.is_empty() {
        return Ok(Default::default());
    }
    let locked = sqlx::query!(
        r#"SELECT m.tx_id,
                  COALESCE((m.intent->>'valid_until')::timestamptz <= now(), false) AS "expired!"
             FROM managed_tx m
             JOIN UNNEST($1::uuid[], $2::bigint[], $3::text[]) AS a(tx_id, chain_id, submitter)
               ON m.tx_id = a.tx_id AND m.chain_id = a.chain_id AND m.submitter = a.submitter
            WHERE m.state = 'QUEUED'
            ORDER BY m.tx_id FOR UPDATE OF m"#,
        &rows.tx_ids,
        &rows.chains as _,
        &rows.addresses,
    )
    .fetch_all(&mut *conn)
    .await?;
    let (expired, live): (Vec<_>, Vec<_>) = locked.into_iter().partition(|row| row.expired);
    Ok((
        live.into_iter().map(|row| row.tx_id).collect(),
        expired.into_iter().map(|row| row.tx_id).collect(),
    ))
}

/// The merged ALLOCATED update; returns the intents it changed.
async fn assign(
    conn: &mut PgConnection,
    parts: &[AllocatePart<'_>],
    drawn: &[Drawn],
) -> StoreResult<std::collections::HashSet<Uuid>> {
    let mut rows = Columns::default();
    for (i, _, assignments, _) in drawn {
        let part = &parts[*i];
        for (tx_id, nonce) in assignments {
            rows.push(part.fence, *tx_id);
            rows.numbers.push(pipeline::nonce_db(*nonce)?);
            rows.millis.push(millis(part.resubmit_interval));
        }
    }
    let assigned: Vec<Uuid> = sqlx::query_scalar!(
        "UPDATE managed_tx m SET state = 'ALLOCATED', nonce = a.nonce, sub_state = NULL,
                fencing_token = a.token, updated_at = now(), retry_at = now(), allocated_at = now(),
                maybe_pooled = false, next_resubmit_at = now() + a.resubmit_ms * interval '1 millisecond'
           FROM UNNEST($1::uuid[], $2::bigint[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[])
                AS a(tx_id, chain_id, submitter, token, nonce, resubmit_ms)
          WHERE m.tx_id = a.tx_id AND m.chain_id = a.chain_id AND m.submitter = a.submitter
            AND m.state = 'QUEUED'
         RETURNING m.tx_id",
        &rows.tx_ids,
        &rows.chains as _,
        &rows.addresses,
        &rows.tokens,
        &rows.numbers,
        &rows.millis,
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(assigned.into_iter().collect())
}

/// Cursor rows to write back in one statement.
#[derive(Default)]
struct CursorWrites {
    chains: Vec<ChainId>,
    addresses: Vec<String>,
    next: Vec<i64>,
    /// `released` as array literals: PostgreSQL has no array of arrays of
    /// different lengths to unnest.
    released: Vec<String>,
    tokens: Vec<i64>,
}

impl CursorWrites {
    fn push(&mut self, fence: &Fence, cursor: &NonceCursor) -> StoreResult<()> {
        let (chain, address) = row_key(fence);
        self.chains.push(chain);
        self.addresses.push(address);
        self.next.push(nonce_cursor::to_db(cursor.next_nonce)?);
        let released: Vec<String> = cursor.released.iter().map(u64::to_string).collect();
        self.released.push(format!("{{{}}}", released.join(",")));
        self.tokens.push(fence.token);
        Ok(())
    }

    async fn write(self, conn: &mut PgConnection) -> StoreResult<()> {
        if self.chains.is_empty() {
            return Ok(());
        }
        sqlx::query!(
            "UPDATE submitter_nonce_cursor c
                SET next_nonce = u.next_nonce, released = u.released::bigint[],
                    fencing_token = u.token, updated_at = now()
               FROM UNNEST($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::bigint[])
                    AS u(chain_id, submitter, next_nonce, released, token)
              WHERE c.chain_id = u.chain_id AND c.submitter = u.submitter",
            &self.chains as _,
            &self.addresses,
            &self.next,
            &self.released,
            &self.tokens,
        )
        .execute(conn)
        .await?;
        Ok(())
    }
}
