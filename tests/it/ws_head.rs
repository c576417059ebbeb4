//! With `chain.ws_url`, new heads arrive over a WebSocket `newHeads`
//! subscription: receipts and finality follow at once even though polling
//! is slowed to a fallback far longer than the test's deadline.

use std::time::Duration;

use crate::common::{
    node::{config_toml, TestNode},
    wait_until, Anvil, TestDb, DEV,
};
use serde_json::json;

const TO: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn heads_from_a_websocket_subscription_drive_receipts_and_finality() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let ws_url = anvil.rpc_url().replace("http://", "ws://");
    let toml = config_toml(
        &db.url,
        &anvil.rpc_url(),
        "n1",
        "finality = { confirmations = 2 }",
    )
    .replace(
        "poll_interval = \"200ms\"",
        &format!("poll_interval = \"60s\"\nws_url = \"{ws_url}\""),
    );
    let node = TestNode::start(&toml).await;
    // Polling runs once at start and then only every 60 s: from here on,
    // WebSocket heads are what wake the watcher (finality needs them; the
    // slow sweep could find a receipt but never confirms).
    let body = json!({"submitter": DEV, "to": TO, "value": "1", "request_id": "ws"});
    let (status, answer) = node.request("POST", "/v1/transactions", Some(body)).await;
    assert_eq!(status, 202, "{answer}");
    let mined_in = crate::common::eventually(
        Duration::from_secs(15),
        Duration::from_millis(100),
        || async {
            sqlx::query_scalar::<_, Option<i64>>("SELECT receipt_block_number FROM managed_tx")
                .fetch_one(&db.pool)
                .await
                .ok()
                .flatten()
        },
    )
    .await;
    anvil.mine().await;
    wait_until(Duration::from_secs(15), || async {
        let state: String = sqlx::query_scalar("SELECT state FROM managed_tx")
            .fetch_one(&db.pool)
            .await
            .unwrap_or_default();
        state == "CONFIRMED"
    })
    .await;
    assert!(node.engine.progress().head() > mined_in as u64);
    node.stop().await;
}
