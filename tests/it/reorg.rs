//! Reorgs, dropped transactions and restarts while intents are mined but not
//! yet final.

use std::time::Duration;

use crate::common::{
    invariants,
    node::{config_toml, TestNode},
    wait_until, Anvil, Scenario, TestDb, DEV,
};
use serde_json::json;

const TO: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";

async fn create_n(node: &TestNode, n: usize) {
    for i in 0..n {
        let body = json!({"submitter": DEV, "to": TO, "value": "1", "request_id": format!("x{i}")});
        let (status, answer) = node.request("POST", "/v1/transactions", Some(body)).await;
        assert_eq!(status, 202, "{answer}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn receipts_in_reorged_blocks_are_cleared_and_the_intents_confirm_again() {
    let Scenario { db, anvil, node } =
        Scenario::single_node("finality = { confirmations = 8 }").await;
    create_n(&node, 3).await;
    invariants::wait_mined(&db.pool, 3, Duration::from_secs(30)).await;
    anvil.mine_blocks(2).await;
    let head = anvil.block_number().await;
    wait_until(Duration::from_secs(30), || async {
        node.engine.progress().head() >= head
    })
    .await;
    let before: Vec<(String, i64)> =
        sqlx::query_as("SELECT mined_tx_hash, receipt_block_number FROM managed_tx ORDER BY nonce")
            .fetch_all(&db.pool)
            .await
            .expect("receipts");

    // Replace every block from the first receipt's up (at least 3 blocks).
    let first = before
        .iter()
        .map(|(_, block)| *block as u64)
        .min()
        .expect("receipts");
    let depth = head - first + 1;
    assert!(depth >= 3);
    anvil.rpc("anvil_reorg", json!([depth, []])).await;
    // The orphaned receipts are cleared, the bytes re-broadcast and mined in new blocks.
    db.wait_count(
        &format!("SELECT count(*) FROM managed_tx WHERE receipt_block_number > {head}"),
        3,
    )
    .await;
    anvil.mine_blocks(8).await;
    db.wait_count(
        "SELECT count(*) FROM managed_tx WHERE state = 'CONFIRMED'",
        3,
    )
    .await;
    let after: Vec<(String, i64)> =
        sqlx::query_as("SELECT mined_tx_hash, receipt_block_number FROM managed_tx ORDER BY nonce")
            .fetch_all(&db.pool)
            .await
            .expect("receipts");
    for ((hash_before, block_before), (hash_after, block_after)) in before.iter().zip(&after) {
        assert_eq!(
            hash_before, hash_after,
            "the identical bytes were re-included"
        );
        assert!(block_after > block_before, "re-included in a later block");
    }
    assert_eq!(
        db.count("SELECT count(*) FROM tx_attempt").await,
        3,
        "nothing re-signed"
    );
    assert_eq!(
        db.count("SELECT count(*) FROM tx_completion").await,
        3,
        "one completion each"
    );
    invariants::check(&db.pool, &anvil, DEV, 0).await;
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dropped_transaction_is_rebroadcast_and_confirms() {
    let Scenario { db, anvil, node } = Scenario::single_node_on(
        &["--no-mining"],
        "finality = { confirmations = 1 }\nresubmit_interval = \"1s\"",
    )
    .await;
    create_n(&node, 1).await;
    db.wait_count(
        "SELECT count(*) FROM managed_tx WHERE state = 'TRACKING'",
        1,
    )
    .await;
    let hash: String = sqlx::query_scalar("SELECT tx_hash FROM managed_tx")
        .fetch_one(&db.pool)
        .await
        .expect("hash");
    anvil.rpc("anvil_dropTransaction", json!([hash])).await;
    assert!(
        anvil
            .rpc("eth_getTransactionByHash", json!([hash]))
            .await
            .is_null(),
        "dropped"
    );
    // Back in the pool after resubmit_interval, byte for byte.
    wait_until(Duration::from_secs(30), || async {
        !anvil
            .rpc("eth_getTransactionByHash", json!([hash]))
            .await
            .is_null()
    })
    .await;
    anvil.mine().await;
    db.wait_count(
        "SELECT count(*) FROM managed_tx WHERE state = 'CONFIRMED'",
        1,
    )
    .await;
    invariants::check(&db.pool, &anvil, DEV, 0).await;
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fresh_node_finishes_intents_mined_but_not_final_when_the_first_one_dies() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let config = |id| {
        config_toml(
            &db.url,
            &anvil.rpc_url(),
            id,
            "finality = { confirmations = 5 }",
        )
    };
    let node_a = TestNode::start(&config("a")).await;
    create_n(&node_a, 3).await;
    invariants::wait_mined(&db.pool, 3, Duration::from_secs(30)).await;
    assert_eq!(
        db.count("SELECT count(*) FROM managed_tx WHERE state = 'CONFIRMED'")
            .await,
        0
    );
    node_a.kill();

    let node_b = TestNode::start(&config("b")).await;
    // b takes the lease once a's expires, then finality needs more blocks.
    db.wait_count(
        "SELECT count(*) FROM submitter_lease WHERE owner_node = 'b'",
        1,
    )
    .await;
    anvil.mine_blocks(5).await;
    db.wait_count(
        "SELECT count(*) FROM managed_tx WHERE state = 'CONFIRMED'",
        3,
    )
    .await;
    assert_eq!(db.count("SELECT count(*) FROM tx_completion").await, 3);
    invariants::check(&db.pool, &anvil, DEV, 0).await;
    node_b.stop().await;
}
