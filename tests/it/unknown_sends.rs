//! A nonce whose bytes may be in a pool is never released on a refusal
//! alone, and an intent rejected with its nonce released whose bytes are
//! mined after all ends CONFIRMED with a second completion row (README
//! "How an intent is executed"). Real anvil (`--no-mining`) behind a fault-injecting proxy,
//! real PostgreSQL.

use std::time::Duration;

use crate::common::{
    invariants,
    node::{config_toml, TestNode},
    rpc_proxy::{Faults, RpcProxy},
    txs::{attempts, completion_states, create_transfer, intent, wait_state},
    wait_until, Anvil, TestDb, DEV_ADDRESS_0,
};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

/// A definitive refusal (the node's own fee cap).
const FEE_CAP_REFUSAL: &str = "tx fee (2.00 ether) exceeds the configured cap (1.00 ether)";

fn config(db: &TestDb, rpc_url: &str) -> String {
    config_toml(
        &db.url,
        rpc_url,
        "n1",
        "finality = { confirmations = 1 }\nresubmit_interval = \"10m\"",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refusal_after_an_unknown_answer_keeps_the_nonce_and_the_intent_confirms_when_mined() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let proxy = RpcProxy::start(&anvil.rpc_url(), 7).await;
    // The first send reaches anvil's pool, but its answer is lost.
    proxy.set(Faults {
        send_drop_rate: 1.0,
        ..Faults::default()
    });
    let node = TestNode::start(&config(&db, &proxy.url())).await;
    let tx_id = create_transfer(&node, "pooled", 1).await;
    wait_until(WAIT, || async { proxy.counts().dropped_sends >= 1 }).await;
    // Every later send is refused definitively.
    proxy.set(Faults {
        refuse_sends: Some(FEE_CAP_REFUSAL),
        ..Faults::default()
    });
    wait_until(WAIT, || async {
        let row = intent(&db.pool, tx_id).await;
        assert_ne!(
            row.state, "REJECTED",
            "rejected although its bytes may be pooled"
        );
        row.last_error.is_some_and(|e| e.contains("nonce kept"))
    })
    .await;
    let row = intent(&db.pool, tx_id).await;
    assert_eq!((row.state.as_str(), row.nonce), ("ALLOCATED", Some(0)));

    // The pooled bytes are mined: the client's answer is CONFIRMED, never
    // REJECTED.
    proxy.set(Faults::default());
    anvil.mine().await;
    wait_state(&db.pool, tx_id, "CONFIRMED", WAIT).await;
    assert_eq!(completion_states(&db.pool, tx_id).await, ["CONFIRMED"]);
    node.stop().await;
    invariants::check(&db.pool, &anvil, DEV_ADDRESS_0, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rejected_intent_mined_after_all_ends_confirmed_with_a_second_completion_row() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let proxy = RpcProxy::start(&anvil.rpc_url(), 7).await;
    // A node that refuses what its provider's other node already took: the
    // intent is REJECTED and its nonce released, but its bytes are pooled.
    proxy.set(Faults {
        refuse_sends: Some(FEE_CAP_REFUSAL),
        forward_refused_sends: true,
        ..Faults::default()
    });
    let node = TestNode::start(&config(&db, &proxy.url())).await;
    let released = create_transfer(&node, "released", 1).await;
    wait_state(&db.pool, released, "REJECTED", WAIT).await;
    assert_eq!(intent(&db.pool, released).await.nonce, None);

    // The next intent reuses nonce 0; the pool keeps the first bytes.
    proxy.set(Faults::default());
    let reuser = create_transfer(&node, "reuser", 2).await;
    wait_until(WAIT, || async {
        attempts(&db.pool, reuser)
            .await
            .first()
            .is_some_and(|a| a.nonce == 0 && a.result.is_some())
    })
    .await;
    anvil.mine().await;
    anvil.rpc("evm_setAutomine", json!([true])).await;

    wait_state(&db.pool, released, "CONFIRMED", WAIT).await;
    wait_state(&db.pool, reuser, "CONFIRMED", WAIT).await;
    assert_eq!(
        completion_states(&db.pool, released).await,
        ["REJECTED", "CONFIRMED"],
        "the client learns the correction from the feed"
    );
    let first = intent(&db.pool, released).await;
    assert_eq!(first.nonce, Some(0));
    assert_eq!(
        first.mined_tx_hash.as_deref(),
        Some(attempts(&db.pool, released).await[0].tx_hash.as_str())
    );
    assert_eq!(intent(&db.pool, reuser).await.nonce, Some(1));
    assert_eq!(completion_states(&db.pool, reuser).await, ["CONFIRMED"]);
    node.stop().await;
    invariants::check(&db.pool, &anvil, DEV_ADDRESS_0, 0).await;
}
