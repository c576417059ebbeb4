//! Bounded feed work (README "Completion feed" and "Webhooks"): a webhook's
//! lag is counted up to a cap however long the feed is, and `feed.retain`
//! deletes old rows except those a live webhook cursor or a dead letter
//! still needs, and the cursor rows of webhooks gone from every config.
//! The spend ledger prunes by the longest window any node registered.

use std::time::{Duration, Instant};

use txmgr_actors::{
    domain::ChainId,
    store::{
        feed_retention,
        webhooks::{self, LAG_COUNT_CAP},
    },
};

use crate::common::TestDb;

const SUBMITTER: &str = "0x3333333333333333333333333333333333333333";
const MONTH: Duration = Duration::from_secs(30 * 24 * 3600);

/// `n` funds rows completed `days_ago` days ago; returns their seqs.
async fn rows(db: &TestDb, n: i64, days_ago: i64) -> Vec<i64> {
    sqlx::query_scalar(
        "INSERT INTO tx_completion (chain_id, submitter, state, balance_wei, min_balance_wei, completed_at)
         SELECT 31337, $1, 'LOW_BALANCE', 1, 2, now() - make_interval(days => $3::int)
           FROM generate_series(1, $2) RETURNING seq",
    )
    .bind(SUBMITTER)
    .bind(n)
    .bind(i32::try_from(days_ago).expect("days"))
    .fetch_all(&db.pool)
    .await
    .expect("feed rows")
}

/// A webhook cursor row at `seq` (its transaction's xid), touched
/// `days_ago` days ago.
async fn cursor(db: &TestDb, name: &str, seq: Option<i64>, days_ago: i32) {
    sqlx::query(
        "INSERT INTO webhook_cursor (chain_id, webhook, owner_node, fencing_token, expires_at,
                                     cursor_xid, cursor_seq, updated_at)
         SELECT 31337, $1, 'n1', 1, now() - make_interval(days => $3),
                COALESCE((SELECT xid FROM tx_completion WHERE seq = $2), '0'), COALESCE($2, 0),
                now() - make_interval(days => $3)",
    )
    .bind(name)
    .bind(seq)
    .bind(days_ago)
    .execute(&db.pool)
    .await
    .expect("cursor row");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lag_is_counted_up_to_a_cap_however_long_the_feed() {
    let db = TestDb::migrated().await;
    rows(&db, 3 * LAG_COUNT_CAP, 1).await;
    cursor(&db, "behind", None, 0).await;
    let started = Instant::now();
    let statuses = webhooks::statuses(&db.pool, ChainId::from(31337u64), None)
        .await
        .expect("statuses");
    eprintln!(
        "status query over {} feed rows: {:?}",
        3 * LAG_COUNT_CAP,
        started.elapsed()
    );
    assert_eq!(statuses.len(), 1);
    assert_eq!(
        statuses[0].lag_events, LAG_COUNT_CAP,
        "capped, not counted to the end"
    );
    assert!(statuses[0].lag_seconds >= 86_000.0, "{:?}", statuses[0]);
    // Only the webhooks asked for.
    let none = webhooks::statuses(&db.pool, ChainId::from(31337u64), Some(&["other".into()]))
        .await
        .expect("statuses");
    assert!(none.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_keeps_what_a_live_cursor_or_a_dead_letter_needs() {
    let db = TestDb::migrated().await;
    let old = rows(&db, 2_500, 60).await;
    let fresh = rows(&db, 10, 0).await;
    // A live webhook has delivered up to the 2,000th old row; a removed one
    // (untouched for 60 days) stopped at the start.
    cursor(&db, "live", Some(old[1_999]), 0).await;
    cursor(&db, "removed", None, 60).await;
    // A dead letter refers to the 10th old row.
    sqlx::query(
        "INSERT INTO webhook_dead_letter (chain_id, webhook, delivery_id, feed_seq, attempts, last_error)
         VALUES (31337, 'live', 'live:x', $1, 3, 'HTTP 500')",
    )
    .bind(old[9])
    .execute(&db.pool)
    .await
    .expect("dead letter");

    let pruned = feed_retention::prune(&db.pool, MONTH, 100)
        .await
        .expect("prune");
    assert_eq!(pruned.webhooks, 1, "the removed webhook's cursor row");
    assert_eq!(
        pruned.rows, 1_999,
        "old rows up to the live cursor, minus the dead letter's"
    );
    let left: Vec<i64> = sqlx::query_scalar("SELECT seq FROM tx_completion ORDER BY seq")
        .fetch_all(&db.pool)
        .await
        .expect("rows");
    let mut want = vec![old[9]];
    want.extend(&old[2_000..]);
    want.extend(&fresh);
    assert_eq!(left, want);
    // A round with nothing to delete looks at one batch and stops.
    let again = feed_retention::prune(&db.pool, MONTH, 100)
        .await
        .expect("prune");
    assert_eq!(again.rows, 0);
}

#[tokio::test]
async fn spend_ledger_rows_older_than_every_registered_window_go_in_batches() {
    use txmgr_actors::store::spend_retention;
    let db = TestDb::migrated().await;
    for (count, days_ago) in [(1_500i32, 40i32), (5, 20), (5, 1)] {
        sqlx::query(
            "INSERT INTO spend_ledger (tx_id, chain_id, submitter, value, at)
             SELECT gen_random_uuid(), 31337, $1, 1, now() - $2 * interval '1 day'
               FROM generate_series(1, $3)",
        )
        .bind(SUBMITTER)
        .bind(days_ago as f64)
        .bind(count)
        .execute(&db.pool)
        .await
        .expect("ledger rows");
    }
    let prune = || spend_retention::prune_batch(&db.pool);
    assert_eq!(prune().await.expect("prune"), 0, "no node registered: none");
    // One node counts 2-day windows, another 30-day ones: the longest holds.
    let day = Duration::from_secs(24 * 3600);
    spend_retention::register(&db.pool, "short", 2 * day)
        .await
        .expect("register");
    spend_retention::register(&db.pool, "long", MONTH)
        .await
        .expect("register");
    assert_eq!(prune().await.expect("prune"), 1_000, "one full batch");
    assert_eq!(prune().await.expect("prune"), 500, "the rest: fewer, done");
    assert_eq!(prune().await.expect("prune"), 0);
    assert_eq!(db.count("SELECT count(*) FROM spend_ledger").await, 10);
    // The long one is re-registered shorter (a reload): its rows go.
    spend_retention::register(&db.pool, "long", day)
        .await
        .expect("register");
    assert_eq!(
        spend_retention::prune(&db.pool, 10).await.expect("prune"),
        5
    );
    assert_eq!(db.count("SELECT count(*) FROM spend_ledger").await, 5);
}
