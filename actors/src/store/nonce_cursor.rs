//! The per-submitter nonce cursor (README "How an intent is executed").
//!
//! Reads take the pool; every change takes a [`FencedTx`], so only the lease
//! holder can move the cursor, hand out nonces or flip PROTECT.
//!
//! The next nonce is derived: the row's `next_nonce` is a floor, and every
//! nonce handed out stays on its intent's row until it leaves it (a trigger
//! then raises the floor past it), so the next never-used nonce is the
//! greater of the floor and the submitter's highest nonce on an intent plus
//! one. An allocation therefore writes the cursor row only when `released`
//! changes (README "Data model and leases").

use std::collections::HashMap;

use alloy::primitives::Address;
use sqlx::{PgConnection, PgPool};

use super::{FencedTx, StoreError, StoreResult};
use crate::domain::{ChainId, SubmitterKey};

/// The cursor of one submitter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NonceCursor {
    /// The next never-used nonce (derived: see the module docs).
    pub next_nonce: u64,
    /// Nonces below `next_nonce` given back and not yet reused, ascending.
    pub released: Vec<u64>,
    /// Set = PROTECT: external use of the key was seen; creates are refused.
    pub protect_reason: Option<String>,
    /// Token of the holder that last wrote the cursor.
    pub fencing_token: i64,
    /// The chain's pending nonce when an operator last cleared PROTECT:
    /// external use below it was known and accepted then.
    pub protect_covered_below: Option<u64>,
}

/// A `submitter_nonce_cursor` row's cursor columns, as the store's
/// queries select them.
pub(super) struct CursorRow {
    pub(in crate::store) next_nonce: i64,
    pub(in crate::store) released: Vec<i64>,
    pub(in crate::store) protect_reason: Option<String>,
    pub(in crate::store) fencing_token: i64,
    pub(in crate::store) protect_covered_below: Option<i64>,
}

impl CursorRow {
    /// Raises the row's floor to the nonce after `top`, the submitter's
    /// highest nonce on an intent (read under the row's lock).
    pub(in crate::store) fn with_top(mut self, top: Option<i64>) -> Self {
        if let Some(top) = top {
            self.next_nonce = self.next_nonce.max(top.saturating_add(1));
        }
        self
    }
}

/// The highest nonce on an intent of each `(chain, submitter)` (`None`: no
/// intent holds one), in one statement. Read it after the cursor rows are
/// locked, in a statement of its own: a statement's snapshot is taken when
/// it starts, so one that waited for the lock would not see the nonces the
/// previous holder wrote.
pub(in crate::store) async fn highest_nonces(
    conn: &mut PgConnection,
    chains: &[ChainId],
    addresses: &[String],
) -> StoreResult<HashMap<(ChainId, String), Option<i64>>> {
    let rows = sqlx::query!(
        r#"SELECT a.chain_id AS "chain_id!: ChainId", a.submitter AS "submitter!",
                  (SELECT max(m.nonce) FROM managed_tx m
                    WHERE m.chain_id = a.chain_id AND m.submitter = a.submitter
                      AND m.nonce IS NOT NULL) AS top
             FROM UNNEST($1::bigint[], $2::text[]) AS a(chain_id, submitter)"#,
        chains as _,
        addresses,
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| ((row.chain_id, row.submitter), row.top))
        .collect())
}

