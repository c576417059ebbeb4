//! Resubmission against real anvil (`--no-mining`) and PostgreSQL: a dropped
//! transaction is re-broadcast, a fee spike is bumped through in ≥ 10% steps
//! within the cap (or, without bumping, re-broadcast and STUCK), and an
//! older cheaper attempt that gets mined confirms the intent.

use std::time::Duration;

use crate::common::{
    invariants,
    node::{config_toml, TestNode},
    txs::{
        attempts, completion_states, create_transfer, expect_stuck_after_resubmits, intent,
        known_to_node, raw_hex, set_next_base_fee, wait_state, GWEI,
    },
    wait_until, Anvil, Client, DevChain, DevNode, Mining, TestDb, DEV_ADDRESS_0,
};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

fn config(db: &TestDb, chain: &impl DevNode, extra: &str) -> String {
    config_toml(
        &db.url,
        &chain.rpc_url(),
        "n1",
        &format!("finality = {{ confirmations = 1 }}\n{extra}"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dropped_transaction_is_rebroadcast_after_the_interval_and_mined() {
    dropped_transaction_is_rebroadcast_and_mined(Client::Anvil).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dropped_transaction_is_rebroadcast_after_the_interval_and_mined_on_hardhat() {
    dropped_transaction_is_rebroadcast_and_mined(Client::Hardhat).await;
}

async fn dropped_transaction_is_rebroadcast_and_mined(client: Client) {
    let db = TestDb::migrated().await;
    let chain = DevChain::start(client, Mining::Manual).await;
    let node = TestNode::start(&config(&db, &chain, r#"resubmit_interval = "500ms""#)).await;
    let tx_id = create_transfer(&node, "dropped", 1).await;
    wait_state(&db.pool, tx_id, "TRACKING", WAIT).await;
    let first = attempts(&db.pool, tx_id).await;
    let hash = first[0].tx_hash.clone();
    assert!(known_to_node(&chain, &hash).await);

    chain.drop_transaction(&hash).await;
    assert!(!known_to_node(&chain, &hash).await, "dropped from the pool");
    wait_until(WAIT, || known_to_node(&chain, &hash)).await;

    chain.mine().await;
    wait_state(&db.pool, tx_id, "CONFIRMED", WAIT).await;
    let all = attempts(&db.pool, tx_id).await;
    assert_eq!(
        all.len(),
        1,
        "identical bytes were re-broadcast, nothing re-signed"
    );
    assert_eq!(intent(&db.pool, tx_id).await.mined_tx_hash, Some(hash));
    node.stop().await;
    invariants::check(&db.pool, &chain, DEV_ADDRESS_0, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fee_spike_is_bumped_through_in_ten_percent_steps_within_the_cap() {
    fee_spike_is_bumped_through_within_the_cap(Client::Anvil).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fee_spike_is_bumped_through_in_ten_percent_steps_within_the_cap_on_hardhat() {
    fee_spike_is_bumped_through_within_the_cap(Client::Hardhat).await;
}

async fn fee_spike_is_bumped_through_within_the_cap(client: Client) {
    let db = TestDb::migrated().await;
    let chain = DevChain::start(client, Mining::Manual).await;
    let cap = 40 * GWEI;
    let node = TestNode::start(&config(
        &db,
        &chain,
        &format!(
            "resubmit_interval = \"300ms\"\nmax_resubmits = 100\n\
             max_fee_per_gas_cap = \"{cap}\"\ngas_bump = {{ enabled = true, multiplier = 1.1 }}"
        ),
    ))
    .await;
    let tx_id = create_transfer(&node, "spike", 1).await;
    wait_state(&db.pool, tx_id, "TRACKING", WAIT).await;
    let original = attempts(&db.pool, tx_id).await[0].clone();
    assert!(original.max_fee < 10 * GWEI, "{original:?}");

    // The next block's base fee jumps above the intent's max fee: the pool
    // refuses anything cheaper, and the market (latest block) looks calm, so
    // only the ≥ 10% steps move the fee up.
    let spike = 10 * GWEI;
    set_next_base_fee(&chain, spike).await;
    wait_until(Duration::from_secs(60), || async {
        attempts(&db.pool, tx_id)
            .await
            .last()
            .is_some_and(|a| a.max_fee >= spike && a.result.as_deref() == Some("accepted"))
    })
    .await;
    set_next_base_fee(&chain, spike).await;
    chain.mine().await;
    wait_state(&db.pool, tx_id, "CONFIRMED", WAIT).await;

    let all = attempts(&db.pool, tx_id).await;
    assert!(
        all.len() >= 4,
        "several steps to climb from {} to {spike}: {all:?}",
        original.max_fee
    );
    for pair in all.windows(2) {
        assert!(pair[1].kind == "bump", "{pair:?}");
        assert_eq!(pair[1].nonce, pair[0].nonce);
        // ≥ 10% on both fields (integer arithmetic, rounded up).
        assert!(pair[1].max_fee * 10 >= pair[0].max_fee * 11, "{pair:?}");
        assert!(
            pair[1].priority_fee * 10 >= pair[0].priority_fee * 11,
            "{pair:?}"
        );
    }
    assert!(all.iter().all(|a| a.max_fee <= cap), "never above the cap");
    let mined = intent(&db.pool, tx_id).await.mined_tx_hash.expect("mined");
    assert_eq!(
        Some(&mined),
        all.iter().map(|a| &a.tx_hash).find(|h| **h == mined)
    );
    assert_eq!(completion_states(&db.pool, tx_id).await, ["CONFIRMED"]);
    node.stop().await;
    invariants::check(&db.pool, &chain, DEV_ADDRESS_0, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_bumping_a_spike_is_rebroadcast_only_then_stuck_and_it_may_still_confirm() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let node = TestNode::start(&config(
        &db,
        &anvil,
        "resubmit_interval = \"300ms\"\nmax_resubmits = 2",
    ))
    .await;
    let tx_id = create_transfer(&node, "stuck", 1).await;
    wait_state(&db.pool, tx_id, "TRACKING", WAIT).await;
    set_next_base_fee(&anvil, 10 * GWEI).await;

    expect_stuck_after_resubmits(&db.pool, tx_id, "max_resubmits 2", WAIT).await;
    assert_eq!(
        attempts(&db.pool, tx_id).await.len(),
        1,
        "re-broadcast only"
    );
    let (status, view) = node
        .request("GET", &format!("/v1/transactions/{tx_id}"), None)
        .await;
    assert_eq!((status, view["state"].as_str()), (200, Some("STUCK")));
    // The ops view: the STUCK intent heads the nonce line, and its resubmit
    // timer is armed.
    wait_until(WAIT, || async {
        let (_, actors) = node.request("GET", "/v1/ops/actors", None).await;
        let row = &actors["submitters"][0];
        let pools = &actors["chains"][0]["pools"];
        row["head_of_line_blocked"] == true
            && pools["resubmit_queue_depth"].as_u64() >= Some(1)
            && pools["receipt_queue_depth"].is_u64()
            && pools["finality_oldest_ms"].is_u64()
    })
    .await;

    // Still tracked: when the market comes back down it is mined and confirms.
    set_next_base_fee(&anvil, GWEI / 2).await;
    anvil.mine().await;
    wait_state(&db.pool, tx_id, "CONFIRMED", WAIT).await;
    assert_eq!(
        completion_states(&db.pool, tx_id).await,
        ["STUCK", "CONFIRMED"]
    );
    node.stop().await;
    invariants::check(&db.pool, &anvil, DEV_ADDRESS_0, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_older_cheaper_attempt_mined_confirms_the_intent_with_its_hash() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let toml = config(
        &db,
        &anvil,
        "resubmit_interval = \"300ms\"\nmax_resubmits = 100\ngas_bump = { enabled = true }",
    );
    let node = TestNode::start(&toml).await;
    let tx_id = create_transfer(&node, "older", 1).await;
    wait_until(WAIT, || async {
        attempts(&db.pool, tx_id).await.len() >= 2
    })
    .await;
    // Stop bumping (graceful: lease released), then let the oldest bytes win.
    node.stop().await;
    let all = attempts(&db.pool, tx_id).await;
    let (oldest, newest) = (all[0].clone(), all[all.len() - 1].clone());
    anvil
        .rpc("anvil_dropTransaction", json!([newest.tx_hash]))
        .await;
    anvil
        .rpc("eth_sendRawTransaction", json!([raw_hex(&oldest.raw)]))
        .await;
    anvil.mine().await;
    anvil.mine().await;

    let node = TestNode::start(&toml).await;
    wait_state(&db.pool, tx_id, "CONFIRMED", WAIT).await;
    let done = intent(&db.pool, tx_id).await;
    assert_eq!(done.mined_tx_hash.as_deref(), Some(oldest.tx_hash.as_str()));
    assert_eq!(
        attempts(&db.pool, tx_id).await.len(),
        all.len(),
        "no further attempts once mined"
    );
    node.stop().await;
    invariants::check(&db.pool, &anvil, DEV_ADDRESS_0, 0).await;
}
