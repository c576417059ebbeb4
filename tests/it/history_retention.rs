//! History retention (`[history] retain`, README "Data model and leases" and
//! "Idempotency"): final intents older than the period leave with their
//! attempts, feed rows and dead letters, in bounded batches, one node at a
//! time; never an open intent, never a row a live webhook cursor or a young
//! dead letter still needs (the store's rounds; over HTTP, real daemons and
//! the CLI: `history_retention_nodes`).

use std::time::Duration;

use txmgr_actors::store::history_retention::{self, RetentionRules, Round, BATCH, ROUND_LOCK};
use uuid::Uuid;

use crate::common::TestDb;

const MONTH: Duration = Duration::from_secs(30 * 24 * 3600);
const SUBMITTER: &str = "0x4444444444444444444444444444444444444444";

fn rules(max_batches: u32) -> RetentionRules {
    RetentionRules {
        retain: MONTH,
        audit_retain: MONTH,
        max_batches,
    }
}

/// `n` intents in `state` created and finished `days_ago` days ago (UUIDv7
/// ids of that time, nonces from `first_nonce`), each with one attempt, a
/// feed row when final and an audit row; returns their ids in creation order.
pub(crate) async fn history(
    db: &TestDb,
    n: i64,
    state: &str,
    days_ago: i32,
    first_nonce: i64,
) -> Vec<Uuid> {
    sqlx::query_scalar(
        "WITH made AS (
             SELECT i, now() - make_interval(days => $3) + make_interval(secs => i) AS at
               FROM generate_series(1, $1) AS i),
         ids AS (
             SELECT i, at, encode(set_byte(overlay(uuid_send(gen_random_uuid())
                        PLACING substring(int8send((extract(epoch FROM at) * 1000)::bigint) FROM 3)
                        FROM 1 FOR 6), 6, 112 + (i % 16)::int), 'hex')::uuid AS tx_id
               FROM made),
         intents AS (
             INSERT INTO managed_tx (tx_id, chain_id, submitter, request_id, request_hash, intent,
                                     nonce, state, receipt, receipt_block_number, receipt_block_hash,
                                     mined_tx_hash, created_at, updated_at)
             SELECT tx_id, 31337, $5, 'req-' || tx_id, sha256(tx_id::text::bytea), '{}',
                    CASE WHEN $2 = 'REJECTED' THEN NULL ELSE $4 + i - 1 END, $2,
                    CASE WHEN $2 IN ('CONFIRMED', 'FAILED_FINAL') THEN '{}'::jsonb END,
                    CASE WHEN $2 IN ('CONFIRMED', 'FAILED_FINAL') THEN i END,
                    CASE WHEN $2 IN ('CONFIRMED', 'FAILED_FINAL') THEN '0x' || repeat('a', 64) END,
                    CASE WHEN $2 IN ('CONFIRMED', 'FAILED_FINAL') THEN '0x' || repeat('b', 64) END,
                    at, at
               FROM ids RETURNING tx_id, nonce, created_at),
         attempts AS (
             INSERT INTO tx_attempt (tx_id, attempt_no, nonce, tx_hash, raw_tx, gas_price,
                                     gas_limit, kind, fencing_token, created_at)
             SELECT tx_id, 1, nonce, '0x' || encode(sha256(tx_id::text::bytea), 'hex'), '\\x00',
                    1, 21000, 'original', 1, created_at
               FROM intents WHERE nonce IS NOT NULL),
         feed AS (
             INSERT INTO tx_completion (tx_id, chain_id, submitter, state, completed_at)
             SELECT tx_id, 31337, $5, $2, created_at FROM intents
              WHERE $2 IN ('CONFIRMED', 'FAILED_FINAL', 'CANCELLED', 'REJECTED')),
         audit AS (
             INSERT INTO ops_audit (at, actor, action, tx_id, chain_id, outcome)
             SELECT created_at, 'svc', 'tx_rebroadcast', tx_id, 31337, 'done' FROM intents)
         SELECT tx_id FROM intents ORDER BY tx_id",
    )
    .bind(n)
    .bind(state)
    .bind(days_ago)
    .bind(first_nonce)
    .bind(SUBMITTER)
    .fetch_all(&db.pool)
    .await
    .expect("history rows")
}

