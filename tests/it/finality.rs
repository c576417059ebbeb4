//! Receipts and finality: CONFIRMED after exactly N blocks, FAILED_FINAL for
//! a reverted call, the `finalized` tag, attribution of an older attempt,
//! and one completion row per final intent.

use std::time::Duration;

use crate::common::{
    invariants,
    node::{config_toml, TestNode},
    parse_quantity, wait_until, Anvil, Scenario, TestDb, DEV,
};
use serde_json::json;

const TO: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";
/// Runtime code `PUSH1 0 PUSH1 0 REVERT`: every call reverts.
const REVERTER: &str = "0x00000000000000000000000000000000000000aa";

async fn state(db: &TestDb, request_id: &str) -> String {
    sqlx::query_scalar("SELECT state FROM managed_tx WHERE request_id = $1")
        .bind(request_id)
        .fetch_one(&db.pool)
        .await
        .expect("intent")
}

async fn completions(db: &TestDb, request_id: &str) -> Vec<String> {
    sqlx::query_scalar("SELECT state FROM tx_completion WHERE request_id = $1 ORDER BY seq")
        .bind(request_id)
        .fetch_all(&db.pool)
        .await
        .expect("completions")
}

/// Waits until every finality worker has processed `head`.
async fn processed(node: &TestNode, head: u64) {
    wait_until(Duration::from_secs(30), || async {
        node.engine.progress().finality_head() >= head
    })
    .await;
}

