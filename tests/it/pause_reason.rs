//! A paused submitter's 423 tells a client token that it is paused, never
//! the operator's free-text reason; ops tokens keep the reason, in the 423
//! and in `/v1/ops/actors` (README "Guardrails", issue 47 item 9).

use serde_json::json;
use txmgr::http::auth::token_hash_hex;

use crate::common::{
    node::{config_toml, TestNode},
    transfer, Anvil, TestDb, DEV,
};

const OPS_TOKEN: &str = "pause-reason-ops-token";
const CLIENT_TOKEN: &str = "pause-reason-client-token";
const REASON: &str = "incident 7: alice rotates the hot key, call +1 555 0100";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_gets_a_fixed_message_and_ops_keep_the_pause_reason() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let toml = config_toml(
        &db.url,
        &anvil.rpc_url(),
        "n1",
        "pause_accepts_creates = false",
    ) + &format!(
        "[[auth.tokens]]\nname = \"ops\"\nrole = \"ops\"\nsha256 = \"{}\"\n\
         [[auth.tokens]]\nname = \"svc\"\nrole = \"client\"\nsha256 = \"{}\"\n",
        token_hash_hex(OPS_TOKEN),
        token_hash_hex(CLIENT_TOKEN),
    );
    let node = TestNode::start(&toml).await;
    let ops = Some(OPS_TOKEN);
    let (status, body) = node
        .request_as(
            ops,
            "POST",
            &format!("/v1/ops/submitters/{DEV}/pause"),
            Some(json!({"reason": REASON})),
        )
        .await;
    assert_eq!(status, 200, "{body}");

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
