//! History retention (`[history] retain`, README "Data model and leases"):
//! final intents older than the retention period leave with their attempts,
//! feed rows, dead letters and top-up records, in bounded batches, by one
//! node at a time.
//!
//! ```text
//!  round (every node, every interval):  pg_try_advisory_lock ── taken elsewhere ─► Skipped
//!    │ pass_cutoff = now() - retain (kept until the pass reaches its end)
//!    └─ batch × max_batches: the next BATCH ids after resume_after, below the
//!       cutoff's UUIDv7 (primary-key order = creation order) ─► delete the
//!       removable ones ─► resume_after = the window's last id; a short window
//!       ends the pass (completed_cutoff = pass_cutoff)
//! ```
//!
//! An intent is removable when it is final (CONFIRMED, FAILED_FINAL,
//! CANCELLED, REJECTED), was created and last written before the cutoff,
//! and nothing still needs it:
//! - no feed row of it lies ahead of a live webhook's cursor (one written
//!   within the period): the webhook has yet to deliver it;
//! - no dead letter younger than the cutoff refers to its feed rows (older
//!   ones leave with it);
//! - no top-up record of it counts toward a funder's daily cap (younger than
//!   a day) or belongs to a submitter whose balance is low now (the current
//!   crossing counts its top-ups).
//!
//! Its `ops_audit` rows go with it when older than `feed.audit_retain`
//! (an audit trail may outlive the intents it names; the audit retention
//! removes the rest later), its `spend_ledger` rows stay until no spend
//! window counts them (`spend_retention`).
//!
//! Each batch looks at [`BATCH`] ids at most, so a batch costs the same
//! however large the table is and however many old rows must stay; the
//! intents it deletes are locked `SKIP LOCKED` (a row some transaction holds
//! is left for the next pass), and the batch gives up on any other lock
//! after [`LOCK_TIMEOUT_MS`] (the nonce floor's cursor row, under an
//! allocation): the engine never waits on retention.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use super::StoreResult;
use crate::domain::tx_id_time::{uuid_v7_floor, uuid_v7_millis};

/// Ids looked at per batch.
pub const BATCH: i64 = 1_000;

/// How long a batch waits for a lock before it gives up (the next round
/// starts again where it stopped).
pub const LOCK_TIMEOUT_MS: i64 = 200;

/// The session advisory lock that makes one node at a time run a round
/// ("txmgrhis" in ASCII; fixed, so every version takes the same one).
pub const ROUND_LOCK: i64 = 0x7478_6d67_7268_6973;

/// Batches per round at most (each looks at [`BATCH`] intents): a third of
/// a second of deletes or so, so that a round beside the engine is short.
pub const ROUND_BATCHES: u32 = 5;

/// While retention is behind, the next round waits at least this many
/// times as long as the last one ran: deletes take a third of the wall time
/// at most.
pub const CATCH_UP_PAUSE_FACTOR: u32 = 2;

/// The shortest pause between rounds while behind.
pub const CATCH_UP_PAUSE_MIN: Duration = Duration::from_millis(200);

/// How a node paces its rounds (`history.interval`,
/// `history.delete_rate`; README "Data model and leases").
///
/// Catching up is paced by rate, not only by share of time: what a delete
/// costs the engine is mostly its write-ahead log (each old heap page it
/// touches is written whole after a checkpoint), so a third of the wall
/// time at full speed (4,700 intents/s at 10 million) still cut the phase
/// beside it to 0.67 of its throughput.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pace {
    /// The pause after a round that finished its pass, and the longest
    /// pause while behind.
    pub every: Duration,
    /// Intents removed per second at most while behind (at least 1).
    pub delete_rate: u32,
}

impl Pace {
    /// The pause before the next round: `every` when the last round
    /// finished its pass (or did not run); while `behind`, long enough that
    /// the `removed` intents of a round that `took` this long keep to
    /// `delete_rate`, and at least [`CATCH_UP_PAUSE_FACTOR`] × `took` and
    /// [`CATCH_UP_PAUSE_MIN`], at most `every` (a round never waits longer
    /// behind than it would idle).
    pub fn pause_after(&self, took: Duration, removed: u64, behind: bool) -> Duration {
        if !behind {
            return self.every;
        }
        let by_rate = Duration::from_secs_f64(removed as f64 / f64::from(self.delete_rate.max(1)))
            .saturating_sub(took);
        (took * CATCH_UP_PAUSE_FACTOR)
            .max(by_rate)
            .max(CATCH_UP_PAUSE_MIN)
            .min(self.every.max(CATCH_UP_PAUSE_MIN))
    }
}

