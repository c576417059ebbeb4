//! Operator actions on transactions (`cancel`, `speedup`, `rebroadcast`)
//! against real anvil (`--no-mining`) and PostgreSQL, and the stuck policy
//! `cancel` resolving a STUCK head of line in strict mode.

use std::time::Duration;

use crate::common::{
    invariants,
    node::{config_toml, TestNode},
    txs::{
        action, attempts, completion_states, create_transfer, intent, known_to_node, raw_hex,
        wait_state, GWEI,
    },
    wait_until, Anvil, TestDb, DEV_ADDRESS_0,
};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);
/// A resubmit interval no test waits for.
const LONG: &str = "60s";

/// Strict mode (one nonce at a time, each final before the next); with
/// [`LONG`] as `resubmit_interval` only operator actions resubmit.
fn strict(db: &TestDb, anvil: &Anvil, resubmit_interval: &str, extra: &str) -> String {
    config_toml(
        &db.url,
        &anvil.rpc_url(),
        "n1",
        &format!(
            "finality = {{ confirmations = 1 }}\nmax_in_flight = 1\nadvance_after = \"confirmed\"\n\
             resubmit_interval = \"{resubmit_interval}\"\n{extra}"
        ),
    )
}

async fn ops_audit_rows(db: &TestDb, tx_id: uuid::Uuid) -> Vec<(String, String, Option<String>)> {
    sqlx::query_as("SELECT actor, action, reason FROM ops_audit WHERE tx_id = $1 ORDER BY id")
        .bind(tx_id)
        .fetch_all(&db.pool)
        .await
        .expect("audit")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancelling_a_queued_intent_uses_no_nonce_and_the_queue_continues_without_a_gap() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let node = TestNode::start(&strict(&db, &anvil, LONG, "")).await;
    let first = create_transfer(&node, "first", 1).await;
    wait_state(&db.pool, first, "TRACKING", WAIT).await;
    let queued = create_transfer(&node, "queued", 2).await;
    assert_eq!(intent(&db.pool, queued).await.state, "QUEUED");

    let (status, body) = action(
        &node,
        queued,
        "cancel",
        Some(json!({"reason": "not needed"})),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(
        (body["status"].as_str(), body["state"].as_str()),
        (Some("done"), Some("CANCELLED"))
    );
    let cancelled = intent(&db.pool, queued).await;
    assert_eq!(
        (cancelled.state.as_str(), cancelled.nonce),
        ("CANCELLED", None)
    );
    assert!(attempts(&db.pool, queued).await.is_empty());
    assert_eq!(completion_states(&db.pool, queued).await, ["CANCELLED"]);
    assert_eq!(
        ops_audit_rows(&db, queued).await,
        [(
            "anonymous".to_owned(),
            "tx_cancel".to_owned(),
            Some("not needed".to_owned())
        )]
    );
    // A cancel repeated (its first answer lost) is answered as done before,
    // and records nothing; every other action on a final state is refused.
    let (status, body) = action(&node, queued, "cancel", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["status"].as_str(), body["state"].as_str()),
        (Some("unchanged"), Some("CANCELLED"))
    );
    assert_eq!(ops_audit_rows(&db, queued).await.len(), 1);
    assert_eq!(completion_states(&db.pool, queued).await, ["CANCELLED"]);
    for refused in ["speedup", "rebroadcast", "requeue"] {
        let (status, body) = action(&node, queued, refused, None).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (409, Some("invalid_state")),
            "{refused}: {body}"
        );
    }

    let next = create_transfer(&node, "next", 3).await;
    anvil.mine().await;
    wait_state(&db.pool, first, "CONFIRMED", WAIT).await;
    wait_state(&db.pool, next, "TRACKING", WAIT).await;
    anvil.mine().await;
    wait_state(&db.pool, next, "CONFIRMED", WAIT).await;
    assert_eq!(intent(&db.pool, next).await.nonce, Some(1), "no gap");
    node.stop().await;
    invariants::check(&db.pool, &anvil, DEV_ADDRESS_0, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancelling_a_tracking_intent_replaces_it_and_it_ends_cancelled() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let node = TestNode::start(&strict(&db, &anvil, LONG, "")).await;
    let tx_id = create_transfer(&node, "to-cancel", 5).await;
    wait_state(&db.pool, tx_id, "TRACKING", WAIT).await;

    let (status, body) = action(&node, tx_id, "cancel", None).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["status"].as_str(), Some("requested"));
    wait_until(WAIT, || async {
        attempts(&db.pool, tx_id)
            .await
            .iter()
            .any(|a| a.kind == "cancel" && a.result.as_deref() == Some("accepted"))
    })
    .await;
    let all = attempts(&db.pool, tx_id).await;
    let (original, cancel) = (&all[0], &all[1]);
    assert_eq!(cancel.nonce, original.nonce);
    assert!(cancel.max_fee * 10 >= original.max_fee * 11, "{all:?}");
    assert_eq!(
        intent(&db.pool, tx_id).await.sub_state.as_deref(),
        Some("cancelling")
    );

    anvil.mine().await;
    wait_state(&db.pool, tx_id, "CANCELLED", WAIT).await;
    assert_eq!(
        intent(&db.pool, tx_id).await.mined_tx_hash,
        Some(cancel.tx_hash.clone())
    );
    assert_eq!(completion_states(&db.pool, tx_id).await, ["CANCELLED"]);
    // The self-transfer moved no value.
    let receipt = anvil
        .rpc("eth_getTransactionByHash", json!([cancel.tx_hash]))
        .await;
    assert_eq!(receipt["value"].as_str(), Some("0x0"));
    assert_eq!(
        receipt["to"].as_str().map(str::to_lowercase),
        Some(DEV_ADDRESS_0.to_lowercase())
    );
    node.stop().await;
    invariants::check(&db.pool, &anvil, DEV_ADDRESS_0, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn when_the_original_wins_over_the_cancel_the_intent_ends_confirmed() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let node = TestNode::start(&strict(&db, &anvil, LONG, "")).await;
    let tx_id = create_transfer(&node, "original-wins", 7).await;
    wait_state(&db.pool, tx_id, "TRACKING", WAIT).await;
    let (status, _) = action(&node, tx_id, "cancel", None).await;
    assert_eq!(status, 202);
    wait_until(WAIT, || async {
        attempts(&db.pool, tx_id)
            .await
            .iter()
            .any(|a| a.kind == "cancel" && a.result.is_some())
    })
    .await;
    let all = attempts(&db.pool, tx_id).await;
    // The original gets there first: the cancel leaves the pool, the
    // original's bytes are mined.
    anvil
        .rpc("anvil_dropTransaction", json!([all[1].tx_hash]))
        .await;
    anvil
        .rpc("eth_sendRawTransaction", json!([raw_hex(&all[0].raw)]))
        .await;
    anvil.mine().await;
    wait_state(&db.pool, tx_id, "CONFIRMED", WAIT).await;
    assert_eq!(
        intent(&db.pool, tx_id).await.mined_tx_hash,
        Some(all[0].tx_hash.clone())
    );
    assert_eq!(completion_states(&db.pool, tx_id).await, ["CONFIRMED"]);
    // Mined and final: nothing more can be done.
    for name in ["cancel", "speedup", "rebroadcast"] {
        let (status, body) = action(&node, tx_id, name, None).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (409, Some("invalid_state")),
            "{name}"
        );
    }
    node.stop().await;
    invariants::check(&db.pool, &anvil, DEV_ADDRESS_0, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn speedup_bumps_now_and_rebroadcast_sends_again_now() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let node = TestNode::start(&strict(&db, &anvil, LONG, "")).await;
    let tx_id = create_transfer(&node, "fast", 9).await;
    wait_state(&db.pool, tx_id, "TRACKING", WAIT).await;
    let original = attempts(&db.pool, tx_id).await[0].clone();

    anvil
        .rpc("anvil_dropTransaction", json!([original.tx_hash]))
        .await;
    let (status, body) = action(&node, tx_id, "rebroadcast", None).await;
    assert_eq!(status, 202, "{body}");
    wait_until(WAIT, || known_to_node(&anvil, &original.tx_hash)).await;
    assert_eq!(attempts(&db.pool, tx_id).await.len(), 1);

    let (status, body) = action(&node, tx_id, "speedup", Some(json!({"reason": "urgent"}))).await;
    assert_eq!(status, 202, "{body}");
    wait_until(WAIT, || async {
        attempts(&db.pool, tx_id)
            .await
            .iter()
            .any(|a| a.kind == "bump" && a.result.as_deref() == Some("accepted"))
    })
    .await;
    let all = attempts(&db.pool, tx_id).await;
    assert!(all[1].max_fee * 10 >= original.max_fee * 11, "{all:?}");
    assert!(
        all[1].priority_fee * 10 >= original.priority_fee * 11,
        "{all:?}"
    );
    anvil.mine().await;
    wait_state(&db.pool, tx_id, "CONFIRMED", WAIT).await;
    assert_eq!(
        intent(&db.pool, tx_id).await.mined_tx_hash,
        Some(all[1].tx_hash.clone())
    );
    let actions: Vec<String> = ops_audit_rows(&db, tx_id)
        .await
        .into_iter()
        .map(|r| r.1)
        .collect();
    assert_eq!(actions, ["tx_rebroadcast", "tx_speedup"]);
    node.stop().await;
    invariants::check(&db.pool, &anvil, DEV_ADDRESS_0, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_action_requests_get_a_clear_4xx_and_change_nothing() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let node = TestNode::start(&strict(&db, &anvil, LONG, "")).await;
    let first = create_transfer(&node, "a", 1).await;
    wait_state(&db.pool, first, "TRACKING", WAIT).await;
    let queued = create_transfer(&node, "b", 1).await;

    let (status, body) = node
        .request("POST", "/v1/transactions/not-a-uuid/cancel", None)
        .await;
    assert_eq!(
        (status, body["error"]["field"].as_str()),
        (400, Some("tx_id"))
    );
    let (status, body) = action(&node, uuid::Uuid::new_v4(), "cancel", None).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("not_found"))
    );
    let (status, body) = action(&node, queued, "cancel", Some(json!({"why": "x"}))).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_request"))
    );
    let long = "x".repeat(501);
    let (status, body) = action(&node, queued, "cancel", Some(json!({"reason": long}))).await;
    assert_eq!(
        (status, body["error"]["field"].as_str()),
        (400, Some("reason"))
    );
    // A NUL cannot be stored in the audit row: refused before anything runs.
    let (status, body) = action(&node, queued, "cancel", Some(json!({"reason": "a\u{0}b"}))).await;
    assert_eq!(
        (status, body["error"]["field"].as_str()),
        (400, Some("reason")),
        "{body}"
    );
    // A QUEUED intent has no nonce to speed up or re-broadcast.
    for name in ["speedup", "rebroadcast"] {
        let (status, body) = action(&node, queued, name, None).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (409, Some("invalid_state")),
            "{name}"
        );
    }
    assert_eq!(intent(&db.pool, queued).await.state, "QUEUED");
    assert!(ops_audit_rows(&db, queued).await.is_empty());
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn strict_mode_cancels_a_stuck_head_and_the_queue_behind_it_proceeds_without_a_gap() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let node = TestNode::start(&strict(
        &db,
        &anvil,
        "300ms",
        "stuck_policy = \"cancel\"\nmax_resubmits = 1",
    ))
    .await;
    let head = create_transfer(&node, "head", 1).await;
    wait_state(&db.pool, head, "TRACKING", WAIT).await;
    let behind = create_transfer(&node, "behind", 2).await;

    // A fee spike mined into the chain: the head's fee is now far too low
    // (anvil drops it from the pool), every block keeps the spike.
    let spike = 10 * GWEI;
    let miner = {
        let url = anvil.rpc_url();
        tokio::spawn(async move {
            let client = reqwest::Client::new();
            loop {
                for (method, params) in [
                    (
                        "anvil_setNextBlockBaseFeePerGas",
                        json!([format!("{spike:#x}")]),
                    ),
                    ("evm_mine", json!([])),
                ] {
                    let _ = client
                        .post(&url)
                        .json(
                            &json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}),
                        )
                        .send()
                        .await;
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        })
    };
    wait_state(&db.pool, head, "CANCELLED", Duration::from_secs(60)).await;
    wait_state(&db.pool, behind, "CONFIRMED", Duration::from_secs(60)).await;
    miner.abort();

    assert_eq!(
        completion_states(&db.pool, head).await,
        ["STUCK", "CANCELLED"]
    );
    let kinds: Vec<String> = attempts(&db.pool, head)
        .await
        .into_iter()
        .map(|a| a.kind)
        .collect();
    assert_eq!(kinds.first().map(String::as_str), Some("original"));
    assert!(kinds.iter().any(|k| k == "cancel"), "{kinds:?}");
    assert_eq!(intent(&db.pool, behind).await.nonce, Some(1));
    node.stop().await;
    invariants::check(&db.pool, &anvil, DEV_ADDRESS_0, 0).await;
}
