//! An intent no node has accepted yet escalates by the same rules as an
//! accepted one (README "Resubmission, fee bumps, STUCK and cancel"): fee bumps on the resubmit schedule,
//! operator actions, STUCK with a reason — instead of re-sending identical
//! bytes forever. Real anvil (`--no-mining`) behind a proxy that refuses
//! sends, real PostgreSQL.

use std::time::Duration;

use crate::common::{
    invariants,
    node::{config_toml, TestNode},
    rpc_proxy::{Faults, RpcProxy},
    txs::{
        action, attempts, completion_states, create_transfer, expect_stuck_after_resubmits, intent,
        wait_state,
    },
    wait_until, Anvil, TestDb, DEV_ADDRESS_0,
};

const WAIT: Duration = Duration::from_secs(30);

/// What a node answers when the fee is below what its pool takes now.
const UNDERPRICED: &str = "transaction underpriced";

async fn refusing_node(extra: &str) -> (TestDb, Anvil, RpcProxy, TestNode) {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let proxy = RpcProxy::start(&anvil.rpc_url(), 3).await;
    proxy.set(Faults {
        refuse_sends: Some(UNDERPRICED),
        ..Faults::default()
    });
    let node = TestNode::start(&config_toml(
        &db.url,
        &proxy.url(),
        "n1",
        &format!("finality = {{ confirmations = 1 }}\nresubmit_interval = \"300ms\"\n{extra}"),
    ))
    .await;
    (db, anvil, proxy, node)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_intent_no_node_accepts_is_fee_bumped_on_the_resubmit_schedule() {
    let (db, anvil, proxy, node) =
        refusing_node("max_resubmits = 100\ngas_bump = { enabled = true, multiplier = 1.1 }").await;
    let tx_id = create_transfer(&node, "refused", 1).await;
    wait_until(WAIT, || async {
        attempts(&db.pool, tx_id).await.len() >= 3
    })
    .await;
    let row = intent(&db.pool, tx_id).await;
    assert_eq!(row.state, "ALLOCATED", "no node accepted it yet");
    let all = attempts(&db.pool, tx_id).await;
    for pair in all.windows(2) {
        assert_eq!(pair[1].kind, "bump", "{pair:?}");
        assert_eq!(pair[1].nonce, pair[0].nonce);
        assert!(pair[1].max_fee * 10 >= pair[0].max_fee * 11, "{pair:?}");
    }

    proxy.set(Faults::default());
    wait_state(&db.pool, tx_id, "TRACKING", WAIT).await;
    anvil.mine().await;
    wait_state(&db.pool, tx_id, "CONFIRMED", WAIT).await;
    assert_eq!(completion_states(&db.pool, tx_id).await, ["CONFIRMED"]);
    node.stop().await;
    invariants::check(&db.pool, &anvil, DEV_ADDRESS_0, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_intent_no_node_accepts_can_be_sped_up_and_becomes_stuck_loudly() {
    let (db, anvil, proxy, node) = refusing_node("max_resubmits = 3").await;
    let tx_id = create_transfer(&node, "refused", 1).await;
    wait_until(WAIT, || async {
        !attempts(&db.pool, tx_id).await.is_empty()
    })
    .await;

    // An operator may act on it like on an accepted one.
    let (status, body) = action(&node, tx_id, "speedup", None).await;
    assert_eq!(status, 202, "{body}");
    wait_until(WAIT, || async {
        attempts(&db.pool, tx_id)
            .await
            .iter()
            .any(|a| a.kind == "bump")
    })
    .await;

    // Bumping is off: re-broadcasts only, then STUCK with its reason and a
    // completion row — not a silent retry loop.
    expect_stuck_after_resubmits(&db.pool, tx_id, "resubmits", WAIT).await;

    // Still sent: once a node takes it, it may confirm.
    proxy.set(Faults::default());
    wait_until(WAIT, || async {
        attempts(&db.pool, tx_id)
            .await
            .iter()
            .any(|a| a.result.as_deref() == Some("accepted"))
    })
    .await;
    anvil.mine().await;
    wait_state(&db.pool, tx_id, "CONFIRMED", WAIT).await;
    assert_eq!(
        completion_states(&db.pool, tx_id).await,
        ["STUCK", "CONFIRMED"]
    );
    node.stop().await;
    invariants::check(&db.pool, &anvil, DEV_ADDRESS_0, 0).await;
}

/// With no ALLOCATED intent waiting for a broadcast retry there is nothing
/// to schedule: an answer of "due now" made every idle leader run its cycle
/// again at once, forever (three reads per turn).
#[tokio::test]
async fn no_allocated_intent_means_no_retry_to_schedule() {
    let db = TestDb::migrated().await;
    let key = txmgr_actors::SubmitterKey::new(31337, DEV_ADDRESS_0.parse().expect("address"));
    let next = txmgr_actors::store::pipeline::next_allocated_retry(&db.pool, key)
        .await
        .expect("query");
    assert_eq!(next, None);
}
