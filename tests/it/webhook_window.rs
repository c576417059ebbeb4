//! One submitter's retried event does not hold the others back (README
//! "Webhooks"): the receiver answers 503 with `Retry-After: 3600` for every
//! event of submitter A; the 3,000 events of submitter B that follow A's
//! first one (more than a holder ever kept in memory) all arrive, in order,
//! while A's head waits for its retry — and the durable cursor stays below
//! A's head, so nothing of A is skipped.

use std::time::Duration;

use crate::common::{receiver::Receiver, wait_until, Scenario};

const SECRET_VAR: &str = "TXMGR_TEST_WINDOW_SECRET";
const A: &str = "0x1111111111111111111111111111111111111111";
const B: &str = "0x2222222222222222222222222222222222222222";

/// Funds events (no transaction behind them) of `submitter`, `n` of them,
/// committed at once.
async fn feed_rows(db: &crate::common::TestDb, submitter: &str, n: i64) {
    sqlx::query(
        "INSERT INTO tx_completion (chain_id, submitter, state, balance_wei, min_balance_wei)
         SELECT 31337, $1, 'LOW_BALANCE', i, 1000000 FROM generate_series(1, $2) i",
    )
    .bind(submitter)
    .bind(n)
    .execute(&db.pool)
    .await
    .expect("feed rows");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_submitter_refused_for_an_hour_does_not_hold_back_three_thousand_of_another() {
    std::env::set_var(SECRET_VAR, "window-secret");
    let receiver = Receiver::always_ok().await;
    receiver.refuse_submitter(A, 3600);
    let Scenario {
        db,
        anvil: _anvil,
        node,
    } = Scenario::single_node(&format!(
        "\n[[webhooks]]\nname = \"w\"\nurl = \"{}\"\nsecret_env = \"{SECRET_VAR}\"\n\
         backoff_initial = \"50ms\"\nstart_at = \"beginning\"\nconcurrency = 4\n",
        receiver.url
    ))
    .await;

    feed_rows(&db, A, 1).await;
    // A's head has been tried (and refused) before B's events exist.
    wait_until(Duration::from_secs(30), || async {
        receiver.received().iter().any(|r| r.json["submitter"] == A)
    })
    .await;
    feed_rows(&db, B, 3_000).await;
    wait_until(Duration::from_secs(120), || async {
        receiver
            .delivered()
            .iter()
            .filter(|r| r.json["submitter"] == B)
            .count()
            >= 3_000
    })
    .await;
    let delivered: Vec<i64> = receiver
        .delivered()
        .iter()
        .filter(|r| r.json["submitter"] == B)
        .filter_map(|r| r.json["balance_wei"].as_str().and_then(|v| v.parse().ok()))
        .collect();
    assert_eq!(
        delivered,
        (1..=3_000).collect::<Vec<_>>(),
        "B's in order, once each"
    );
    assert!(
        receiver
            .delivered()
            .iter()
            .all(|r| r.json["submitter"] != A),
        "A was never answered 2xx"
    );
    // The durable cursor stays below A's head: a new holder would still
    // deliver it.
    let a_seq: i64 = sqlx::query_scalar("SELECT seq FROM tx_completion WHERE submitter = $1")
        .bind(A)
        .fetch_one(&db.pool)
        .await
        .expect("A's row");
    let cursor_seq: i64 =
        sqlx::query_scalar("SELECT cursor_seq FROM webhook_cursor WHERE webhook = 'w'")
            .fetch_one(&db.pool)
            .await
            .expect("cursor");
    assert!(
        cursor_seq < a_seq,
        "cursor {cursor_seq} passed A's head {a_seq}"
    );
    node.stop().await;
}
