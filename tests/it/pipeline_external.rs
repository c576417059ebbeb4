//! External use of a submitter's key (README "How an intent is executed"): `protect` stops
//! the submitter and refuses creates with 423; `adopt` skips ahead, and an
//! intent whose nonce someone else consumed goes back to QUEUED.

use std::time::Duration;

use crate::common::{
    invariants,
    node::{config_toml, TestNode},
    parse_quantity, transfer, wait_until, Client, DevChain, DevNode, Mining, Scenario, TestDb, DEV,
};
use serde_json::json;

const OTHER: &str = "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc";

/// Sends a transaction from the submitter's key behind txmgr's back.
async fn send_externally(chain: &impl DevNode, extra: serde_json::Value) {
    let mut tx = json!({"from": DEV, "to": OTHER, "value": "0x1"});
    if let (Some(tx), Some(extra)) = (tx.as_object_mut(), extra.as_object()) {
        tx.extend(extra.clone());
    }
    chain.rpc("eth_sendTransaction", json!([tx])).await;
}

async fn chain_nonce(chain: &impl DevNode) -> u64 {
    parse_quantity(
        &chain
            .rpc("eth_getTransactionCount", json!([DEV, "latest"]))
            .await,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn protect_stops_the_submitter_and_refuses_creates_with_423() {
    let Scenario { db, anvil, node } =
        Scenario::single_node("on_external_nonce = \"protect\"").await;
    let (status, _) = node
        .request("POST", "/v1/transactions", Some(transfer("before")))
        .await;
    assert_eq!(status, 202);
    invariants::wait_mined(&db.pool, 1, Duration::from_secs(30)).await;

    send_externally(&anvil, json!({})).await;
    wait_until(Duration::from_secs(30), || async {
        let reason: Option<String> =
            sqlx::query_scalar("SELECT protect_reason FROM submitter_nonce_cursor")
                .fetch_one(&db.pool)
                .await
                .unwrap_or(None);
        reason.is_some()
    })
    .await;
    // The actor publishes PROTECT to its handle right after the commit.
    wait_until(Duration::from_secs(10), || async {
        node.engine
            .handles()
            .iter()
            .all(|h| h.status().protect_reason().is_some())
    })
    .await;
    let (status, body) = node
        .request("POST", "/v1/transactions", Some(transfer("after")))
        .await;
    assert_eq!(status, 423, "{body}");
    assert_eq!(body["error"]["code"], "submitter_protected");
    assert_eq!(
        chain_nonce(&anvil).await,
        2,
        "txmgr sent nothing after the external transaction"
    );
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn adopt_skips_past_an_external_transaction_and_keeps_working() {
    adopt_skips_past_external_transactions(Client::Anvil).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn adopt_skips_past_an_external_transaction_and_keeps_working_on_hardhat() {
    adopt_skips_past_external_transactions(Client::Hardhat).await;
}

async fn adopt_skips_past_external_transactions(client: Client) {
    let db = TestDb::migrated().await;
    let chain = DevChain::start(client, Mining::Auto).await;
    let node = TestNode::start(&config_toml(&db.url, &chain.rpc_url(), "n1", "")).await;
    let (status, _) = node
        .request("POST", "/v1/transactions", Some(transfer("a0")))
        .await;
    assert_eq!(status, 202);
    invariants::wait_mined(&db.pool, 1, Duration::from_secs(30)).await;
    send_externally(&chain, json!({})).await;
    send_externally(&chain, json!({})).await;
    // The leader notices on its next chain check and moves its cursor up.
    wait_until(Duration::from_secs(30), || async {
        let next: i64 = sqlx::query_scalar("SELECT next_nonce FROM submitter_nonce_cursor")
            .fetch_one(&db.pool)
            .await
            .unwrap_or(0);
        next == 3
    })
    .await;
    for id in ["a1", "a2"] {
        let (status, _) = node
            .request("POST", "/v1/transactions", Some(transfer(id)))
            .await;
        assert_eq!(status, 202);
    }
    invariants::wait_mined(&db.pool, 3, Duration::from_secs(30)).await;
    let nonces: Vec<i64> = sqlx::query_scalar("SELECT nonce FROM managed_tx ORDER BY nonce")
        .fetch_all(&db.pool)
        .await
        .expect("nonces");
    assert_eq!(nonces, vec![0, 3, 4]);
    assert_eq!(chain_nonce(&chain).await, 5);
    // The leader's copy of its cursor still said 1 when it drew for a1: that
    // draw was discarded unsent at its write, and drawn again from 3.
    let (_, metrics) = node.text("/metrics").await;
    let conflicts: f64 = metrics
        .lines()
        .find(|line| line.starts_with("txmgr_presign_conflicts_total"))
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0.0);
    assert!(conflicts >= 1.0, "{metrics}");
    node.stop().await;
}

/// Our pending transaction is replaced in the pool by an external one at the
/// same nonce; once that is mined, the intent never executed, so it goes back
/// to QUEUED and is sent again with a new nonce.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_intent_whose_nonce_was_taken_externally_is_requeued_and_sent_again() {
    nonce_taken_externally_is_requeued(Client::Anvil).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_intent_whose_nonce_was_taken_externally_is_requeued_and_sent_again_on_hardhat() {
    nonce_taken_externally_is_requeued(Client::Hardhat).await;
}

async fn nonce_taken_externally_is_requeued(client: Client) {
    let db = TestDb::migrated().await;
    let chain = DevChain::start(client, Mining::Manual).await;
    let node = TestNode::start(&config_toml(&db.url, &chain.rpc_url(), "n1", "")).await;
    let (status, body) = node
        .request("POST", "/v1/transactions", Some(transfer("victim")))
        .await;
    assert_eq!(status, 202);
    let tx_id = body["tx_id"].as_str().expect("tx_id").to_owned();
    wait_until(Duration::from_secs(30), || async {
        let state: String = sqlx::query_scalar("SELECT state FROM managed_tx")
            .fetch_one(&db.pool)
            .await
            .unwrap_or_default();
        state == "TRACKING"
    })
    .await;
    // A far pricier transaction at nonce 0 replaces ours in the pool.
    send_externally(
        &chain,
        json!({"nonce": "0x0", "maxFeePerGas": "0x174876e800", "maxPriorityFeePerGas": "0xba43b7400"}),
    )
    .await;
    chain.mine().await;
    // Mine only once the requeued intent is in the node's pool (accepted at
    // its new nonce): the node does not mine by itself here.
    wait_until(Duration::from_secs(30), || async {
        let row: Option<(Option<i64>, String)> =
            sqlx::query_as("SELECT nonce, state FROM managed_tx")
                .fetch_optional(&db.pool)
                .await
                .unwrap_or(None);
        row.is_some_and(|(nonce, state)| nonce == Some(1) && state == "TRACKING")
    })
    .await;
    chain.mine().await;
    invariants::wait_mined(&db.pool, 1, Duration::from_secs(30)).await;
    let (status, body) = node
        .request("GET", &format!("/v1/transactions/{tx_id}"), None)
        .await;
    assert_eq!(status, 200);
    assert_eq!(body["nonce"], 1);
    assert_eq!(body["attempts"], 2, "one attempt per nonce it held");
    assert_eq!(chain_nonce(&chain).await, 2);
    invariants::check(&db.pool, &chain, DEV, 1).await;
    node.stop().await;
}

/// An unprotect covers every external use known when it runs: our intent
/// whose nonce the outsider took ends STUCK (`nonce_consumed_externally`)
/// without protecting the submitter again, new intents go through, and the
/// operator's `requeue` sends the lost one with a fresh nonce.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unprotect_sticks_and_an_intent_that_lost_its_nonce_can_be_requeued() {
    let Scenario { db, anvil, node } =
        Scenario::single_node_on(&["--no-mining"], "on_external_nonce = \"protect\"").await;
    let (status, body) = node
        .request("POST", "/v1/transactions", Some(transfer("victim")))
        .await;
    assert_eq!(status, 202);
    let victim = body["tx_id"].as_str().expect("tx_id").to_owned();
    wait_until(Duration::from_secs(30), || async {
        let state: String = sqlx::query_scalar("SELECT state FROM managed_tx")
            .fetch_one(&db.pool)
            .await
            .unwrap_or_default();
        state == "TRACKING"
    })
    .await;
    // The key is used outside txmgr twice; the first replaces ours.
    send_externally(
        &anvil,
        json!({"nonce": "0x0", "maxFeePerGas": "0x174876e800", "maxPriorityFeePerGas": "0xba43b7400"}),
    )
    .await;
    send_externally(&anvil, json!({"nonce": "0x1"})).await;
    anvil.mine().await;
    let protected = || async {
        sqlx::query_scalar::<_, Option<String>>("SELECT protect_reason FROM submitter_nonce_cursor")
            .fetch_one(&db.pool)
            .await
            .ok()
            .flatten()
    };
    wait_until(Duration::from_secs(30), || async {
        protected().await.is_some()
    })
    .await;

    // The operator unprotects at once, before the sweep has found the lost
    // intent.
    let path = format!("/v1/ops/submitters/{DEV}/unprotect");
    let (status, body) = node
        .request("POST", &path, Some(json!({"reason": "our own script"})))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["next_nonce"], 2, "{body}");
    anvil.rpc("evm_setAutomine", json!([true])).await;
    for id in ["n1", "n2", "n3"] {
        let (status, body) = node
            .request("POST", "/v1/transactions", Some(transfer(id)))
            .await;
        assert_eq!(status, 202, "{body}");
    }
    let sub_state = || async {
        sqlx::query_scalar::<_, Option<String>>(
            "SELECT sub_state FROM managed_tx WHERE request_id = 'victim'",
        )
        .fetch_one(&db.pool)
        .await
        .ok()
        .flatten()
    };
    wait_until(Duration::from_secs(30), || async {
        sub_state().await.as_deref() == Some("nonce_consumed_externally")
    })
    .await;
    invariants::wait_mined(&db.pool, 3, Duration::from_secs(30)).await;
    assert_eq!(protected().await, None, "no new evidence, no new PROTECT");

    // The lost intent goes out again with a fresh nonce.
    let (status, body) = node
        .request(
            "POST",
            &format!("/v1/transactions/{victim}/requeue"),
            Some(json!({"reason": "it never executed"})),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["status"], "done");
    invariants::wait_mined(&db.pool, 4, Duration::from_secs(30)).await;
    let (status, body) = node
        .request("GET", &format!("/v1/transactions/{victim}"), None)
        .await;
    assert_eq!(status, 200);
    assert_eq!(body["nonce"], 5, "{body}");
    let audited: i64 =
        sqlx::query_scalar("SELECT count(*) FROM ops_audit WHERE action = 'tx_requeue'")
            .fetch_one(&db.pool)
            .await
            .expect("audit");
    assert_eq!(audited, 1);
    // Requeue is only for an intent that lost its nonce.
    let (status, body) = node
        .request("POST", &format!("/v1/transactions/{victim}/requeue"), None)
        .await;
    assert_eq!(status, 409, "{body}");
    node.stop().await;
}