/// Row-locks the cursors of the given submitters, in key order, and reads
/// nothing. The lock order of the store: a transaction that may change a
/// nonce (draw one, give one back, or take one off an intent, whose trigger
/// raises the floor) takes its submitters' cursor locks first, in key order,
/// and only then intent rows. Without it a refusal (intent row, then the
/// cursor) and another submitter's allocation (cursor, then rows) in two
/// transactions wait on each other (README "Data model and leases").
pub(in crate::store) async fn lock_in_key_order(
    conn: &mut PgConnection,
    chains: &[ChainId],
    addresses: &[String],
) -> StoreResult<()> {
    sqlx::query!(
        "SELECT FROM submitter_nonce_cursor
          WHERE (chain_id, submitter) IN (SELECT * FROM UNNEST($1::bigint[], $2::text[]))
          ORDER BY chain_id, submitter FOR UPDATE",
        chains as _,
        addresses,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// [`lock_in_key_order`] for the fenced transaction's submitter: taken
/// first by a transaction that will lock intent rows and then may change a
/// nonce (give one back, take one off an intent, flip PROTECT).
pub async fn lock_before_rows(ftx: &mut FencedTx) -> StoreResult<()> {
    let key = ftx.submitter();
    lock_in_key_order(ftx.conn(), &[key.chain_id], &[key.address_hex()]).await
}

/// [`lock_in_key_order`] for the submitter of intent `tx_id`, before the
/// caller changes the intent's nonce (a path that knows only the intent).
pub(in crate::store) async fn lock_for_intent(
    conn: &mut PgConnection,
    tx_id: uuid::Uuid,
) -> StoreResult<()> {
    sqlx::query!(
        "SELECT FROM submitter_nonce_cursor c
          WHERE (c.chain_id, c.submitter) =
                (SELECT m.chain_id, m.submitter FROM managed_tx m WHERE m.tx_id = $1)
            FOR UPDATE OF c",
        tx_id,
    )
    .execute(conn)
    .await?;
    Ok(())
}

pub(super) fn from_row(submitter: SubmitterKey, row: CursorRow) -> StoreResult<NonceCursor> {
    let to_nonce = |n: i64| {
        u64::try_from(n).map_err(|_| {
            StoreError::Corrupt(format!("negative nonce {n} in cursor of {submitter}"))
        })
    };
    Ok(NonceCursor {
        next_nonce: to_nonce(row.next_nonce)?,
        released: row
            .released
            .into_iter()
            .map(to_nonce)
            .collect::<StoreResult<_>>()?,
        protect_reason: row.protect_reason,
        fencing_token: row.fencing_token,
        protect_covered_below: row.protect_covered_below.map(to_nonce).transpose()?,
    })
}

pub(super) fn to_db(nonce: u64) -> StoreResult<i64> {
    i64::try_from(nonce).map_err(|_| StoreError::Corrupt(format!("nonce {nonce} exceeds BIGINT")))
}

/// Reads the cursor without locking (status views, start-up checks).
pub async fn load(pool: &PgPool, submitter: SubmitterKey) -> StoreResult<Option<NonceCursor>> {
    let row = sqlx::query_as!(
        CursorRow,
        r#"SELECT GREATEST(c.next_nonce,
                          (SELECT max(m.nonce) + 1 FROM managed_tx m
                            WHERE m.chain_id = c.chain_id AND m.submitter = c.submitter
                              AND m.nonce IS NOT NULL)) AS "next_nonce!",
                  c.released, c.protect_reason, c.fencing_token, c.protect_covered_below
             FROM submitter_nonce_cursor c WHERE c.chain_id = $1 AND c.submitter = $2"#,
        submitter.chain_id as _,
        submitter.address_hex(),
    )
    .fetch_optional(pool)
    .await?;
    row.map(|row| from_row(submitter, row)).transpose()
}

/// The PROTECT reasons of `submitters` (`None`: not protected), in one
/// query; a submitter without a cursor is left out.
pub async fn protect_reasons(
    pool: &PgPool,
    chain_id: ChainId,
    submitters: &[Address],
) -> StoreResult<Vec<(Address, Option<String>)>> {
    if submitters.is_empty() {
        return Ok(Vec::new());
    }
    let hex: Vec<String> = submitters.iter().map(|a| format!("{a:#x}")).collect();
    let rows = sqlx::query!(
        "SELECT submitter, protect_reason FROM submitter_nonce_cursor
          WHERE chain_id = $1 AND submitter = ANY($2)",
        chain_id as _,
        &hex,
    )
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|row| (row.submitter, row.protect_reason))
        .map(|(submitter, reason)| {
            let address = submitter.parse().map_err(|_| {
                StoreError::Corrupt(format!("submitter {submitter:?} is not an address"))
            })?;
            Ok((address, reason))
        })
        .collect()
}

