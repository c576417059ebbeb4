//! One submitter's batches overlap: batch k+1 is read, signed and written
//! while batch k is being sent, and the sends still reach the node in nonce
//! order, batch after batch (README "How an intent is executed"). Real
//! anvil behind a proxy that makes every send request slow, real PostgreSQL.

use std::time::Duration;

use crate::common::{
    intents::{paused_backlog, DEV},
    invariants,
    node::{config_toml, TestNode},
    rpc_proxy::{Faults, RpcProxy},
    Anvil, TestDb,
};

/// Intents per batch, and batches in the test.
const BATCH: i64 = 4;
const BATCHES: i64 = 4;

/// Each send request is held this long (a batch's JSON-RPC batch request
/// once, or each of its transactions with `batch_sends = false`): far
/// longer than the next batch needs to be read, signed and written.
const SEND_DELAY: Duration = Duration::from_millis(250);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_next_batch_is_written_while_the_previous_one_is_sent_and_sends_stay_in_nonce_order() {
    let db = TestDb::migrated().await;
    // Interval mining: anvil's automine can strand a burst of same-sender
    // transactions in its queue (a pool race of anvil's, not a chain rule).
    let anvil = Anvil::start_with(&["--block-time", "0.2"]).await;
    let proxy = RpcProxy::start(&anvil.rpc_url(), 11).await;
    proxy.set(Faults {
        send_delay: Some(SEND_DELAY),
        ..Faults::default()
    });
    let node = TestNode::start(&config_toml(
        &db.url,
        &proxy.url(),
        "n1",
        &format!("batch_size = {BATCH}\nmax_in_flight = 200"),
    ))
    .await;

    // A backlog of full batches, released at once.
    paused_backlog(&node, "o", BATCH * BATCHES).await;
    invariants::wait_mined(&db.pool, BATCH * BATCHES, Duration::from_secs(60)).await;

    // Every batch after the first was durable (its attempts written) before
    // the batch before it was recorded as sent: the record commits only
    // after the last of that batch's sends was answered.
    let overlapped: Vec<(i64, bool)> = sqlx::query_as(
        "SELECT n.batch, min(a.created_at) < (SELECT max(m.last_submit_at) FROM managed_tx m
                                              WHERE m.nonce / $1 = n.batch - 1)
           FROM (SELECT DISTINCT nonce / $1 AS batch FROM managed_tx) n
           JOIN tx_attempt a ON a.nonce / $1 = n.batch
          WHERE n.batch > 0
          GROUP BY n.batch ORDER BY n.batch",
    )
    .bind(BATCH)
    .fetch_all(&db.pool)
    .await
    .expect("batch timings");
    assert_eq!(
        overlapped,
        (1..BATCHES).map(|b| (b, true)).collect::<Vec<_>>(),
        "batch k+1 written while batch k was sent"
    );

    // One send per attempt, reaching the node in nonce order.
    let by_nonce: Vec<String> = sqlx::query_scalar(
        "SELECT '0x' || encode(raw_tx, 'hex') FROM tx_attempt ORDER BY nonce, attempt_no",
    )
    .fetch_all(&db.pool)
    .await
    .expect("attempts");
    assert_eq!(by_nonce.len() as i64, BATCH * BATCHES);
    assert_eq!(
        proxy.sent_raw(),
        by_nonce,
        "sends in nonce order, once each"
    );
    node.stop().await;
    invariants::check(&db.pool, &anvil, DEV, 0).await;
}
