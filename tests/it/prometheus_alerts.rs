//! The shipped alert rules in a real Prometheus (README "Alerts and
//! dashboards"): a real daemon scraped every second with
//! `deploy/prometheus/txmgr-rules.yml`; three real conditions — a webhook
//! receiver answering 500, a submitter drained below `min_balance`, the RPC
//! endpoint gone — raise their alerts (asked through `/api/v1/alerts`), and
//! each resolves once the condition is fixed. The timings are printed.

use std::time::Duration;

use serde_json::json;

use crate::common::{
    daemon::DEV_KEYS,
    prometheus::{Observed, ETH},
    receiver::Receiver,
    Anvil,
};

async fn set_balance(anvil: &Anvil, address: &str, wei: u128) {
    anvil
        .rpc("anvil_setBalance", json!([address, format!("{wei:#x}")]))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn real_conditions_raise_and_resolve_their_alerts_in_a_real_prometheus() {
    let receiver = Receiver::start(Box::new(|_| (500, None))).await;
    let observed = Observed::start(&receiver.url).await;
    let (cluster, prometheus) = (&observed.cluster, &observed.prometheus);
    // Scraped, and nothing firing while all is well.
    let alerts = prometheus.api("alerts").await;
    let firing: Vec<&serde_json::Value> = alerts["alerts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["state"] == "firing")
        .collect();
    assert!(firing.is_empty(), "{firing:?}\n{}", prometheus.log());

    // 1. The webhook receiver answers 500 while events wait.
    observed.transfers("alert", 3).await;
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
