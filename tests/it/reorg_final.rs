//! A reorg deeper than finality (README "Receipts, finality and reorgs"):
//! the block holding CONFIRMED intents leaves the canonical chain. The
//! intents are re-opened — feed correction `REORGED_OUT`, their stored bytes
//! re-broadcast (same hash, same nonce) — and confirm again; the intents
//! queued behind the gap in the chain's nonces then confirm too, instead of
//! ending STUCK. Found by the head watcher's reorg, or, when no node saw the
//! reorg (it happened while none ran), by the leader's sweep.

use std::time::Duration;

use crate::common::{
    invariants,
    node::{config_toml, TestNode},
    wait_until, Anvil, TestDb, DEV,
};
use serde_json::json;
use txmgr_testkit::parse_quantity;

const TO: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";
const WITHIN: Duration = Duration::from_secs(90);

async fn create(node: &TestNode, prefix: &str, n: usize) {
    for i in 0..n {
        let body =
            json!({"submitter": DEV, "to": TO, "value": "1", "request_id": format!("{prefix}{i}")});
        let (status, answer) = node.request("POST", "/v1/transactions", Some(body)).await;
        assert_eq!(status, 202, "{answer}");
    }
}

/// The chain's latest nonce of the dev submitter.
async fn nonce(anvil: &Anvil) -> u64 {
    parse_quantity(
        &anvil
            .rpc("eth_getTransactionCount", json!([DEV, "latest"]))
            .await,
    )
}

async fn count(db: &TestDb, sql: &str) -> i64 {
    db.count(sql).await
}

/// Mines a block per poll until `done`, within [`WITHIN`].
async fn mine_until<F, Fut>(anvil: &Anvil, done: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    wait_until(WITHIN, || async {
        if done().await {
            return true;
        }
        anvil.mine().await;
        false
    })
    .await;
}

async fn scenario(restart: bool) {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let toml = config_toml(
        &db.url,
        &anvil.rpc_url(),
        "n1",
        "finality = { confirmations = 2 }\nresubmit_interval = \"2s\"",
    );
    let node = TestNode::start(&toml).await;

    // 10 intents mined in one block and CONFIRMED at 2 confirmations.
    create(&node, "x", 10).await;
    db.wait_count(
        "SELECT count(*) FROM managed_tx WHERE state = 'TRACKING'",
        10,
    )
    .await;
    mine_until(&anvil, || async {
        count(
            &db,
            "SELECT count(*) FROM managed_tx WHERE state = 'CONFIRMED'",
        )
        .await
            == 10
    })
    .await;
    let head = anvil.block_number().await;
    wait_until(WITHIN, || async { node.engine.progress().head() >= head }).await;
    let node = if restart {
        // No node runs while the chain reorganises: nobody sees the reorg.
        node.stop().await;
        None
    } else {
        Some(node)
    };

    // Depth 4 or more, no transactions: the block holding the 10 is gone
    // (mining while waiting for finality may have put it deeper than 4).
    let block: i64 = sqlx::query_scalar("SELECT min(receipt_block_number) FROM managed_tx")
        .fetch_one(&db.pool)
        .await
        .expect("receipt block");
    let depth = (head - u64::try_from(block).expect("block") + 1).max(4);
    anvil.rpc("anvil_reorg", json!([depth, []])).await;
    assert_eq!(nonce(&anvil).await, 0, "the reorg removed them");
    let node = match node {
        Some(node) => node,
        None => TestNode::start(&toml).await,
    };

    // 10 more behind the gap; mining resumes.
    create(&node, "y", 10).await;
    mine_until(&anvil, || async {
        count(
            &db,
            "SELECT count(*) FROM managed_tx WHERE state = 'CONFIRMED'",
        )
        .await
            == 20
    })
    .await;
    assert_eq!(nonce(&anvil).await, 20);
    // The feed: one correction per re-opened intent, between its two
    // CONFIRMED rows; nothing else (no STUCK on the way).
    let corrections = count(
        &db,
        "SELECT count(*) FROM tx_completion WHERE state = 'REORGED_OUT' AND request_id LIKE 'x%'",
    )
    .await;
    assert_eq!(corrections, 10);
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM tx_completion WHERE state = 'REORGED_OUT'"
        )
        .await,
        10
    );
    let order: Vec<String> = sqlx::query_scalar(
        "SELECT state FROM tx_completion WHERE request_id = 'x3' ORDER BY xid, seq",
    )
    .fetch_all(&db.pool)
    .await
    .expect("feed");
    assert_eq!(order, ["CONFIRMED", "REORGED_OUT", "CONFIRMED"]);
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM tx_completion WHERE state = 'STUCK'"
        )
        .await,
        0
    );
    assert_eq!(
        count(&db, "SELECT count(*) FROM tx_attempt").await,
        20,
        "nothing re-signed: the stored bytes were sent again"
    );
    invariants::check(&db.pool, &anvil, DEV, 0).await;
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn confirmed_intents_reorged_out_past_finality_are_reopened_and_confirm_again() {
    scenario(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reorg_past_finality_that_no_node_saw_is_healed_by_the_sweep() {
    scenario(true).await;
}
