//! An ops token with a submitter allow-list (README "Security"): it acts on,
//! and sees, only its own submitters — restart, unprotect, the actors and
//! cluster views, and webhook dead letters and their redelivery — and it
//! cannot reload the whole node.

use crate::common::node::token_toml;
use crate::common::{
    node::{config_toml, TestNode},
    transfer_from, wait_until, Anvil, TestDb, DEV,
};
use serde_json::{json, Value};
use std::time::Duration;

const OTHER: &str = "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc";
const OPS_TOKEN: &str = "full-ops-token-for-tests";
const SCOPED_OPS_TOKEN: &str = "scoped-ops-token-for-tests";

fn auth_toml() -> String {
    token_toml("ops", "ops", OPS_TOKEN, &[])
        + &token_toml("ops-other", "ops", SCOPED_OPS_TOKEN, &[OTHER])
}

/// The submitters listed under `key` (`submitters` of the actors view,
/// `leases` of the cluster view).
fn listed(body: &Value, key: &str) -> Vec<String> {
    body[key]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|row| row["submitter"].as_str().map(str::to_owned))
        .collect()
}

/// A dead letter of webhook `hook` for a funds event of `submitter` (the
/// feed row needs no transaction); returns the dead letter's id.
async fn dead_letter(db: &TestDb, hook: &str, submitter: &str) -> i64 {
    sqlx::query_scalar(
        "WITH feed AS (
             INSERT INTO tx_completion (chain_id, submitter, state, balance_wei, min_balance_wei)
             VALUES (31337, $2, 'LOW_BALANCE', 1, 2) RETURNING seq)
         INSERT INTO webhook_dead_letter (chain_id, webhook, delivery_id, feed_seq, attempts, last_error)
         SELECT 31337, $1, $1 || ':' || seq, seq, 3, 'HTTP 500' FROM feed RETURNING id",
    )
    .bind(hook)
    .bind(submitter)
    .fetch_one(&db.pool)
    .await
    .expect("dead letter")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_ops_token_with_an_allow_list_acts_on_and_sees_only_its_submitters() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let toml = config_toml(&db.url, &anvil.rpc_url(), "n1", "") + &auth_toml();
    let node = TestNode::start(&toml).await;
    let full = Some(OPS_TOKEN);
    let scoped = Some(SCOPED_OPS_TOKEN);

    // DEV has an actor and a lease.
    let (status, body) = node
        .request_as(
            full,
            "POST",
            "/v1/transactions",
            Some(transfer_from(DEV, "s1")),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    wait_until(Duration::from_secs(30), || async {
        let (_, body) = node.request_as(full, "GET", "/v1/ops/cluster", None).await;
        listed(&body, "leases").contains(&DEV.to_owned())
    })
    .await;
    let (status, body) = node.request_as(full, "GET", "/v1/ops/actors", None).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        listed(&body, "submitters").contains(&DEV.to_owned()),
        "{body}"
    );

    // The views hide DEV from the scoped token; the node and pools stay.
    let (status, body) = node.request_as(scoped, "GET", "/v1/ops/actors", None).await;
    assert_eq!(status, 200, "{body}");
    assert!(listed(&body, "submitters").is_empty(), "{body}");
    assert!(body["chains"][0]["pools"].is_object(), "{body}");
    let (status, body) = node
        .request_as(scoped, "GET", "/v1/ops/cluster", None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(listed(&body, "leases").is_empty(), "{body}");
    let (status, body) = node
        .request_as(scoped, "GET", "/v1/ops/endpoints", None)
        .await;
    assert_eq!(status, 200, "{body}");

    // Actions on DEV: 403 naming the submitter, nothing done, nothing audited.
    let before: i64 = sqlx::query_scalar("SELECT count(*) FROM ops_audit")
        .fetch_one(&db.pool)
        .await
        .expect("audit count");
    let unprotect = json!({"reason": "not mine"});
    for (path, body) in [
        (format!("/v1/ops/submitters/{DEV}/restart"), None),
        (
            format!("/v1/ops/submitters/{DEV}/unprotect"),
            Some(unprotect.clone()),
        ),
    ] {
        let (status, answer) = node.request_as(scoped, "POST", &path, body).await;
        assert_eq!(status, 403, "{path}: {answer}");
        assert_eq!(answer["error"]["code"], "forbidden", "{answer}");
        assert_eq!(answer["error"]["field"], "submitter", "{answer}");
    }
    let (status, answer) = node
        .request_as(scoped, "POST", "/v1/ops/reload", None)
        .await;
    assert_eq!(status, 403, "{answer}");
    let after: i64 = sqlx::query_scalar("SELECT count(*) FROM ops_audit")
        .fetch_one(&db.pool)
        .await
        .expect("audit count");
    assert_eq!(after, before, "a refused action leaves no audit row");

    // Dead letters: the scoped token sees and redelivers only OTHER's.
    let devs = dead_letter(&db, "hook", DEV).await;
    let others = dead_letter(&db, "hook", OTHER).await;
    let ids = |body: &Value| -> Vec<i64> {
        body["dead_letters"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|d| d["id"].as_i64())
            .collect()
    };
    let (status, body) = node.request_as(full, "GET", "/v1/ops/webhooks", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(ids(&body), vec![devs, others]);
    let (status, body) = node
        .request_as(scoped, "GET", "/v1/ops/webhooks", None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(ids(&body), vec![others]);
    let redeliver = "/v1/ops/webhooks/hook/redeliver";
    let (status, body) = node
        .request_as(scoped, "POST", redeliver, Some(json!({"id": devs})))
        .await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = node
        .request_as(scoped, "POST", redeliver, Some(json!({"all": true})))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["queued"], 1, "{body}");
    let asked: Vec<i64> = sqlx::query_scalar(
        "SELECT id FROM webhook_dead_letter WHERE redeliver_asked IS NOT NULL ORDER BY id",
    )
    .fetch_all(&db.pool)
    .await
    .expect("asked");
    assert_eq!(asked, vec![others], "DEV's dead letter was not touched");

    // The unscoped ops token still may.
    let (status, body) = node
        .request_as(
            full,
            "POST",
            &format!("/v1/ops/submitters/{DEV}/restart"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    node.stop().await;
}