/// Reads and row-locks the cursor inside a fenced transaction.
async fn lock(ftx: &mut FencedTx) -> StoreResult<NonceCursor> {
    let submitter = ftx.submitter();
    lock_on(ftx.conn(), submitter).await
}

/// [`lock`] on a connection whose transaction the caller has fenced for
/// `submitter` (the group committer).
pub(super) async fn lock_on(
    conn: &mut PgConnection,
    submitter: SubmitterKey,
) -> StoreResult<NonceCursor> {
    let row = sqlx::query_as!(
        CursorRow,
        "SELECT next_nonce, released, protect_reason, fencing_token, protect_covered_below
           FROM submitter_nonce_cursor
          WHERE chain_id = $1 AND submitter = $2 FOR UPDATE",
        submitter.chain_id as _,
        submitter.address_hex(),
    )
    .fetch_optional(&mut *conn)
    .await?;
    let top = |tops: HashMap<_, Option<i64>>| tops.into_values().next().flatten();
    match row {
        Some(row) => {
            let key = (submitter.chain_id, submitter.address_hex());
            let tops = highest_nonces(conn, &[key.0], &[key.1]).await?;
            from_row(submitter, row.with_top(top(tops)))
        }
        None => Err(StoreError::Missing {
            what: "nonce cursor",
            submitter,
        }),
    }
}

async fn store(ftx: &mut FencedTx, cursor: &NonceCursor) -> StoreResult<()> {
    let submitter = ftx.submitter();
    let token = ftx.token();
    store_on(ftx.conn(), submitter, token, cursor).await
}

