//! The ops page's charts and transaction view in headless Chromium (README
//! "Operations"): after a workload on anvil without automining — one
//! intent bumped before it is mined — the charts hold points drawn from the
//! node's history, and the transaction view of the bumped intent (opened
//! by its request id) lists both attempts, its state history and its feed
//! row. Screenshots of both views go to `.tools/screenshots/` (kept by CI).

use std::{path::PathBuf, time::Duration};

use serde_json::{json, Value};

use crate::common::{
    browser::{chromium_or_skip, dump_dom, screenshot},
    node::{config_toml, TestNode},
    wait_until, Anvil, TestDb, DEV,
};

const SINK: &str = "0x000000000000000000000000000000000000dead";

/// `data-points` of the chart box `id` in `dom`.
fn points(dom: &str, id: &str) -> usize {
    dom.split(&format!("id=\"{id}\""))
        .nth(1)
        .and_then(|rest| rest.split("data-points=\"").nth(1))
        .and_then(|rest| rest.split('"').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn charts_have_points_and_the_transaction_view_lists_both_attempts_of_a_bumped_intent() {
    let Some(browser) = chromium_or_skip() else {
        return;
    };
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let toml = config_toml(&db.url, &anvil.rpc_url(), "n1", "")
        + "[defaults]\nfinality = { confirmations = 1 }\nresubmit_interval = \"1s\"\n\
           max_resubmits = 100\ngas_bump = { enabled = true, multiplier = 1.5 }\n";
    let node = TestNode::start(&toml).await;
    for i in 0..3 {
        let (status, answer) = node
            .request(
                "POST",
                "/v1/transactions",
                Some(json!({"submitter": DEV, "to": SINK, "value": "1",
                            "request_id": format!("view-{i}")})),
            )
            .await;
        assert_eq!(status, 202, "{answer}");
    }
    // Not mined: the resubmit pass bumps the first one.
    db.wait_count(
        "SELECT count(*) FROM tx_attempt a JOIN managed_tx m ON m.tx_id = a.tx_id
          WHERE m.request_id = 'view-0' AND a.kind = 'bump'",
        1,
    )
    .await;
    wait_until(Duration::from_secs(60), || async {
        if db
            .count("SELECT count(*) FROM managed_tx WHERE state = 'CONFIRMED'")
            .await
            == 3
        {
            return true;
        }
        anvil.mine().await;
        false
    })
    .await;
    // Two samples (10 s apart) with the workload in them.
    wait_until(Duration::from_secs(40), || async {
        let (_, history) = node.request("GET", "/v1/ops/history", None).await;
        let samples = history["samples"].as_array().cloned().unwrap_or_default();
        samples.len() >= 2
            && samples
                .iter()
                .map(|s| s["creates"].as_u64().unwrap_or(0))
                .sum::<u64>()
                == 3
    })
    .await;
    let (_, history) = node.request("GET", "/v1/ops/history", None).await;
    assert_eq!(history["submitters"][0], DEV, "{history}");
    // The submitter's own ring starts with its first active sample.
    wait_until(Duration::from_secs(40), || async {
        let (_, mine) = node
            .request("GET", &format!("/v1/ops/history/submitters/{DEV}"), None)
            .await;
        mine["samples"].as_array().is_some_and(|s| s.len() >= 2)
    })
    .await;
    let (status, detail) = node
        .request(
            "GET",
            &format!("/v1/ops/transactions/view-0?submitter={DEV}"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{detail}");
    let hashes: Vec<String> = detail["attempts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["tx_hash"].as_str().map(str::to_owned))
        .collect();
    assert!(hashes.len() >= 2, "{detail}");
    assert_eq!(detail["feed"][0]["state"], "CONFIRMED", "{detail}");
    // By an attempt's hash too.
    let (status, by_hash) = node
        .request("GET", &format!("/v1/ops/transactions/{}", hashes[1]), None)
        .await;
    assert_eq!(
        (status, &by_hash["transaction"]["request_id"]),
        (200, &Value::from("view-0"))
    );

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}/ops/", listener.local_addr().expect("addr"));
    let app = node.app.clone();
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let url = format!("{base}#tx=view-0&submitter={DEV}");
    let mut dom = String::new();
    for _ in 0..5 {
        dom = dump_dom(browser, &url, 8000).await;
        if points(&dom, "chart-rates") >= 2 && hashes.iter().all(|h| dom.contains(h.as_str())) {
            break;
        }
    }
    for chart in [
        "chart-rates",
        "chart-ack",
        "chart-work",
        "chart-rpc",
        "chart-submitter",
    ] {
        assert!(points(&dom, chart) >= 2, "{chart} has no points:\n{dom}");
    }
    assert!(dom.contains("<canvas"), "uPlot drew no canvas:\n{dom}");
    for hash in &hashes {
        assert!(
            dom.contains(hash.as_str()),
            "attempt {hash} not listed:\n{dom}"
        );
    }
    assert!(
        dom.contains(">bump<") && dom.contains(">original<"),
        "{dom}"
    );
    assert!(
        dom.contains("attempt 2 signed (bump)"),
        "the state history:\n{dom}"
    );
    assert!(dom.contains(">CONFIRMED<"), "the feed row:\n{dom}");

    let shots = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".tools/screenshots");
    screenshot(
        browser,
        &base,
        &shots.join("ops-charts.png"),
        (1400, 1000),
        8000,
    )
    .await;
    screenshot(
        browser,
        &url,
        &shots.join("ops-transaction.png"),
        (1400, 2400),
        8000,
    )
    .await;
    server.abort();
    node.stop().await;
}
