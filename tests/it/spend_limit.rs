//! The spend limit (README "Guardrails"): a submitter's `value` per rolling
//! window, enforced by the leader where it draws nonces, under the cursor
//! lock, with a durable ledger. Two real nodes and a burst of three times
//! the limit: no window ever holds more than the limit, a fail-over of the
//! leader mid-burst does not reset the ledger, waiting intents go out as
//! the window frees room, and one that cannot fit is refused. Fees: each
//! intent reserves its worst case, bumps raise it, receipts true it up.

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::{
    cluster::{Cluster, ClusterSpec, SINK},
    node::{config_toml, TestNode},
    wait_until, Anvil, TestDb, DEV,
};

/// 10 wei per rolling 4 s (and fees limited far above what is paid).
const POLICY: &str = "\n[defaults.policy]\nspend_limit = { value = \"10\", fees = \"1000000000000000000000\", window = \"4s\" }\nspend_wait = \"10m\"";

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
        )) && metrics.contains(&format!(
            "txmgr_spend_limit_fees_wei{{chain=\"default\",submitter=\"{submitter}\"}} 1000000000000000000000"
        )) && metrics.contains(&format!(
            "txmgr_spend_window_fees_wei{{chain=\"default\",submitter=\"{submitter}\"}}"
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

/// `eth_estimateGas` calls the node made, from its `/metrics`.
async fn estimates_made(node: &TestNode) -> u64 {
    let (_, text) = node.text("/metrics").await;
    text.lines()
        .filter(|l| {
            l.starts_with("txmgr_rpc_calls_total{") && l.contains("method=\"eth_estimateGas\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_intent_without_room_for_spend_wait_is_rejected() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let toml = config_toml(&db.url, &anvil.rpc_url(), "n1", "")
        + "[defaults]\nfinality = { confirmations = 1 }\n[defaults.policy]\n\
           spend_limit = { value = \"2\", window = \"1h\" }\nspend_wait = \"4s\"\n";
    let node = TestNode::start(&toml).await;
    for i in 0..5 {
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
        "SELECT count(*) FROM managed_tx WHERE request_id IN ('w-2', 'w-3', 'w-4')
            AND state = 'REJECTED' AND sub_state = 'spend_limited' AND nonce IS NULL",
        3,
    )
    .await;
    // The leader looked for room every second for 4 s, each waiting
    // intent estimated once (kept while it waits), not at every look.
    let estimates = estimates_made(&node).await;
    assert!(
        (5..=6).contains(&estimates),
        "{estimates} gas estimates for 5 intents"
    );
    node.stop().await;
}

/// 21,000 gas at a 10 gwei max fee: one transfer's worst case, wei.
const WORST_CASE: u128 = 21_000 * 10_000_000_000;

fn priced_transfer(request_id: &str, gas_limit: u64) -> Value {
    json!({"submitter": DEV, "to": SINK, "value": "0", "request_id": request_id,
           "gas_limit": gas_limit, "max_fee_per_gas": "10000000000",
           "max_priority_fee_per_gas": "100000000"})
}

/// `(worst case reserved, paid)` of each ledger row, with what its receipt
/// says was paid (`gasUsed × effectiveGasPrice`).
async fn ledger_fees(db: &TestDb) -> Vec<(u128, Option<u128>, Option<u128>)> {
    // (reserved, paid, gasUsed, effectiveGasPrice) as text.
    type Row = (String, Option<String>, Option<String>, Option<String>);
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT l.fees_reserved::text, l.fees_paid::text,
                m.receipt->>'gasUsed', m.receipt->>'effectiveGasPrice'
           FROM spend_ledger l JOIN managed_tx m ON m.tx_id = l.tx_id ORDER BY l.at",
    )
    .fetch_all(&db.pool)
    .await
    .expect("ledger");
    let hex = |h: &str| u128::from_str_radix(h.trim_start_matches("0x"), 16).expect("quantity");
    rows.into_iter()
        .map(|(reserved, paid, gas, price)| {
            let receipt = gas.zip(price).map(|(g, p)| hex(&g) * hex(&p));
            (
                reserved.parse().expect("reserved"),
                paid.map(|p| p.parse().expect("paid")),
                receipt,
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fees_reserve_their_worst_case_count_bumps_and_are_trued_up_at_the_receipt() {
    let db = TestDb::migrated().await;
    // Nothing is mined until the test mines: reservations are all there is.
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let limit = 3 * WORST_CASE;
    let toml = config_toml(&db.url, &anvil.rpc_url(), "n1", "")
        + &format!(
            "[defaults]\nfinality = {{ confirmations = 1 }}\nresubmit_interval = \"2s\"\n\
             max_resubmits = 1000\ngas_bump = {{ enabled = true, multiplier = 1.5 }}\n\
             [defaults.policy]\nspend_limit = {{ fees = \"{limit}\", window = \"1h\" }}\n\
             spend_wait = \"10m\"\n"
        );
    let node = TestNode::start(&toml).await;
    for i in 0..8 {
        let (status, answer) = node
            .request(
                "POST",
                "/v1/transactions",
                Some(priced_transfer(&format!("fee-{i}"), 21_000)),
            )
            .await;
        assert_eq!(status, 202, "{answer}");
    }
    // Its worst case alone is above the limit: refused without a nonce.
    let (status, answer) = node
        .request(
            "POST",
            "/v1/transactions",
            Some(priced_transfer("too-dear", 100_000)),
        )
        .await;
    assert_eq!(status, 202, "{answer}");

    // Three worst cases fill the limit; the other five wait, visibly.
    db.wait_count(
        "SELECT count(*) FROM managed_tx WHERE state = 'QUEUED' AND sub_state = 'spend_limited'",
        5,
    )
    .await;
    db.wait_count(
        "SELECT count(*) FROM managed_tx WHERE request_id = 'too-dear' AND state = 'REJECTED'
            AND sub_state = 'spend_limited' AND nonce IS NULL",
        1,
    )
    .await;
    let ledger = ledger_fees(&db).await;
    assert_eq!(ledger.len(), 3, "{ledger:?}");
    assert!(ledger
        .iter()
        .all(|(reserved, paid, _)| *reserved >= WORST_CASE && paid.is_none()));

    // A bump is never blocked by the limit, but its dearer worst case counts.
    db.wait_count(
        "SELECT count(*) FROM spend_ledger l
          WHERE l.fees_reserved = (SELECT max(a.gas_limit * a.max_fee_per_gas) FROM tx_attempt a
                                    WHERE a.tx_id = l.tx_id)
            AND EXISTS (SELECT 1 FROM tx_attempt a WHERE a.tx_id = l.tx_id AND a.kind = 'bump')",
        3,
    )
    .await;
    let (_, view) = node.request("GET", "/v1/ops/actors", None).await;
    let spend = view["submitters"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["submitter"] == DEV.to_lowercase())
        .map(|s| s["spend"].clone())
        .unwrap_or(Value::Null);
    assert_eq!(spend["fees_limit_wei"], limit.to_string(), "{view}");
    assert!(spend.get("limit_wei").is_none(), "{spend}");
    assert_eq!(spend["waiting"], 5, "{spend}");
    let counted: u128 = spend["fees_spent_wei"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    assert!(counted > limit, "bumps count above the limit: {spend}");
    assert_eq!(
        spend["fees_spent_wei"], spend["fees_reserved_wei"],
        "{spend}"
    );

    // Mined: each receipt trues its row up to what was paid (far below the
    // 10 gwei worst case), which frees room for the waiting ones well
    // inside the hour.
    wait_until(Duration::from_secs(90), || async {
        if db
            .count("SELECT count(*) FROM managed_tx WHERE request_id LIKE 'fee-%' AND state = 'CONFIRMED'")
            .await
            == 8
        {
            return true;
        }
        anvil.mine().await;
        false
    })
    .await;
    let ledger = ledger_fees(&db).await;
    assert_eq!(ledger.len(), 8, "{ledger:?}");
    for (_, paid, receipt) in &ledger {
        assert!(paid.is_some() && paid == receipt, "{ledger:?}");
    }
    let paid: u128 = ledger.iter().filter_map(|(_, p, _)| *p).sum();
    assert!(paid <= limit, "{paid} paid over a {limit} limit");
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_intent_given_a_nonce_again_is_counted_again_in_the_window_of_its_new_send() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let toml = config_toml(&db.url, &anvil.rpc_url(), "n1", "")
        + "[defaults]\nfinality = { confirmations = 1 }\n[defaults.policy]\n\
           spend_limit = { value = \"5\", window = \"1h\" }\n";
    let node = TestNode::start(&toml).await;
    // Held by a pause while its earlier allocation is staged: a ledger row
    // two hours old, as an intent requeued after a transaction that is not
    // ours took its nonce has.
    let (status, answer) = node
        .request(
            "POST",
            &format!("/v1/ops/submitters/{DEV}/pause"),
            Some(json!({"reason": "staging"})),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = node
        .request(
            "POST",
            "/v1/transactions",
            Some(transfer(DEV, "again", "1")),
        )
        .await;
    assert_eq!(status, 202, "{answer}");
    sqlx::query(
        "INSERT INTO spend_ledger (tx_id, chain_id, submitter, value, at)
         SELECT tx_id, chain_id, submitter, 1, now() - interval '2 hours'
           FROM managed_tx WHERE request_id = 'again'",
    )
    .execute(&db.pool)
    .await
    .expect("stale ledger row");
    let (status, answer) = node
        .request(
            "POST",
            &format!("/v1/ops/submitters/{DEV}/resume"),
            Some(json!({"reason": "staged"})),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    db.wait_count(
        "SELECT count(*) FROM managed_tx WHERE request_id = 'again' AND state = 'CONFIRMED'",
        1,
    )
    .await;
    // Its new send is in the current window, not two hours back.
    assert_eq!(
        db.count("SELECT count(*) FROM spend_ledger WHERE at > now() - interval '5 minutes'")
            .await,
        1
    );
    node.stop().await;
}