/// [`store`] on a connection whose transaction the caller has fenced.
pub(super) async fn store_on(
    conn: &mut PgConnection,
    submitter: SubmitterKey,
    token: i64,
    cursor: &NonceCursor,
) -> StoreResult<()> {
    let released = cursor
        .released
        .iter()
        .map(|n| to_db(*n))
        .collect::<StoreResult<Vec<_>>>()?;
    sqlx::query!(
        "UPDATE submitter_nonce_cursor
            SET next_nonce = $3, released = $4, protect_reason = $5,
                fencing_token = $6, protect_covered_below = $7, updated_at = now()
          WHERE chain_id = $1 AND submitter = $2",
        submitter.chain_id as _,
        submitter.address_hex(),
        to_db(cursor.next_nonce)?,
        &released,
        cursor.protect_reason.as_deref(),
        token,
        cursor.protect_covered_below.map(to_db).transpose()?,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Creates the cursor at `start_nonce` (a new submitter starts at the chain's
/// pending nonce) unless it exists; returns the cursor as it is now.
pub async fn init(ftx: &mut FencedTx, start_nonce: u64) -> StoreResult<NonceCursor> {
    let submitter = ftx.submitter();
    let token = ftx.token();
    sqlx::query!(
        "INSERT INTO submitter_nonce_cursor (chain_id, submitter, next_nonce, fencing_token)
         VALUES ($1, $2, $3, $4)
         ON CONFLICT (chain_id, submitter) DO NOTHING",
        submitter.chain_id as _,
        submitter.address_hex(),
        to_db(start_nonce)?,
        token,
    )
    .execute(ftx.conn())
    .await?;
    lock(ftx).await
}

/// Hands out up to `count` nonces: released ones first (lowest first, so gaps
/// close), then fresh ones from `next_nonce`. Returns them ascending.
pub async fn allocate(ftx: &mut FencedTx, count: usize) -> StoreResult<Vec<u64>> {
    let mut cursor = lock(ftx).await?;
    let nonces = cursor.draw(count);
    store(ftx, &cursor).await?;
    Ok(nonces)
}

/// Gives nonces back (their intents were rejected before any node accepted
/// them) so the next intents reuse them and no gap is left.
pub async fn release(ftx: &mut FencedTx, nonces: &[u64]) -> StoreResult<()> {
    let submitter = ftx.submitter();
    let token = ftx.token();
    release_on(ftx.conn(), submitter, token, nonces).await
}

/// [`release`] on a connection whose transaction the caller has fenced.
pub(super) async fn release_on(
    conn: &mut PgConnection,
    submitter: SubmitterKey,
    token: i64,
    nonces: &[u64],
) -> StoreResult<()> {
    let mut cursor = lock_on(conn, submitter).await?;
    cursor.give_back(nonces)?;
    store_on(conn, submitter, token, &cursor).await
}

impl NonceCursor {
    /// Takes `count` nonces: released ones first (lowest first, so gaps
    /// close), then fresh ones from `next_nonce`. Ascending.
    pub fn draw(&mut self, count: usize) -> Vec<u64> {
        let reused = count.min(self.released.len());
        let mut nonces: Vec<u64> = self.released.drain(..reused).collect();
        let fresh = u64::try_from(count - reused).unwrap_or(u64::MAX);
        nonces.extend(self.next_nonce..self.next_nonce + fresh);
        self.next_nonce += fresh;
        nonces
    }

    /// Puts nonces back into the released list (kept ascending, no
    /// duplicates). A nonce at or above `next_nonce` was never handed out:
    /// that is corruption, and nothing is changed.
    pub fn give_back(&mut self, nonces: &[u64]) -> StoreResult<()> {
        if let Some(&bad) = nonces.iter().find(|&&n| n >= self.next_nonce) {
            return Err(StoreError::Corrupt(format!(
                "cannot release nonce {bad}: never allocated (next is {})",
                self.next_nonce
            )));
        }
        for &nonce in nonces {
            if let Err(at) = self.released.binary_search(&nonce) {
                self.released.insert(at, nonce);
            }
        }
        Ok(())
    }
}

/// Takes the given nonces out of the released list (for fillers); returns
/// those that were there.
pub async fn take_released(ftx: &mut FencedTx, nonces: &[u64]) -> StoreResult<Vec<u64>> {
    if nonces.is_empty() {
        return Ok(Vec::new());
    }
    let mut cursor = lock(ftx).await?;
    let taken: Vec<u64> = nonces
        .iter()
        .copied()
        .filter(|n| cursor.released.binary_search(n).is_ok())
        .collect();
    cursor.released.retain(|n| !taken.contains(n));
    store(ftx, &cursor).await?;
    Ok(taken)
}

/// Moves the cursor up to the chain's pending nonce when someone else used
/// the key (the `adopt` policy): released nonces the chain has consumed are
/// dropped. Returns the previous `next_nonce` when the cursor moved.
pub async fn adopt_chain_nonce(ftx: &mut FencedTx, chain_pending: u64) -> StoreResult<Option<u64>> {
    let mut cursor = lock(ftx).await?;
    let before = cursor.next_nonce;
    let consumed = cursor.released.partition_point(|n| *n < chain_pending);
    if chain_pending <= before && consumed == 0 {
        return Ok(None);
    }
    cursor.released.drain(..consumed);
    cursor.next_nonce = before.max(chain_pending);
    store(ftx, &cursor).await?;
    Ok((cursor.next_nonce != before).then_some(before))
}

/// Sets PROTECT with a reason: the submitter stops taking new work.
pub async fn set_protect(ftx: &mut FencedTx, reason: &str) -> StoreResult<()> {
    let mut cursor = lock(ftx).await?;
    cursor.protect_reason = Some(reason.to_owned());
    store(ftx, &cursor).await
}

/// Clears PROTECT (an operator's `unprotect`). `chain_pending` is the
/// chain's pending nonce now: the unprotect covers every external use below
/// it, so an intent of ours found lost among those nonces later is no new
/// evidence for PROTECT.
pub async fn clear_protect(ftx: &mut FencedTx, chain_pending: u64) -> StoreResult<()> {
    let mut cursor = lock(ftx).await?;
    cursor.protect_reason = None;
    cursor.protect_covered_below = Some(
        cursor
            .protect_covered_below
            .map_or(chain_pending, |c| c.max(chain_pending)),
    );
    store(ftx, &cursor).await
}
