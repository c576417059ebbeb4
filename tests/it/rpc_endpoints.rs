//! Several RPC endpoints (fault proxies in front of one anvil): reads move
//! away from a dead or lagging endpoint, sends reach the chain although one
//! backend swallows every broadcast, every acknowledged intent confirms, the
//! invariants hold, no reorg is imagined, and the ops view shows the health.

use std::time::{Duration, Instant};

use crate::common::{
    invariants,
    node::{config_toml, TestNode},
    rpc_proxy::{Faults, RpcProxy},
    wait_until, Anvil, TestDb, DEV,
};
use serde_json::{json, Value};

const TO: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";

/// A node configuration whose `[chain]` lists `endpoints` (name, url).
fn config_with(db_url: &str, endpoints: &[(&str, String)], extra_chain: &str) -> String {
    let list: Vec<String> = endpoints
        .iter()
        .map(|(name, url)| format!("{{ name = \"{name}\", url = \"{url}\" }}"))
        .collect();
    config_toml(db_url, "http://unused", "n1", "finality = { confirmations = 1 }").replace(
        "rpc_url = \"http://unused\"",
        &format!(
            "rpc_urls = [{}]\nunhealthy_after_failures = 2\nmax_head_lag = 3\nprobe_max_backoff = \"1s\"\n{extra_chain}",
            list.join(", ")
        ),
    )
}

async fn endpoints(node: &TestNode) -> Vec<Value> {
    let (status, body) = node.request("GET", "/v1/ops/endpoints", None).await;
    assert_eq!(status, 200, "{body}");
    body["endpoints"].as_array().expect("endpoints").clone()
}

fn by_name<'a>(list: &'a [Value], name: &str) -> &'a Value {
    list.iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("endpoint {name} in {list:?}"))
}

async fn reorgs_counted(node: &TestNode) -> f64 {
    let (_, _) = node.request("GET", "/metrics", None).await;
    let handle = txmgr::daemon::metrics_recorder().expect("recorder");
    handle
        .render()
        .lines()
        .filter(|l| l.starts_with("txmgr_reorgs_total"))
        .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dead_a_lagging_and_a_swallowing_endpoint_lose_no_intent() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--block-time", "0.2"]).await;
    let lagging = RpcProxy::start(&anvil.rpc_url(), 1).await;
    let swallowing = RpcProxy::start(&anvil.rpc_url(), 2).await;
    let doomed = RpcProxy::start(&anvil.rpc_url(), 3).await;
    let node = TestNode::start(&config_with(
        &db.url,
        &[
            ("lagging", lagging.url()),
            ("swallowing", swallowing.url()),
            ("doomed", doomed.url()),
        ],
        "",
    ))
    .await;
    let first = endpoints(&node).await;
    assert_eq!(by_name(&first, "lagging")["reads"], true, "{first:?}");

    // One backend stops following the chain, one loses every broadcast.
    lagging.set(Faults {
        frozen_head: Some(anvil.block_number().await),
        ..Faults::default()
    });
    swallowing.set(Faults {
        swallow_sends: true,
        ..Faults::default()
    });
    let mut doomed = Some(doomed);
    for i in 0..40 {
        if i == 15 {
            drop(doomed.take()); // killed mid-burst
        }
        let body = json!({"submitter": DEV, "to": TO, "value": "1", "request_id": format!("r{i}")});
        let (status, answer) = node.request("POST", "/v1/transactions", Some(body)).await;
        assert_eq!(status, 202, "{answer}");
    }
    invariants::wait_mined(&db.pool, 40, Duration::from_secs(90)).await;
    wait_until(Duration::from_secs(60), || async {
        let confirmed: i64 =
            sqlx::query_scalar("SELECT count(*) FROM managed_tx WHERE state = 'CONFIRMED'")
                .fetch_one(&db.pool)
                .await
                .unwrap_or_default();
        confirmed == 40
    })
    .await;
    invariants::check(&db.pool, &anvil, DEV, 0).await;
    assert!(
        swallowing.counts().requests > 0,
        "the swallowing backend was sent to"
    );

    let seen = endpoints(&node).await;
    let lag = by_name(&seen, "lagging");
    assert_eq!(
        (lag["healthy"].as_bool(), lag["reason"].as_str()),
        (Some(false), Some("lagging")),
        "{seen:?}"
    );
    let dead = by_name(&seen, "doomed");
    assert_eq!(
        (dead["healthy"].as_bool(), dead["reason"].as_str()),
        (Some(false), Some("failing")),
        "{seen:?}"
    );
    let serving = by_name(&seen, "swallowing");
    assert_eq!(
        (serving["healthy"].as_bool(), serving["reads"].as_bool()),
        (Some(true), Some(true)),
        "reads moved to the only healthy endpoint: {seen:?}"
    );
    assert_eq!(reorgs_counted(&node).await, 0.0, "no reorg was imagined");
    let (status, ready) = node.request("GET", "/readyz", None).await;
    assert_eq!(status, 200, "one healthy endpoint is enough: {ready}");
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reads_leave_a_dead_endpoint_and_readiness_follows_the_last_one() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--block-time", "0.5"]).await;
    let first = RpcProxy::start(&anvil.rpc_url(), 4).await;
    let second = RpcProxy::start(&anvil.rpc_url(), 5).await;
    let node = TestNode::start(&config_with(
        &db.url,
        &[("first", first.url()), ("second", second.url())],
        "",
    ))
    .await;
    assert_eq!(by_name(&endpoints(&node).await, "first")["reads"], true);

    let killed = Instant::now();
    drop(first);
    wait_until(Duration::from_secs(20), || async {
        by_name(&endpoints(&node).await, "second")["reads"] == true
    })
    .await;
    // Reported, not asserted: timing belongs to the benchmark, not tests.
    eprintln!(
        "reads switched away from the dead endpoint after {:?}",
        killed.elapsed()
    );
    // Work goes on through the survivor.
    let body = json!({"submitter": DEV, "to": TO, "value": "1", "request_id": "after"});
    let (status, answer) = node.request("POST", "/v1/transactions", Some(body)).await;
    assert_eq!(status, 202, "{answer}");
    invariants::wait_mined(&db.pool, 1, Duration::from_secs(30)).await;

    drop(second);
    wait_until(Duration::from_secs(20), || async {
        node.request("GET", "/readyz", None).await.0 == 503
    })
    .await;
    let (_, ready) = node.request("GET", "/readyz", None).await;
    let reasons = ready["reasons"].to_string();
    assert!(reasons.contains("no healthy RPC endpoint"), "{ready}");
    node.stop().await;
}