/// What a round is told to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionRules {
    /// Final intents older than this leave (`history.retain`, not zero).
    pub retain: Duration,
    /// Their audit rows leave with them when older than this
    /// (`feed.audit_retain`; zero keeps every audit row).
    pub audit_retain: Duration,
    /// Batches per round at most.
    pub max_batches: u32,
}

/// Rows one round removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Removed {
    /// Intents (`managed_tx`).
    pub intents: u64,
    /// Their attempts (`tx_attempt`).
    pub attempts: u64,
    /// Their feed rows (`tx_completion`).
    pub feed_rows: u64,
    /// Dead letters of those feed rows.
    pub dead_letters: u64,
    /// Their audit rows older than `feed.audit_retain`.
    pub audit_rows: u64,
    /// Their top-up records (`funds_top_up`).
    pub top_ups: u64,
}

impl Removed {
    fn add(&mut self, other: Removed) {
        self.intents += other.intents;
        self.attempts += other.attempts;
        self.feed_rows += other.feed_rows;
        self.dead_letters += other.dead_letters;
        self.audit_rows += other.audit_rows;
        self.top_ups += other.top_ups;
    }
}

/// How a round went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Round {
    /// Another node is running a round: this node did nothing.
    Skipped,
    /// This node ran one.
    Ran {
        /// What it removed.
        removed: Removed,
        /// Batches it ran.
        batches: u32,
        /// The pass reached its cutoff (otherwise the next round goes on
        /// from where this one stopped: retention is behind).
        pass_completed: bool,
    },
}

/// Retention's progress, as the ops view shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionStatus {
    /// The running pass's cutoff (None between passes).
    pub pass_cutoff: Option<DateTime<Utc>>,
    /// The cutoff of the last pass that reached its end: every removable
    /// intent created before it was removed.
    pub completed_cutoff: Option<DateTime<Utc>>,
    /// When that pass ended.
    pub completed_at: Option<DateTime<Utc>>,
    /// When the last round ran, on which node, and what it removed.
    pub last_round_at: Option<DateTime<Utc>>,
    /// The node that ran it.
    pub last_round_node: Option<String>,
    /// Intents it removed.
    pub last_round_rows: i64,
    /// Intents removed since the table was created.
    pub removed_total: i64,
    /// When the oldest final intent still stored was created.
    pub oldest_final_created_at: Option<DateTime<Utc>>,
}

/// Runs one round unless another node is running one: passes of bounded
/// batches over the intents created before `now() - rules.retain`.
pub async fn round(pool: &PgPool, node_id: &str, rules: RetentionRules) -> StoreResult<Round> {
    let mut conn = pool.acquire().await?;
    let locked: bool = sqlx::query_scalar!(
        r#"SELECT pg_try_advisory_lock($1) AS "locked!""#,
        ROUND_LOCK
    )
    .fetch_one(&mut *conn)
    .await?;
    if !locked {
        return Ok(Round::Skipped);
    }
    let outcome = locked_round(&mut conn, node_id, rules).await;
    let unlocked = sqlx::query_scalar!(
        r#"SELECT pg_advisory_unlock($1) AS "unlocked!""#,
        ROUND_LOCK
    )
    .fetch_one(&mut *conn)
    .await;
    if !matches!(unlocked, Ok(true)) {
        // A session lock must not go back to the pool: closing the
        // connection releases it.
        drop(conn.detach());
    }
    outcome
}

