//! The ops dashboard in a real browser: headless Chromium loads `/ops/` from
//! a node serving on a loopback port, runs the page's script, and the
//! rendered DOM shows the submitter's row with its role, mailbox depth and
//! balance, and the webhooks table.
//! Skipped (with a message) when no Chromium binary is installed, unless
//! `TXMGR_REQUIRE_CHROMIUM` is set (`scripts/test.sh` sets it once it has one)
//! or `CI=true`: in CI a missing browser fails.

use std::time::Duration;

use crate::common::{receiver::Receiver, Scenario, DEV};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dashboard_renders_the_submitter_row_in_headless_chromium() {
    let Some(browser) = crate::common::browser::chromium_or_skip() else {
        return;
    };
    let receiver = Receiver::always_ok().await;
    std::env::set_var("TXMGR_DASHBOARD_HOOK_SECRET", "s");
    let Scenario {
        db: _db,
        anvil: _anvil,
        node,
    } = Scenario::single_node(&format!(
        "min_balance = \"1000\"\n[[webhooks]]\nname = \"dash-hook\"\nurl = \"{}\"\n\
         secret_env = \"TXMGR_DASHBOARD_HOOK_SECRET\"",
        receiver.url
    ))
    .await;
    let (status, _) = node
        .request(
            "POST",
            "/v1/transactions",
            Some(json!({"submitter": DEV, "to": DEV, "value": "1"})),
        )
        .await;
    assert_eq!(status, 202);
    // Paused after its first intent: the row says so and offers a resume.
    let (status, answer) = node
        .request(
            "POST",
            &format!("/v1/ops/submitters/{DEV}/pause"),
            Some(json!({"reason": "dashboard check"})),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/ops/", listener.local_addr().expect("addr"));
    let app = node.app.clone();
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let mut dom = String::new();
    for _ in 0..5 {
        dom = crate::common::browser::dump_dom(browser, &url, 5000).await;
        if dom.contains(DEV)
            && dom.contains("role leader")
            && dom.contains(" / 1000<")
            && dom.contains("dash-hook")
            && dom.contains("PAUSED (api): dashboard check")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(
        dom.contains(DEV),
        "no submitter row in the rendered DOM:\n{dom}"
    );
    assert!(
        dom.contains("class=\"role leader\""),
        "the row shows the role:\n{dom}"
    );
    assert!(
        dom.contains(" / 1000<"),
        "the row shows balance / min_balance:\n{dom}"
    );
    assert!(dom.contains(">dash-hook<"), "the webhook row:\n{dom}");
    assert!(
        dom.contains("PAUSED (api): dashboard check") && dom.contains("class=\"resume\">resume<"),
        "the row shows the pause and a resume button:\n{dom}"
    );
    // The mailbox-depth column holds a number.
    // In the actors table: the charts' submitter picker, above it, names
    // the submitter too once the history has loaded.
    let table = dom.split("id=\"actors\"").nth(1).unwrap_or("");
    let row = table.split(DEV).nth(1).unwrap_or("");
    let cells: Vec<&str> = row
        .split("<td class=\"num\">")
        .skip(1)
        .map(|c| c.split('<').next().unwrap_or(""))
        .collect();
    assert!(
        cells.get(2).is_some_and(|c| c.parse::<u64>().is_ok()),
        "mailbox depth cell: {cells:?}"
    );
    // For a human look: TXMGR_DASHBOARD_SCREENSHOT=/tmp/ops.png cargo test --test ops_dashboard
    if let Ok(path) = std::env::var("TXMGR_DASHBOARD_SCREENSHOT") {
        let path = std::path::PathBuf::from(path);
        crate::common::browser::screenshot(browser, &url, &path, (1400, 700), 5000).await;
    }
    server.abort();
    node.stop().await;
}
