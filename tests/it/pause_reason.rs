//! An operator's free text never reaches clients (issue 47 item 9): a
//! paused submitter's 423 tells a client token only that it is paused, and
//! an operator's cancel leaves neither the token's name nor the reason in
//! the intent's `last_error` or its feed row; ops keep both (the 423 of an
//! ops token, `/v1/ops/actors`, the transaction view's audit rows).

use std::time::Duration;

use serde_json::json;
use txmgr::http::auth::token_hash_hex;

use crate::common::{
    node::{config_toml, TestNode},
    transfer, wait_until, Anvil, TestDb, DEV,
};

const OPS_TOKEN: &str = "pause-reason-ops-token";
const CLIENT_TOKEN: &str = "pause-reason-client-token";
const REASON: &str = "incident 7: alice rotates the hot key, call +1 555 0100";

/// A node whose DEV an operator paused with [`REASON`]; `extra` goes into
/// DEV's table.
async fn paused_node(db: &TestDb, anvil: &Anvil, extra: &str) -> TestNode {
    let toml = config_toml(&db.url, &anvil.rpc_url(), "n1", extra)
        + &format!(
            "[[auth.tokens]]\nname = \"ops-alice\"\nrole = \"ops\"\nsha256 = \"{}\"\n\
             [[auth.tokens]]\nname = \"svc\"\nrole = \"client\"\nsha256 = \"{}\"\n",
            token_hash_hex(OPS_TOKEN),
            token_hash_hex(CLIENT_TOKEN),
        );
    let node = TestNode::start(&toml).await;
    let (status, body) = node
        .request_as(
            Some(OPS_TOKEN),
            "POST",
            &format!("/v1/ops/submitters/{DEV}/pause"),
            Some(json!({"reason": REASON})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    node
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_gets_a_fixed_message_and_ops_keep_the_pause_reason() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let node = paused_node(&db, &anvil, "pause_accepts_creates = false").await;
    let ops = Some(OPS_TOKEN);

    let (status, body) = node
        .request_as(
            Some(CLIENT_TOKEN),
            "POST",
            "/v1/transactions",
            Some(transfer("c1")),
        )
        .await;
    assert_eq!(status, 423, "{body}");
    assert_eq!(body["error"]["code"], "paused", "{body}");
    let answer = body.to_string();
    assert!(
        !answer.contains("alice") && !answer.contains("incident"),
        "the operator's reason reached a client: {answer}"
    );

    // Ops keep it: in their own 423 and in the actors view.
    let (status, body) = node
        .request_as(ops, "POST", "/v1/transactions", Some(transfer("o1")))
        .await;
    assert_eq!(status, 423, "{body}");
    assert!(body.to_string().contains(REASON), "{body}");
    let (status, view) = node.request_as(ops, "GET", "/v1/ops/actors", None).await;
    assert_eq!(status, 200, "{view}");
    let paused = view["submitters"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["submitter"] == DEV)
        .map(|s| s["paused"].clone());
    assert_eq!(
        paused.as_ref().map(|p| p["reason"].clone()),
        Some(json!(REASON)),
        "{view}"
    );
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_operators_cancel_reason_stays_in_the_ops_view() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    // Paused, accepting creates: the intent waits QUEUED.
    let node = paused_node(&db, &anvil, "").await;
    let client = Some(CLIENT_TOKEN);
    let (status, body) = node
        .request_as(client, "POST", "/v1/transactions", Some(transfer("c1")))
        .await;
    assert_eq!(status, 202, "{body}");
    let tx_id = body["tx_id"].as_str().expect("tx_id").to_owned();
    let (status, body) = node
        .request_as(
            Some(OPS_TOKEN),
            "POST",
            &format!("/v1/transactions/{tx_id}/cancel"),
            Some(json!({"reason": REASON})),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["state"], "CANCELLED", "{body}");

    let leaks = |text: &str| text.contains("alice") || text.contains("incident");
    let (status, body) = node
        .request_as(client, "GET", &format!("/v1/transactions/{tx_id}"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["state"], "CANCELLED", "{body}");
    assert!(!leaks(&body.to_string()), "the client reads: {body}");
    wait_until(Duration::from_secs(30), || async {
        let (_, page) = node
            .request_as(client, "GET", "/v1/completions", None)
            .await;
        page["items"]
            .as_array()
            .is_some_and(|items| !items.is_empty())
    })
    .await;
    let (_, feed) = node
        .request_as(client, "GET", "/v1/completions", None)
        .await;
    assert!(!leaks(&feed.to_string()), "the feed says: {feed}");

    // The ops view keeps who and why.
    let (status, view) = node
        .request_as(
            Some(OPS_TOKEN),
            "GET",
            &format!("/v1/ops/transactions/{tx_id}"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{view}");
    let audit = view["audit"].to_string();
    assert!(
        audit.contains("ops-alice") && audit.contains(REASON),
        "{view}"
    );
    node.stop().await;
}
