//! A leader's batch of transactions goes out as one JSON-RPC batch request,
//! its calls in nonce order (`chain.batch_sends`, README "How an intent is
//! executed"); an endpoint that refuses batches gets one request per
//! transaction from its first refusal on, and nothing is lost either way.
//! Real anvil and Hardhat behind the fault proxy, real PostgreSQL.

use std::time::Duration;

use crate::common::{
    dev_chain::{DevNode, Mining},
    hardhat::Hardhat,
    intents::{paused_backlog, DEV},
    invariants,
    node::{config_toml, TestNode},
    rpc_proxy::{Faults, ProxyCounts, RpcProxy},
    Anvil, TestDb,
};

/// Intents per leader batch, and batches in the backlog.
const BATCH: i64 = 16;
const BATCHES: i64 = 4;

/// Queues a backlog of full batches while the submitter is paused, releases
/// it at once, waits until every intent is mined and checks the chain; the
/// proxy's counts, and whether every send reached the node once, in nonce
/// order.
async fn backlog_through(chain: &impl DevNode, db: &TestDb, proxy: &RpcProxy) -> ProxyCounts {
    let node = TestNode::start(&config_toml(
        &db.url,
        &proxy.url(),
        "n1",
        &format!("batch_size = {BATCH}\nmax_in_flight = 200\nresubmit_interval = \"1h\""),
    ))
    .await;
    paused_backlog(&node, "b", BATCH * BATCHES).await;
    invariants::wait_mined(&db.pool, BATCH * BATCHES, Duration::from_secs(90)).await;

    let by_nonce: Vec<String> = sqlx::query_scalar(
        "SELECT '0x' || encode(raw_tx, 'hex') FROM tx_attempt ORDER BY nonce, attempt_no",
    )
    .fetch_all(&db.pool)
    .await
    .expect("attempts");
    assert_eq!(by_nonce.len() as i64, BATCH * BATCHES, "one attempt each");
    assert_eq!(
        proxy.sent_raw(),
        by_nonce,
        "every send reached the node once, in nonce order"
    );
    node.stop().await;
    invariants::check(&db.pool, chain, DEV, 0).await;
    proxy.counts()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leaders_batch_goes_out_as_one_json_rpc_batch_on_anvil() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--block-time", "0.2"]).await;
    let proxy = RpcProxy::start(&anvil.rpc_url(), 21).await;
    let counts = backlog_through(&anvil, &db, &proxy).await;
    assert!(
        counts.send_batches >= 1,
        "full batches went out as JSON-RPC batches: {counts:?}"
    );
    assert!(
        counts.send_requests < (BATCH * BATCHES) as u64,
        "fewer send requests than transactions: {counts:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leaders_batch_goes_out_as_one_json_rpc_batch_on_hardhat() {
    let db = TestDb::migrated().await;
    // Hardhat's automine refuses a nonce that arrives before its predecessor.
    let hardhat = Hardhat::start(Mining::Interval(Duration::from_millis(200))).await;
    let proxy = RpcProxy::start(&hardhat.rpc_url(), 22).await;
    let counts = backlog_through(&hardhat, &db, &proxy).await;
    assert!(
        counts.send_batches >= 1,
        "full batches went out as JSON-RPC batches: {counts:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_endpoint_refusing_batches_gets_one_request_per_transaction() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--block-time", "0.2"]).await;
    let proxy = RpcProxy::start(&anvil.rpc_url(), 23).await;
    proxy.set(Faults {
        refuse_batches: true,
        ..Faults::default()
    });
    let counts = backlog_through(&anvil, &db, &proxy).await;
    assert_eq!(
        counts.refused_batches, 1,
        "refused once, then never tried again: {counts:?}"
    );
    assert_eq!(counts.send_batches, 0, "{counts:?}");
    assert_eq!(
        counts.send_requests,
        (BATCH * BATCHES) as u64,
        "one request per transaction: {counts:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn batch_sends_off_sends_one_request_per_transaction() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--block-time", "0.2"]).await;
    let proxy = RpcProxy::start(&anvil.rpc_url(), 24).await;
    let db_url = db.url.clone();
    let toml = config_toml(&db_url, &proxy.url(), "n1", "max_in_flight = 200")
        .replace("chain_id = ", "batch_sends = false\nchain_id = ");
    assert!(toml.contains("batch_sends = false"), "{toml}");
    let node = TestNode::start(&toml).await;
    paused_backlog(&node, "s", BATCH).await;
    invariants::wait_mined(&db.pool, BATCH, Duration::from_secs(60)).await;
    node.stop().await;
    let counts = proxy.counts();
    assert_eq!(counts.send_batches, 0, "{counts:?}");
    assert_eq!(counts.send_requests, BATCH as u64, "{counts:?}");
    invariants::check(&db.pool, &anvil, DEV, 0).await;
}
