//! Receipt tracking costs O(1) RPC calls per block: following ten empty
//! blocks costs the same calls with 1 and with 1,000 tracked intents.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use crate::common::{
    faulty_chain::{FaultyChain, SendFault},
    node::{config_toml, TestNode},
    wait_until, Anvil, TestDb, DEV,
};
use serde_json::json;
use txmgr_actors::chain::ChainClient;

const TO: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";
const BLOCKS: u64 = 10;

/// RPC calls made while the node follows `BLOCKS` new blocks with `tracked`
/// intents accepted but not mined.
async fn calls_while_following(tracked: usize) -> BTreeMap<&'static str, usize> {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let extra = "max_in_flight = 2000\nbatch_size = 500\nresubmit_interval = \"1h\"";
    // No slow sweep during the measurement: only per-block work is counted.
    let toml = config_toml(&db.url, &anvil.rpc_url(), "n1", extra)
        .replace("sweep_interval = \"1s\"", "sweep_interval = \"1h\"");
    let counter = std::sync::Mutex::new(None);
    let node = TestNode::start_with(&toml, |chain| {
        let wrapped = FaultyChain::new(chain, SendFault::None);
        *counter.lock().expect("lock") = Some(wrapped.clone());
        wrapped as Arc<dyn ChainClient>
    })
    .await;
    let counter = counter.lock().expect("lock").take().expect("wrapped");
    let creates = (0..tracked).map(|i| {
        let body = json!({"submitter": DEV, "to": TO, "value": "1", "gas_limit": 21000, "request_id": format!("t{i}")});
        let node = &node;
        async move { node.request("POST", "/v1/transactions", Some(body)).await }
    });
    for (status, body) in futures::future::join_all(creates).await {
        assert_eq!(status, 202, "{body}");
    }
    wait_until(Duration::from_secs(120), || async {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM managed_tx WHERE state = 'TRACKING'")
            .fetch_one(&db.pool)
            .await
            .unwrap_or(0);
        n == tracked as i64
    })
    .await;
    // Tracked but never mined: empty blocks follow.
    anvil.rpc("anvil_dropAllTransactions", json!([])).await;
    let start = anvil.block_number().await;
    wait_until(Duration::from_secs(30), || async {
        node.engine.progress().finality_head() >= start
    })
    .await;

    let before = counter.calls();
    for i in 1..=BLOCKS {
        anvil.mine().await;
        wait_until(Duration::from_secs(30), || async {
            node.engine.progress().finality_head() >= start + i
        })
        .await;
    }
    let after = counter.calls();
    node.stop().await;
    after
        .into_iter()
        .map(|(method, n)| (method, n - before.get(method).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rpc_calls_per_block_do_not_grow_with_tracked_intents() {
    for tracked in [1, 1000] {
        let calls = calls_while_following(tracked).await;
        let polls = calls.get("eth_blockNumber").copied().unwrap_or(0);
        let blocks = calls.get("eth_getBlockByNumber").copied().unwrap_or(0);
        // One fetch per new block, plus at most one tip check per idle poll.
        assert!(
            blocks >= BLOCKS as usize && blocks <= BLOCKS as usize + polls,
            "{tracked} tracked: {calls:?}"
        );
        let others: Vec<_> = calls
            .iter()
            .filter(|(m, _)| !matches!(**m, "eth_blockNumber" | "eth_getBlockByNumber"))
            .collect();
        assert!(
            others.is_empty(),
            "{tracked} tracked: per-intent calls while following empty blocks: {others:?}"
        );
    }
}
