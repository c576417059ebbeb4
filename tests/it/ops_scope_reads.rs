//! Every ops read obeys a scoped ops token's allow-list (README "Security",
//! issue 47 item 2): another submitter's transaction reads as 404 in the
//! ops transaction view (by id, attempt hash or request id), the history
//! lists only the token's submitters and withholds the node-wide samples,
//! the webhook statuses (which count every submitter's events) are
//! withheld, and `/metrics` (every balance and spend window) needs an
//! unscoped token.

use crate::common::node::token_toml;
use crate::common::{
    node::{config_toml, TestNode},
    transfer_from, wait_until, Anvil, TestDb, DEV,
};
use serde_json::Value;
use std::time::Duration;

const OTHER: &str = "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc";
const OPS_TOKEN: &str = "reads-full-ops-token";
const OTHERS_OPS_TOKEN: &str = "reads-ops-token-of-other";
const DEVS_OPS_TOKEN: &str = "reads-ops-token-of-dev";

fn auth_toml() -> String {
    token_toml("ops", "ops", OPS_TOKEN, &[])
        + &token_toml("ops-other", "ops", OTHERS_OPS_TOKEN, &[OTHER])
        + &token_toml("ops-dev", "ops", DEVS_OPS_TOKEN, &[DEV])
}

fn strings(body: &Value, key: &str) -> Vec<String> {
    body[key]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_scoped_ops_token_reads_nothing_of_another_submitter() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let toml = config_toml(&db.url, &anvil.rpc_url(), "n1", "") + &auth_toml();
    let node = TestNode::start(&toml).await;
    let full = Some(OPS_TOKEN);
    let others = Some(OTHERS_OPS_TOKEN);
    let devs = Some(DEVS_OPS_TOKEN);

    // One DEV transaction with a signed attempt.
    let (status, body) = node
        .request_as(
            full,
            "POST",
            "/v1/transactions",
            Some(transfer_from(DEV, "order-42")),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let tx_id = body["tx_id"].as_str().expect("tx_id").to_owned();
    let tx_path = format!("/v1/transactions/{tx_id}");
    wait_until(Duration::from_secs(30), || async {
        let (_, body) = node.request_as(full, "GET", &tx_path, None).await;
        body["tx_hash"].is_string()
    })
    .await;
    let (_, body) = node.request_as(full, "GET", &tx_path, None).await;
    let hash = body["tx_hash"].as_str().expect("an attempt").to_owned();

    // The transaction view: 404 for the other submitter's token by every
    // key, 200 for DEV's own token and the unscoped one.
    for key in [
        tx_id.clone(),
        hash.clone(),
        format!("order-42?submitter={DEV}"),
    ] {
        let path = format!("/v1/ops/transactions/{key}");
        let (status, body) = node.request_as(others, "GET", &path, None).await;
        assert_eq!(status, 404, "{path}: {body}");
        assert_eq!(body["error"]["code"], "not_found", "{body}");
        for token in [full, devs] {
            let (status, body) = node.request_as(token, "GET", &path, None).await;
            assert_eq!(status, 200, "{path}: {body}");
            assert_eq!(body["transaction"]["tx_id"], tx_id.as_str(), "{body}");
        }
    }

    // Webhook statuses count every submitter's events: withheld from a
    // scoped token, shown to an unscoped one.
    sqlx::query(
        "INSERT INTO webhook_cursor (chain_id, webhook, owner_node, fencing_token, expires_at, last_error)
         VALUES (31337, 'hook', 'n1', 1, now(), 'HTTP 500 for 0xf39f…')",
    )
    .execute(&db.pool)
    .await
    .expect("webhook cursor");
    let (status, body) = node.request_as(full, "GET", "/v1/ops/webhooks", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["webhooks"].as_array().map(Vec::len), Some(1), "{body}");
    for token in [others, devs] {
        let (status, body) = node
            .request_as(token, "GET", "/v1/ops/webhooks", None)
            .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["webhooks"], serde_json::json!([]), "{body}");
    }

    // `/metrics` lists every submitter's balance and spend: an unscoped
    // token only.
    let (status, body) = node.request_as(full, "GET", "/metrics", None).await;
    assert_eq!(status, 200, "{body}");
    for token in [others, devs] {
        let (status, body) = node.request_as(token, "GET", "/metrics", None).await;
        assert_eq!(status, 403, "{body}");
        assert_eq!(body["error"]["code"], "forbidden", "{body}");
    }

    // The history: once DEV has a ring (one sample every 10 s), the other
    // submitter's token sees neither DEV nor the node-wide samples; DEV's
    // own token sees DEV's ring and not the node-wide samples either.
    wait_until(Duration::from_secs(30), || async {
        let (_, body) = node.request_as(full, "GET", "/v1/ops/history", None).await;
        strings(&body, "submitters").contains(&DEV.to_owned())
            && body["samples"].as_array().is_some_and(|s| !s.is_empty())
    })
    .await;
    let (status, body) = node
        .request_as(others, "GET", "/v1/ops/history", None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(strings(&body, "submitters").is_empty(), "{body}");
    assert_eq!(body["samples"], serde_json::json!([]), "{body}");
    let (status, body) = node.request_as(devs, "GET", "/v1/ops/history", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(strings(&body, "submitters"), vec![DEV.to_owned()], "{body}");
    assert_eq!(body["samples"], serde_json::json!([]), "{body}");
    let path = format!("/v1/ops/history/submitters/{DEV}");
    let (status, body) = node.request_as(others, "GET", &path, None).await;
    assert_eq!(status, 404, "{body}");
    for token in [full, devs] {
        let (status, body) = node.request_as(token, "GET", &path, None).await;
        assert_eq!(status, 200, "{body}");
    }
    node.stop().await;
}