async fn locked_round(
    conn: &mut PgConnection,
    node_id: &str,
    rules: RetentionRules,
) -> StoreResult<Round> {
    let retain_ms = millis(rules.retain);
    let state = sqlx::query!(
        r#"UPDATE history_retention
              SET pass_cutoff = COALESCE(pass_cutoff,
                      now() - make_interval(secs => $1::bigint::float8 / 1000))
            RETURNING pass_cutoff AS "cutoff!", resume_after"#,
        retain_ms,
    )
    .fetch_one(&mut *conn)
    .await?;
    let cutoff = state.cutoff;
    let mut after = state.resume_after.unwrap_or(Uuid::nil());
    let mut removed = Removed::default();
    let mut batches = 0;
    let mut pass_completed = false;
    let mut failure = None;
    while batches < rules.max_batches {
        match batch(conn, cutoff, after, millis(rules.audit_retain)).await {
            Ok(done) => {
                batches += 1;
                removed.add(done.removed);
                match done.last_looked_at {
                    Some(last) if done.looked_at >= BATCH => after = last,
                    _ => {
                        pass_completed = true;
                        break;
                    }
                }
            }
            Err(err) => {
                failure = Some(err);
                break;
            }
        }
    }
    sqlx::query!(
        "UPDATE history_retention
            SET resume_after = CASE WHEN $1 THEN NULL ELSE $2::uuid END,
                pass_cutoff = CASE WHEN $1 THEN NULL ELSE pass_cutoff END,
                completed_cutoff = CASE WHEN $1 THEN pass_cutoff ELSE completed_cutoff END,
                completed_at = CASE WHEN $1 THEN now() ELSE completed_at END,
                last_round_at = now(), last_round_node = $3,
                last_round_rows = $4, removed_total = removed_total + $4",
        pass_completed,
        after,
        node_id,
        i64::try_from(removed.intents).unwrap_or(i64::MAX),
    )
    .execute(&mut *conn)
    .await?;
    match failure {
        Some(err) => Err(err),
        None => Ok(Round::Ran {
            removed,
            batches,
            pass_completed,
        }),
    }
}

/// What one batch looked at and removed.
struct Batch {
    looked_at: i64,
    last_looked_at: Option<Uuid>,
    removed: Removed,
}

/// One batch in its own transaction: the next [`BATCH`] ids after `after`
/// created before `cutoff`, and the removable ones among them deleted with
/// their rows in one statement.
async fn batch(
    conn: &mut PgConnection,
    cutoff: DateTime<Utc>,
    after: Uuid,
    audit_retain_ms: i64,
) -> StoreResult<Batch> {
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    sqlx::query(&format!("SET LOCAL lock_timeout = {LOCK_TIMEOUT_MS}"))
        .execute(&mut *tx)
        .await?;
    let row = sqlx::query!(
        r#"WITH looked AS (
               SELECT tx_id FROM managed_tx
                WHERE tx_id > $1 AND tx_id < $2
                ORDER BY tx_id LIMIT $3),
           live AS (
               SELECT cursor_xid, cursor_seq FROM webhook_cursor
                WHERE updated_at > $4
                ORDER BY cursor_xid, cursor_seq LIMIT 1),
           victims AS (
               SELECT m.tx_id FROM managed_tx m JOIN looked USING (tx_id)
                WHERE m.phase >= 2 AND m.created_at < $4 AND m.updated_at < $4
                  AND NOT EXISTS (
                      SELECT 1 FROM tx_completion c, live l
                       WHERE c.tx_id = m.tx_id
                         AND (c.xid, c.seq) > (l.cursor_xid, l.cursor_seq))
                  AND NOT EXISTS (
                      SELECT 1 FROM tx_completion c
                        JOIN webhook_dead_letter d ON d.feed_seq = c.seq
                       WHERE c.tx_id = m.tx_id AND d.created_at >= $4)
                  AND NOT EXISTS (
                      SELECT 1 FROM funds_top_up f
                       WHERE f.tx_id = m.tx_id
                         AND (f.created_at >= least($4, now() - interval '1 day')
                              OR EXISTS (SELECT 1 FROM submitter_funds s
                                          WHERE s.chain_id = f.chain_id
                                            AND s.submitter = f.submitter AND s.low)))
                FOR UPDATE OF m SKIP LOCKED),
           dead AS (
               DELETE FROM webhook_dead_letter d USING tx_completion c, victims v
                WHERE d.feed_seq = c.seq AND c.tx_id = v.tx_id RETURNING 1),
           feed AS (
               DELETE FROM tx_completion c USING victims v
                WHERE c.tx_id = v.tx_id RETURNING 1),
           attempts AS (
               DELETE FROM tx_attempt a USING victims v
                WHERE a.tx_id = v.tx_id RETURNING 1),
           top_ups AS (
               DELETE FROM funds_top_up f USING victims v
                WHERE f.tx_id = v.tx_id RETURNING 1),
           audit AS (
               DELETE FROM ops_audit a USING victims v
                WHERE $5::bigint > 0 AND a.tx_id = v.tx_id
                  AND a.at < now() - make_interval(secs => $5::bigint::float8 / 1000)
               RETURNING 1),
           intents AS (
               DELETE FROM managed_tx m USING victims v
                WHERE m.tx_id = v.tx_id RETURNING 1)
           SELECT (SELECT count(*) FROM looked) AS "looked_at!",
                  (SELECT tx_id FROM looked ORDER BY tx_id DESC LIMIT 1) AS last_looked_at,
                  (SELECT count(*) FROM intents) AS "intents!",
                  (SELECT count(*) FROM attempts) AS "attempts!",
                  (SELECT count(*) FROM feed) AS "feed_rows!",
                  (SELECT count(*) FROM dead) AS "dead_letters!",
                  (SELECT count(*) FROM audit) AS "audit_rows!",
                  (SELECT count(*) FROM top_ups) AS "top_ups!""#,
        after,
        uuid_v7_floor(cutoff),
        BATCH,
        cutoff,
        audit_retain_ms,
    )
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    Ok(Batch {
        looked_at: row.looked_at,
        last_looked_at: row.last_looked_at,
        removed: Removed {
            intents: count(row.intents),
            attempts: count(row.attempts),
            feed_rows: count(row.feed_rows),
            dead_letters: count(row.dead_letters),
            audit_rows: count(row.audit_rows),
            top_ups: count(row.top_ups),
        },
    })
}

