//! The spend limit (README "Guardrails"): a submitter's `value` per rolling
//! window, enforced by the leader where it draws nonces, under the cursor
//! lock, with a durable ledger. Two real nodes and a burst of three times
//! the limit: no window ever holds more than the limit, a fail-over of the
//! leader mid-burst does not reset the ledger, waiting intents go out as
//! the window frees room, and one that cannot fit is refused.

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::{
    cluster::{Cluster, ClusterSpec, SINK},
    node::{config_toml, TestNode},
    wait_until, Anvil, TestDb, DEV,
};

/// 10 wei per rolling 4 s.
const POLICY: &str =
    "\n[defaults.policy]\nspend_limit = { value = \"10\", window = \"4s\" }\nspend_wait = \"10m\"";

fn transfer(submitter: &str, request_id: &str, value: &str) -> Value {
    json!({"submitter": submitter, "to": SINK, "value": value, "request_id": request_id})
}

/// The most `value` any 4 s window of the ledger holds.
async fn fullest_window(db: &TestDb) -> i64 {
    sqlx::query_scalar(
        "SELECT COALESCE(max(w), 0)::bigint FROM (
            SELECT (SELECT sum(l2.value) FROM spend_ledger l2
                     WHERE l2.at > l1.at - interval '4 seconds' AND l2.at <= l1.at) AS w
              FROM spend_ledger l1) s",
    )
    .fetch_one(&db.pool)
    .await
    .expect("windows")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_burst_of_three_limits_over_two_nodes_never_overfills_a_window_across_a_fail_over() {
    let spec = ClusterSpec {
        nodes: vec!["n1", "n2"],
        submitters: vec![0],
        strict: vec![],
        node_extra: POLICY,
        confirmations: 1,
    };
    let anvil = Anvil::start_with(&["--block-time", "0.2"]).await;
    let mut cluster = Cluster::start(spec, anvil, None).await;
    let submitter = cluster.submitters[0].clone();
    let bases = [cluster.node_ref("n1").base(), cluster.node_ref("n2").base()];
    // 30 wei asked at once through both nodes: three windows' worth.
    let creates = (0..30).map(|i| {
        let client = cluster.client.clone();
        let base = bases[i % 2].clone();
        let body = transfer(&submitter, &format!("burst-{i:02}"), "1");
        async move {
            client
                .post(format!("{base}/v1/transactions"))
                .json(&body)
                .send()
                .await
                .map(|r| r.status().as_u16())
        }
    });
    let statuses = futures::future::join_all(creates).await;
    assert!(
        statuses.iter().all(|s| matches!(s, Ok(202))),
        "{statuses:?}"
    );
    // One that can never fit is refused at once.
    let (status, answer) = {
        let response = cluster
            .client
            .post(format!("{}/v1/transactions", bases[0]))
            .json(&transfer(&submitter, "too-big", "11"))
            .send()
            .await
            .expect("create");
        let status = response.status().as_u16();
        (
            status,
            response.json::<Value>().await.unwrap_or(Value::Null),
        )
    };
    assert_eq!(status, 202, "{answer}");

    // The first window fills; the rest wait, visibly.
    wait_until(Duration::from_secs(30), || async {
        cluster
            .db
            .count("SELECT count(*) FROM managed_tx WHERE state = 'QUEUED' AND sub_state = 'spend_limited'")
            .await
            > 0
    })
    .await;
    let ledger = cluster.db.count("SELECT count(*) FROM spend_ledger").await;
    assert!(ledger <= 10, "{ledger} allocated in the first window");
    // Any node shows the window: its ops view and its gauges.
    let view: Value = cluster
        .client
        .get(format!("{}/v1/ops/actors", bases[1]))
        .send()
        .await
        .expect("actors")
        .json()
        .await
        .expect("json");
    let spend = view["submitters"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["submitter"] == submitter.as_str())
        .map(|s| s["spend"].clone())
        .unwrap_or(Value::Null);
    assert_eq!(spend["limit_wei"], "10", "{view}");
    assert_eq!(spend["window"], "4s", "{view}");
    let spent: u64 = spend["spent_wei"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(99);
    assert!(spent <= 10, "{spend}");
    wait_until(Duration::from_secs(20), || async {
        let metrics = cluster
            .client
            .get(format!("{}/metrics", bases[1]))
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .unwrap_or_default();
        metrics.contains(&format!(
            "txmgr_spend_limit_value_wei{{chain=\"default\",submitter=\"{submitter}\"}} 10"
        ))
    })
    .await;

    // The leader dies mid-burst; the other node takes over with the ledger.
    let leader = cluster.leader_of(&submitter).await.expect("a leader");
    cluster.node(&leader).kill().await;
    wait_until(Duration::from_secs(90), || async {
        cluster
            .db
            .count("SELECT count(*) FROM managed_tx WHERE request_id LIKE 'burst-%' AND state = 'CONFIRMED'")
            .await
            == 30
    })
    .await;
    assert!(
        fullest_window(&cluster.db).await <= 10,
        "a 4 s window held more than 10 wei"
    );
    let (state, sub_state): (String, Option<String>) =
        sqlx::query_as("SELECT state, sub_state FROM managed_tx WHERE request_id = 'too-big'")
            .fetch_one(&cluster.db.pool)
            .await
            .expect("too-big");
    assert_eq!(
        (state.as_str(), sub_state.as_deref()),
        ("REJECTED", Some("spend_limited"))
    );
    let on_chain: i64 = cluster
        .db
        .count("SELECT count(*) FROM managed_tx WHERE request_id LIKE 'burst-%' AND receipt IS NOT NULL")
        .await;
    assert_eq!(on_chain, 30);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_intent_without_room_for_spend_wait_is_rejected() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let toml = config_toml(&db.url, &anvil.rpc_url(), "n1", "")
        + "[defaults]\nfinality = { confirmations = 1 }\n[defaults.policy]\n\
           spend_limit = { value = \"2\", window = \"1h\" }\nspend_wait = \"1s\"\n";
    let node = TestNode::start(&toml).await;
    for i in 0..3 {
        let (status, answer) = node
            .request(
                "POST",
                "/v1/transactions",
                Some(transfer(DEV, &format!("w-{i}"), "1")),
            )
            .await;
        assert_eq!(status, 202, "{answer}");
    }
    db.wait_count(
        "SELECT count(*) FROM managed_tx WHERE state = 'CONFIRMED'",
        2,
    )
    .await;
    db.wait_count(
        "SELECT count(*) FROM managed_tx WHERE request_id = 'w-2' AND state = 'REJECTED'
            AND sub_state = 'spend_limited' AND nonce IS NULL",
        1,
    )
    .await;
    node.stop().await;
}