async fn create(node: &TestNode, body: serde_json::Value) {
    let (status, answer) = node.request("POST", "/v1/transactions", Some(body)).await;
    assert_eq!(status, 202, "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_intent_is_confirmed_after_exactly_n_blocks_with_one_completion_row() {
    let Scenario { db, anvil, node } =
        Scenario::single_node_on(&["--no-mining"], "finality = { confirmations = 3 }").await;
    create(
        &node,
        json!({"submitter": DEV, "to": TO, "value": "9", "request_id": "c"}),
    )
    .await;
    wait_until(Duration::from_secs(30), || async {
        state(&db, "c").await == "TRACKING"
    })
    .await;

    anvil.mine().await;
    let mined_in = anvil.block_number().await;
    // Blocks mined_in (1 confirmation) and mined_in + 1 (2): not final yet.
    for extra in 0..2 {
        processed(&node, mined_in + extra).await;
        assert_eq!(
            state(&db, "c").await,
            "TRACKING",
            "final too early at {} confirmations",
            extra + 1
        );
        anvil.mine().await;
    }
    // Block mined_in + 2 is the third confirmation.
    processed(&node, mined_in + 2).await;
    wait_until(Duration::from_secs(10), || async {
        state(&db, "c").await == "CONFIRMED"
    })
    .await;
    assert_eq!(completions(&db, "c").await, vec!["CONFIRMED"]);
    let (status, body) = node
        .request(
            "GET",
            "/v1/transactions?submitter=0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266&request_id=c",
            None,
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(body["receipt"]["block_number"], mined_in);
    assert_eq!(body["confirmations"], 3, "{body}");
    assert!(body["confirmed_at"].is_string());
    invariants::check(&db.pool, &anvil, DEV, 0).await;
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reverted_call_ends_failed_final_with_its_nonce_consumed() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    anvil
        .rpc("anvil_setCode", json!([REVERTER, "0x60006000fd"]))
        .await;
    let node = TestNode::start(&config_toml(
        &db.url,
        &anvil.rpc_url(),
        "n1",
        "finality = { confirmations = 1 }",
    ))
    .await;
    // A fixed gas limit skips estimation, so the revert happens on chain.
    create(
        &node,
        json!({"submitter": DEV, "to": REVERTER, "gas_limit": 60000, "request_id": "r"}),
    )
    .await;
    create(
        &node,
        json!({"submitter": DEV, "to": TO, "value": "1", "request_id": "ok"}),
    )
    .await;
    wait_until(Duration::from_secs(30), || async {
        state(&db, "r").await == "FAILED_FINAL" && state(&db, "ok").await == "CONFIRMED"
    })
    .await;
    assert_eq!(completions(&db, "r").await, vec!["FAILED_FINAL"]);
    assert_eq!(completions(&db, "ok").await, vec!["CONFIRMED"]);
    invariants::check(&db.pool, &anvil, DEV, 0).await;
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn finalized_mode_waits_for_the_chains_finalized_block() {
    // Two slots per epoch: anvil's finalized block trails the head by a few blocks.
    let Scenario { db, anvil, node } = Scenario::single_node_on(
        &["--no-mining", "--slots-in-an-epoch", "2"],
        "finality = \"finalized\"",
    )
    .await;
    create(
        &node,
        json!({"submitter": DEV, "to": TO, "value": "2", "request_id": "f"}),
    )
    .await;
    wait_until(Duration::from_secs(30), || async {
        state(&db, "f").await == "TRACKING"
    })
    .await;
    anvil.mine().await;
    let mined_in = anvil.block_number().await;
    for _ in 0..20 {
        let head = anvil.block_number().await;
        processed(&node, head).await;
        let finalized = parse_quantity(
            &anvil
                .rpc("eth_getBlockByNumber", json!(["finalized", false]))
                .await["number"],
        );
        let now = state(&db, "f").await;
        if finalized < mined_in {
            assert_eq!(
                now, "TRACKING",
                "confirmed before the finalized block ({finalized}) reached {mined_in}"
            );
        } else {
            wait_until(Duration::from_secs(10), || async {
                state(&db, "f").await == "CONFIRMED"
            })
            .await;
            assert_eq!(completions(&db, "f").await, vec!["CONFIRMED"]);
            node.stop().await;
            return;
        }
        anvil.mine().await;
    }
    panic!("anvil's finalized block never reached block {mined_in}");
}

/// The older, cheaper attempt is the one mined: the receipt is attributed to
/// the intent with that attempt's hash.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_receipt_for_an_older_attempt_is_attributed_to_the_intent() {
    use alloy::{
        consensus::{SignableTransaction, TxEip1559, TxEnvelope},
        eips::eip2718::Encodable2718,
        network::TxSignerSync,
        primitives::{keccak256, TxKind, U256},
        signers::local::PrivateKeySigner,
    };
    let Scenario { db, anvil, node } =
        Scenario::single_node_on(&["--no-mining"], "finality = { confirmations = 1 }").await;
    create(
        &node,
        json!({"submitter": DEV, "to": TO, "value": "4", "request_id": "o"}),
    )
    .await;
    wait_until(Duration::from_secs(30), || async {
        state(&db, "o").await == "TRACKING"
    })
    .await;
    let (tx_id, first_hash): (uuid::Uuid, String) =
        sqlx::query_as("SELECT tx_id, tx_hash FROM managed_tx WHERE request_id = 'o'")
            .fetch_one(&db.pool)
            .await
            .expect("intent");

    // A later, pricier attempt at the same nonce is persisted but never reaches the pool.
    let signer: PrivateKeySigner = crate::common::DEV_PRIVATE_KEY_0.parse().expect("key");
    let mut later = TxEip1559 {
        chain_id: 31337,
        nonce: 0,
        gas_limit: 21000,
        max_fee_per_gas: 200_000_000_000,
        max_priority_fee_per_gas: 50_000_000_000,
        to: TxKind::Call(TO.parse().expect("to")),
        value: U256::from(4),
        ..Default::default()
    };
    let signature = signer.sign_transaction_sync(&mut later).expect("sign");
    let raw = TxEnvelope::from(later.into_signed(signature)).encoded_2718();
    let later_hash = format!("{:#x}", keccak256(&raw));
    sqlx::query(
        "INSERT INTO tx_attempt (tx_id, attempt_no, nonce, tx_hash, raw_tx, max_fee_per_gas,
             max_priority_fee_per_gas, gas_limit, kind, fencing_token)
         VALUES ($1, 2, 0, $2, $3, 200000000000, 50000000000, 21000, 'bump', 1)",
    )
    .bind(tx_id)
    .bind(&later_hash)
    .bind(raw)
    .execute(&db.pool)
    .await
    .expect("second attempt");
    sqlx::query("UPDATE managed_tx SET tx_hash = $2 WHERE tx_id = $1")
        .bind(tx_id)
        .bind(&later_hash)
        .execute(&db.pool)
        .await
        .expect("latest attempt");

    anvil.mine().await;
    wait_until(Duration::from_secs(30), || async {
        state(&db, "o").await == "CONFIRMED"
    })
    .await;
    let (mined, latest): (String, String) =
        sqlx::query_as("SELECT mined_tx_hash, tx_hash FROM managed_tx WHERE tx_id = $1")
            .bind(tx_id)
            .fetch_one(&db.pool)
            .await
            .expect("intent");
    assert_eq!(mined, first_hash, "the first attempt is the one on chain");
    assert_eq!(latest, later_hash);
    invariants::check(&db.pool, &anvil, DEV, 0).await;
    node.stop().await;
}
