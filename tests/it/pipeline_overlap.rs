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
    wait_until, Anvil, TestDb,
};

/// Intents per batch, and batches in the test.
const BATCH: i64 = 4;
const BATCHES: i64 = 4;

/// Each send request is held this long (a batch's JSON-RPC batch request
/// once, or each of its transactions with `batch_sends = false`): far
/// longer than the next batch needs to be read, signed and written.
const SEND_DELAY: Duration = Duration::from_millis(250);

/// A proxy in front of `anvil` that holds every send request for `delay`.
async fn slow_sends(anvil: &Anvil, seed: u64, delay: Duration) -> RpcProxy {
    let proxy = RpcProxy::start(&anvil.rpc_url(), seed).await;
    proxy.set(Faults {
        send_delay: Some(delay),
        ..Faults::default()
    });
    proxy
}

/// A node whose leader batches [`BATCH`] intents, with room for the whole
/// backlog in flight, on the chain at `rpc_url`.
async fn node_with_full_batches(db: &TestDb, rpc_url: &str) -> TestNode {
    TestNode::start(&config_toml(
        &db.url,
        rpc_url,
        "n1",
        &format!("batch_size = {BATCH}\nmax_in_flight = 200"),
    ))
    .await
}

/// The proxy saw each of the `count` attempts sent once, in nonce order.
async fn assert_sent_once_each_in_nonce_order(db: &TestDb, proxy: &RpcProxy, count: i64) {
    let by_nonce: Vec<String> = sqlx::query_scalar(
        "SELECT '0x' || encode(raw_tx, 'hex') FROM tx_attempt ORDER BY nonce, attempt_no",
    )
    .fetch_all(&db.pool)
    .await
    .expect("attempts");
    assert_eq!(by_nonce.len() as i64, count);
    assert_eq!(
        proxy.sent_raw(),
        by_nonce,
        "sends in nonce order, once each"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_next_batch_is_written_while_the_previous_one_is_sent_and_sends_stay_in_nonce_order() {
    let db = TestDb::migrated().await;
    // Interval mining: anvil's automine can strand a burst of same-sender
    // transactions in its queue (a pool race of anvil's, not a chain rule).
    let anvil = Anvil::start_with(&["--block-time", "0.2"]).await;
    let proxy = slow_sends(&anvil, 11, SEND_DELAY).await;
    let node = node_with_full_batches(&db, &proxy.url()).await;

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
    assert_sent_once_each_in_nonce_order(&db, &proxy, BATCH * BATCHES).await;
    node.stop().await;
    invariants::check(&db.pool, &anvil, DEV, 0).await;
}

/// Each send request is held this long in the record test: the window in
/// which the test takes batch 0's rows before its answers come back.
const HELD_SEND_DELAY: Duration = Duration::from_secs(1);

/// A batch's record does not hold back the next batch's sends: while batch
/// 0's answers cannot be recorded (the test holds its intents' rows), batch
/// 1 is sent, still after batch 0 and in nonce order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_next_batch_is_sent_while_the_previous_ones_answers_are_recorded() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--block-time", "0.2"]).await;
    let proxy = slow_sends(&anvil, 12, HELD_SEND_DELAY).await;
    // The held record waits on the test's row locks (and holds its fence's
    // share lock on the lease row, which delays renewals meanwhile): a lock
    // timeout and a lease long enough for that.
    let toml = config_toml(
        &db.url,
        &proxy.url(),
        "n1",
        &format!("batch_size = {BATCH}\nmax_in_flight = 200"),
    )
    .replace(
        "max_connections = 8",
        "max_connections = 8\nlock_timeout = \"120s\"",
    )
    .replace("duration = \"3s\"", "duration = \"30s\"");
    let node = TestNode::start(&toml).await;
    paused_backlog(&node, "r", BATCH * 3).await;

    // Batch 0 is written and being sent: hold its rows, so its record waits.
    let batch_zero = |pool: sqlx::PgPool| async move {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM managed_tx WHERE nonce < $1 AND state = 'ALLOCATED'",
        )
        .bind(BATCH)
        .fetch_one(&pool)
        .await
        .expect("batch 0")
    };
    wait_until(Duration::from_secs(30), || async {
        batch_zero(db.pool.clone()).await == BATCH
    })
    .await;
    let mut holder = db.pool.begin().await.expect("begin");
    sqlx::query("SELECT 1 FROM managed_tx WHERE nonce < $1 FOR UPDATE")
        .bind(BATCH)
        .execute(&mut *holder)
        .await
        .expect("hold batch 0");

    // Batch 1 reaches the node while batch 0's answers are not recorded.
    wait_until(Duration::from_secs(30), || async {
        proxy.sent_raw().len() as i64 >= 2 * BATCH
    })
    .await;
    assert_eq!(
        batch_zero(db.pool.clone()).await,
        BATCH,
        "batch 0's answers still unrecorded when batch 1 was sent"
    );
    holder.rollback().await.expect("release batch 0");

    invariants::wait_mined(&db.pool, BATCH * 3, Duration::from_secs(60)).await;
    assert_sent_once_each_in_nonce_order(&db, &proxy, BATCH * 3).await;
    node.stop().await;
    invariants::check(&db.pool, &anvil, DEV, 0).await;
}

/// A backlog longer than one cycle's batches (the cycle returns to the
/// actor's mailbox after a few) is sent whole with nothing else to wake
/// the leader — no new create, and no receipt (nothing is mined): each
/// cycle says more is waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backlog_longer_than_one_cycle_is_sent_whole_with_nothing_else_to_wake_the_leader() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let node = node_with_full_batches(&db, &anvil.rpc_url()).await;
    // Three cycles' worth of full batches, released at once.
    let total = BATCH * 12;
    paused_backlog(&node, "b", total).await;
    wait_until(Duration::from_secs(60), || async {
        let tracking: i64 =
            sqlx::query_scalar("SELECT count(*) FROM managed_tx WHERE state = 'TRACKING'")
                .fetch_one(&db.pool)
                .await
                .expect("count");
        tracking == total
    })
    .await;
    node.stop().await;
}