pub(crate) async fn exists(db: &TestDb, tx_id: Uuid) -> bool {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM managed_tx WHERE tx_id = $1)")
        .bind(tx_id)
        .fetch_one(&db.pool)
        .await
        .expect("exists")
}

async fn rows_of(db: &TestDb, table: &str, tx_id: Uuid) -> i64 {
    sqlx::query_scalar(&format!("SELECT count(*) FROM {table} WHERE tx_id = $1"))
        .bind(tx_id)
        .fetch_one(&db.pool)
        .await
        .expect("count")
}

/// Rounds until one completes its pass; what they removed.
async fn until_pass_completed(db: &TestDb, max_batches: u32) -> u64 {
    let mut removed = 0;
    for _ in 0..1_000 {
        match history_retention::round(&db.pool, "n1", rules(max_batches))
            .await
            .expect("round")
        {
            Round::Ran {
                removed: r,
                pass_completed,
                ..
            } => {
                removed += r.intents;
                if pass_completed {
                    return removed;
                }
            }
            Round::Skipped => panic!("no other node runs rounds here"),
        }
    }
    panic!("the pass never completed")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_final_intents_leave_with_their_rows_and_nothing_still_needed_does() {
    let db = TestDb::migrated().await;
    // Feed order: the rejected ones' rows first, then old's.
    let rejected = history(&db, 3, "REJECTED", 40, 0).await;
    let old = history(&db, 20, "CONFIRMED", 40, 0).await;
    let open = history(&db, 2, "TRACKING", 40, 20).await;
    let young = history(&db, 3, "CONFIRMED", 10, 22).await;
    // A live webhook (written today) has delivered up to old[14]'s feed row:
    // old[15..] are still to deliver.
    sqlx::query(
        "INSERT INTO webhook_cursor (chain_id, webhook, owner_node, fencing_token, expires_at,
                                     cursor_xid, cursor_seq)
         SELECT 31337, 'live', 'n1', 1, now(), xid, seq FROM tx_completion WHERE tx_id = $1",
    )
    .bind(old[14])
    .execute(&db.pool)
    .await
    .expect("live cursor");
    // old[3] has a dead letter written 35 days ago (it leaves with it);
    // old[4] one written yesterday (an operator may still redeliver it).
    for (tx_id, days) in [(old[3], 35), (old[4], 1)] {
        sqlx::query(
            "INSERT INTO webhook_dead_letter (chain_id, webhook, delivery_id, feed_seq, attempts,
                                              last_error, created_at)
             SELECT 31337, 'live', 'd-' || seq, seq, 3, 'HTTP 500',
                    now() - make_interval(days => $2)
               FROM tx_completion WHERE tx_id = $1",
        )
        .bind(tx_id)
        .bind(days)
        .execute(&db.pool)
        .await
        .expect("dead letter");
    }
    sqlx::query(
        "INSERT INTO submitter_nonce_cursor (chain_id, submitter, next_nonce, fencing_token)
         VALUES (31337, $1, 0, 1)",
    )
    .bind(SUBMITTER)
    .execute(&db.pool)
    .await
    .expect("cursor row");

    let removed = until_pass_completed(&db, 100).await;

    let gone: Vec<Uuid> = old[..15]
        .iter()
        .filter(|id| **id != old[4])
        .chain(&rejected)
        .copied()
        .collect();
    assert_eq!(removed, gone.len() as u64);
    for tx_id in &gone {
        assert!(!exists(&db, *tx_id).await, "{tx_id} should be gone");
        for table in ["tx_attempt", "tx_completion", "ops_audit"] {
            assert_eq!(rows_of(&db, table, *tx_id).await, 0, "{table} of {tx_id}");
        }
    }
    let kept: Vec<Uuid> = [old[4]]
        .iter()
        .chain(&old[15..])
        .chain(&open)
        .chain(&young)
        .copied()
        .collect();
    for tx_id in &kept {
        assert!(exists(&db, *tx_id).await, "{tx_id} should stay");
        assert_eq!(rows_of(&db, "tx_attempt", *tx_id).await, 1);
    }
    assert_eq!(
        db.count("SELECT count(*) FROM webhook_dead_letter").await,
        1,
        "the old dead letter left with its intent, the young one stayed"
    );
    // The nonce floor is past every nonce that left: the derived next
    // nonce never goes back.
    assert!(
        db.count("SELECT next_nonce FROM submitter_nonce_cursor")
            .await
            >= 14,
        "the floor rose past the removed nonces"
    );
    let status = history_retention::status(&db.pool).await.expect("status");
    assert!(status.completed_cutoff.is_some(), "{status:?}");
    assert_eq!(status.removed_total, removed as i64);
    assert_eq!(status.last_round_node.as_deref(), Some("n1"));
    // The oldest final intent still stored: old[4] (its dead letter keeps it).
    assert!(status.oldest_final_created_at.is_some());
    assert!(history_retention::aged_out(&db.pool, old[0])
        .await
        .expect("aged out"));
    assert!(!history_retention::aged_out(&db.pool, Uuid::now_v7())
        .await
        .expect("aged out"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_stops_at_its_bound_and_the_next_goes_on_where_it_stopped() {
    let db = TestDb::migrated().await;
    let total = 2 * BATCH + 300;
    history(&db, total, "CANCELLED", 40, 0).await;
    match history_retention::round(&db.pool, "n1", rules(1))
        .await
        .expect("round")
    {
        Round::Ran {
            removed,
            batches,
            pass_completed,
        } => {
            assert_eq!(batches, 1);
            assert_eq!(removed.intents, BATCH as u64);
            assert!(!pass_completed, "more is left: retention is behind");
        }
        Round::Skipped => panic!("no other node"),
    }
    let status = history_retention::status(&db.pool).await.expect("status");
    assert!(status.pass_cutoff.is_some() && status.completed_cutoff.is_none());
    let rest = until_pass_completed(&db, 1).await;
    assert_eq!(rest, (total - BATCH) as u64);
    assert_eq!(db.count("SELECT count(*) FROM managed_tx").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_node_at_a_time_runs_a_round() {
    let db = TestDb::migrated().await;
    let total = 5 * BATCH;
    history(&db, total, "CONFIRMED", 40, 0).await;
    // Another node's round holds the lock: this one does nothing.
    let mut other = db.pool.acquire().await.expect("connection");
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(ROUND_LOCK)
        .execute(&mut *other)
        .await
        .expect("lock");
    assert_eq!(
        history_retention::round(&db.pool, "n1", rules(100))
            .await
            .expect("round"),
        Round::Skipped
    );
    assert_eq!(db.count("SELECT count(*) FROM managed_tx").await, total);
    sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(ROUND_LOCK)
        .execute(&mut *other)
        .await
        .expect("unlock");
    drop(other);

    // Two nodes (pools) start rounds at once, again and again: every round
    // either ran alone or skipped, and together they removed each intent
    // exactly once.
    let second = db.connect_new_pool().await;
    let mut removed = 0;
    let mut skipped = 0;
    while db.count("SELECT count(*) FROM managed_tx").await > 0 {
        let (a, b) = tokio::join!(
            history_retention::round(&db.pool, "n1", rules(1)),
            history_retention::round(&second, "n2", rules(1)),
        );
        for round in [a.expect("n1 round"), b.expect("n2 round")] {
            match round {
                Round::Ran { removed: r, .. } => removed += r.intents,
                Round::Skipped => skipped += 1,
            }
        }
    }
    assert_eq!(removed, total as u64);
    eprintln!("rounds skipped while the other node ran one: {skipped}");
}
