//! Intents that can never execute are REJECTED without leaving a gap: a
//! reverting intent before any nonce is used, and one refused for lack of
//! funds after `reject_after`, whose nonce goes to the next intent.

use std::time::Duration;

use crate::common::{
    invariants,
    node::{config_toml, TestNode},
    wait_until, Client, DevChain, DevNode, Mining, Scenario, TestDb, DEV,
};
use serde_json::json;

const TO: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";
const ETH: u128 = 1_000_000_000_000_000_000;

/// The node's refusal for lack of funds, in anvil's words or Hardhat's
/// ("Sender doesn't have enough funds to send tx").
fn refused_for_funds(error: &str) -> bool {
    let error = error.to_lowercase();
    error.contains("insufficient funds") || error.contains("doesn't have enough funds")
}

async fn state_of(db: &TestDb, request_id: &str) -> (String, Option<i64>) {
    sqlx::query_as("SELECT state, nonce FROM managed_tx WHERE request_id = $1")
        .bind(request_id)
        .fetch_one(&db.pool)
        .await
        .expect("intent")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reverting_intent_is_rejected_before_allocation_and_uses_no_nonce() {
    let Scenario { db, anvil, node } = Scenario::single_node("").await;
    // Init code PUSH1 0 PUSH1 0 REVERT: the deployment always reverts.
    let reverting = json!({"submitter": DEV, "data": "0x60006000fd", "request_id": "bad"});
    let (status, _) = node
        .request("POST", "/v1/transactions", Some(reverting))
        .await;
    assert_eq!(status, 202);
    let good = json!({"submitter": DEV, "to": TO, "value": "1", "request_id": "good"});
    let (status, _) = node.request("POST", "/v1/transactions", Some(good)).await;
    assert_eq!(status, 202);
    invariants::wait_mined(&db.pool, 1, Duration::from_secs(30)).await;
    assert_eq!(state_of(&db, "bad").await, ("REJECTED".into(), None));
    assert_eq!(
        state_of(&db, "good").await.1,
        Some(0),
        "the rejected intent took no nonce"
    );
    let completions: i64 =
        sqlx::query_scalar("SELECT count(*) FROM tx_completion WHERE state = 'REJECTED'")
            .fetch_one(&db.pool)
            .await
            .expect("completions");
    assert_eq!(completions, 1);
    invariants::check(&db.pool, &anvil, DEV, 0).await;
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn insufficient_funds_is_retried_then_rejected_and_its_nonce_reused() {
    insufficient_funds_rejected_and_nonce_reused(Client::Anvil).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn insufficient_funds_is_retried_then_rejected_and_its_nonce_reused_on_hardhat() {
    insufficient_funds_rejected_and_nonce_reused(Client::Hardhat).await;
}

async fn insufficient_funds_rejected_and_nonce_reused(client: Client) {
    let db = TestDb::migrated().await;
    let chain = DevChain::start(client, Mining::Auto).await;
    let node = TestNode::start(&config_toml(
        &db.url,
        &chain.rpc_url(),
        "n1",
        "reject_after = \"2s\"",
    ))
    .await;
    chain.set_balance(DEV, 0).await;
    // A fixed gas limit skips estimation, so the node refuses at broadcast.
    let broke = json!({"submitter": DEV, "to": TO, "value": "1", "gas_limit": 21000, "request_id": "broke"});
    let (status, _) = node.request("POST", "/v1/transactions", Some(broke)).await;
    assert_eq!(status, 202);
    wait_until(Duration::from_secs(30), || async {
        let error: Option<String> = sqlx::query_scalar("SELECT last_error FROM managed_tx")
            .fetch_one(&db.pool)
            .await
            .unwrap_or(None);
        error.as_deref().is_some_and(refused_for_funds)
    })
    .await;
    assert_eq!(
        state_of(&db, "broke").await,
        ("ALLOCATED".into(), Some(0)),
        "kept while retrying"
    );
    wait_until(Duration::from_secs(30), || async {
        state_of(&db, "broke").await.0 == "REJECTED"
    })
    .await;
    assert_eq!(
        state_of(&db, "broke").await.1,
        None,
        "the rejected intent gave its nonce back"
    );

    chain.set_balance(DEV, 1_000 * ETH).await;
    let next = json!({"submitter": DEV, "to": TO, "value": "1", "request_id": "next"});
    let (status, _) = node.request("POST", "/v1/transactions", Some(next)).await;
    assert_eq!(status, 202);
    invariants::wait_mined(&db.pool, 1, Duration::from_secs(30)).await;
    assert_eq!(
        state_of(&db, "next").await.1,
        Some(0),
        "the released nonce is reused: no gap"
    );
    invariants::check(&db.pool, &chain, DEV, 0).await;
    node.stop().await;
}

/// A nonce released below allocated ones is taken by a filler (a 0-value
/// self-transfer recorded as an intent of its own) when no queued intent
/// takes it, so the intents above it are mined (README "How an intent is executed").
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_released_nonce_below_allocated_ones_is_filled_and_the_line_moves_on() {
    released_nonce_below_allocated_ones_is_filled(Client::Anvil).await;
}

/// Hardhat's automine refuses the intents above the gap ("Nonce too high.
/// Expected nonce to be 0 but got 1 ...") instead of queueing them as anvil
/// does: they wait ALLOCATED until the filler is mined, then must be sent
/// again after `retry_backoff`. Today they wait for the resubmit timer
/// (60 s): the cycle that broadcasts the filler clears the reminder of their
/// due retry (`CycleMemory::allocated_due_at`) and nothing sets it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_released_nonce_below_allocated_ones_is_filled_and_the_line_moves_on_on_hardhat() {
    released_nonce_below_allocated_ones_is_filled(Client::Hardhat).await;
}

async fn released_nonce_below_allocated_ones_is_filled(client: Client) {
    let db = TestDb::migrated().await;
    let chain = DevChain::start(client, Mining::Auto).await;
    let node = TestNode::start(&config_toml(
        &db.url,
        &chain.rpc_url(),
        "n1",
        "reject_after = \"2s\"\nfinality = { confirmations = 1 }",
    ))
    .await;
    // More than the account holds: refused for lack of funds at broadcast.
    let broke = json!({"submitter": DEV, "to": TO, "value": "1000000000000000000000000000",
                       "gas_limit": 21000, "request_id": "broke"});
    let (status, _) = node.request("POST", "/v1/transactions", Some(broke)).await;
    assert_eq!(status, 202);
    wait_until(Duration::from_secs(30), || async {
        state_of(&db, "broke").await == ("ALLOCATED".into(), Some(0))
    })
    .await;
    for id in ["after-1", "after-2", "after-3"] {
        let intent = json!({"submitter": DEV, "to": TO, "value": "1", "request_id": id});
        let (status, _) = node.request("POST", "/v1/transactions", Some(intent)).await;
        assert_eq!(status, 202);
    }
    wait_until(Duration::from_secs(30), || async {
        state_of(&db, "broke").await.0 == "REJECTED"
    })
    .await;
    // Nothing queued takes nonce 0: a filler does, and the line moves on.
    wait_until(Duration::from_secs(30), || async {
        let mut done = true;
        for id in ["after-1", "after-2", "after-3", "filler:0"] {
            let state: Option<String> =
                sqlx::query_scalar("SELECT state FROM managed_tx WHERE request_id = $1")
                    .bind(id)
                    .fetch_optional(&db.pool)
                    .await
                    .expect("state");
            done &= state.as_deref() == Some("CONFIRMED");
        }
        done
    })
    .await;
    assert_eq!(
        state_of(&db, "filler:0").await,
        ("CONFIRMED".into(), Some(0))
    );
    let (to, value): (String, String) = sqlx::query_as(
        "SELECT intent->>'to', intent->>'value' FROM managed_tx WHERE request_id = 'filler:0'",
    )
    .fetch_one(&db.pool)
    .await
    .expect("filler");
    assert_eq!((to.to_lowercase(), value.as_str()), (DEV.to_owned(), "0x0"));
    let fillers: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM tx_completion c JOIN managed_tx m USING (tx_id)
          WHERE m.request_id = 'filler:0' AND c.state = 'CONFIRMED'",
    )
    .fetch_one(&db.pool)
    .await
    .expect("completions");
    assert_eq!(
        fillers, 1,
        "a filler has its completion row like any intent"
    );
    // Clients cannot use the reserved prefix.
    let (status, body) = node
        .request(
            "POST",
            "/v1/transactions",
            Some(json!({"submitter": DEV, "to": TO, "value": "1", "request_id": "filler:9"})),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "request_id");
    invariants::check(&db.pool, &chain, DEV, 0).await;
    node.stop().await;
}