/// Retention's progress and the oldest final intent still stored.
pub async fn status(pool: &PgPool) -> StoreResult<RetentionStatus> {
    let row = sqlx::query!(
        r#"SELECT pass_cutoff, completed_cutoff, completed_at, last_round_at, last_round_node,
                  last_round_rows, removed_total,
                  -- Primary-key order is creation order: the first final
                  -- row, past the few old open ones.
                  (SELECT created_at FROM managed_tx WHERE phase >= 2
                    ORDER BY tx_id LIMIT 1) AS oldest_final
             FROM history_retention"#,
    )
    .fetch_optional(pool)
    .await?;
    Ok(match row {
        Some(row) => RetentionStatus {
            pass_cutoff: row.pass_cutoff,
            completed_cutoff: row.completed_cutoff,
            completed_at: row.completed_at,
            last_round_at: row.last_round_at,
            last_round_node: row.last_round_node,
            last_round_rows: row.last_round_rows,
            removed_total: row.removed_total,
            oldest_final_created_at: row.oldest_final,
        },
        None => RetentionStatus {
            pass_cutoff: None,
            completed_cutoff: None,
            completed_at: None,
            last_round_at: None,
            last_round_node: None,
            last_round_rows: 0,
            removed_total: 0,
            oldest_final_created_at: None,
        },
    })
}

/// Whether an id no row carries may have been removed by retention: it is
/// a UUIDv7 (every intent's id) created before the cutoff of the last pass
/// that reached its end.
pub async fn aged_out(pool: &PgPool, tx_id: Uuid) -> StoreResult<bool> {
    let Some(created) = uuid_v7_millis(tx_id) else {
        return Ok(false);
    };
    let cutoff = sqlx::query_scalar!("SELECT completed_cutoff FROM history_retention")
        .fetch_optional(pool)
        .await?
        .flatten();
    Ok(cutoff.is_some_and(|cutoff| created < cutoff.timestamp_millis()))
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behind_a_round_waits_for_the_rate_and_twice_its_length_within_the_bounds() {
        let pace = Pace {
            every: Duration::from_secs(60),
            delete_rate: 1_000,
        };
        let ms = Duration::from_millis;
        assert_eq!(
            pace.pause_after(ms(300), 5_000, false),
            pace.every,
            "caught up"
        );
        // 5,000 intents at 1,000/s: a 5-second cycle.
        assert_eq!(pace.pause_after(ms(300), 5_000, true), ms(4_700));
        // Few removable rows: twice the round's time.
        assert_eq!(pace.pause_after(ms(300), 100, true), ms(600));
        assert_eq!(pace.pause_after(ms(10), 0, true), CATCH_UP_PAUSE_MIN);
        assert_eq!(
            pace.pause_after(Duration::from_secs(45), 5_000, true),
            pace.every,
            "never longer than idle"
        );
        let short = Pace {
            every: ms(50),
            delete_rate: 0,
        };
        assert_eq!(
            short.pause_after(ms(900), 5_000, true),
            CATCH_UP_PAUSE_MIN,
            "a very short interval still leaves the minimum"
        );
    }
}
