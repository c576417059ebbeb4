//! The shipped alert rules in a real Prometheus (README "Alerts and
//! dashboards"): a real daemon scraped every second with
//! `deploy/prometheus/txmgr-rules.yml`; three real conditions — a webhook
//! receiver answering 500, a submitter drained below `min_balance`, the RPC
//! endpoint gone — raise their alerts (asked through `/api/v1/alerts`), and
//! each resolves once the condition is fixed. The timings are printed.

use std::time::Duration;

use serde_json::json;

use crate::common::{
    cluster::{Cluster, ClusterSpec, SINK},
    daemon::DEV_KEYS,
    prometheus::Prometheus,
    receiver::Receiver,
    wait_until, Anvil,
};

const ETH: u128 = 1_000_000_000_000_000_000;
const HOOK_SECRET_VAR: &str = "TXMGR_ALERTS_HOOK_SECRET";

async fn set_balance(anvil: &Anvil, address: &str, wei: u128) {
    anvil
        .rpc("anvil_setBalance", json!([address, format!("{wei:#x}")]))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn real_conditions_raise_and_resolve_their_alerts_in_a_real_prometheus() {
    std::env::set_var(HOOK_SECRET_VAR, "alerts-secret");
    let receiver = Receiver::start(Box::new(|_| (500, None))).await;
    let spec = ClusterSpec {
        nodes: vec![],
        submitters: vec![0],
        strict: vec![],
        node_extra: "",
        confirmations: 1,
    };
    let anvil = Anvil::start_with(&["--block-time", "0.5"]).await;
    let mut cluster = Cluster::start(spec, anvil, None).await;
    let hook = format!(
        "\n[[webhooks]]\nname = \"ops\"\nurl = \"{url}\"\nsecret_env = \"{HOOK_SECRET_VAR}\"\n\
         backoff_initial = \"100ms\"\nbackoff_max = \"1s\"\nmax_attempts = 100\n",
        url = receiver.url
    );
    cluster
        .add_node_with("n1", |config| {
            config.replace(
                "[defaults]\n",
                &format!("[defaults]\nmin_balance = \"{}\"\n", 100 * ETH),
            ) + &hook
        })
        .await;
    let node = cluster.node_ref("n1");
    let prometheus = Prometheus::start(&[format!("127.0.0.1:{}", node.port)]).await;
    // Scraped, and nothing firing while all is well.
    wait_until(Duration::from_secs(30), || async {
        prometheus
            .query("up{job=\"txmgr\"} == 1")
            .await
            .is_ok_and(|r| r.len() == 1)
    })
    .await;
    let alerts = prometheus.api("alerts").await;
    let firing: Vec<&serde_json::Value> = alerts["alerts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["state"] == "firing")
        .collect();
    assert!(firing.is_empty(), "{firing:?}\n{}", prometheus.log());

    // 1. The webhook receiver answers 500 while events wait.
    let base = node.base();
    for i in 0..3 {
        let response = cluster
            .client
            .post(format!("{base}/v1/transactions"))
            .json(
                &json!({"submitter": DEV_KEYS[0].1, "to": SINK, "value": "1",
                          "request_id": format!("alert-{i}")}),
            )
            .send()
            .await
            .expect("create");
        assert_eq!(response.status().as_u16(), 202);
    }
    let webhook_failing = prometheus
        .wait_alert(
            "TxmgrWebhookFailing",
            &["pending", "firing"],
            Duration::from_secs(60),
        )
        .await;
    // 2. The submitter drained below min_balance (100 ETH).
    set_balance(&cluster.anvil, DEV_KEYS[0].1, ETH).await;
    let low_balance = prometheus
        .wait_alert("TxmgrLowBalance", &["firing"], Duration::from_secs(60))
        .await;

    // Fixed: both resolve.
    receiver.set_policy(Box::new(|_| (200, None)));
    set_balance(&cluster.anvil, DEV_KEYS[0].1, 10_000 * ETH).await;
    let webhook_resolved = prometheus
        .wait_alert("TxmgrWebhookFailing", &[], Duration::from_secs(60))
        .await;
    let balance_resolved = prometheus
        .wait_alert("TxmgrLowBalance", &[], Duration::from_secs(60))
        .await;

    // 3. The RPC endpoint stops answering: no healthy endpoint, pending at
    // once, firing after the rule's `for: 1m`; back: resolved.
    cluster.anvil.pause();
    let rpc_pending = prometheus
        .wait_alert(
            "TxmgrNoHealthyRpcEndpoint",
            &["pending", "firing"],
            Duration::from_secs(60),
        )
        .await;
    let rpc_firing = prometheus
        .wait_alert(
            "TxmgrNoHealthyRpcEndpoint",
            &["firing"],
            Duration::from_secs(120),
        )
        .await;
    cluster.anvil.resume();
    let rpc_resolved = prometheus
        .wait_alert("TxmgrNoHealthyRpcEndpoint", &[], Duration::from_secs(60))
        .await;
    println!(
        "condition -> alert: webhook 500 -> TxmgrWebhookFailing pending {webhook_failing:?}; \
         drained -> TxmgrLowBalance firing {low_balance:?}; RPC gone -> TxmgrNoHealthyRpcEndpoint \
         pending {rpc_pending:?}, firing {:?} after the condition; fixed -> resolved: webhook \
         {webhook_resolved:?}, balance {balance_resolved:?}, RPC {rpc_resolved:?}",
        rpc_pending + rpc_firing
    );
}
