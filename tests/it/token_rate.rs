//! Per-token create rates (`[[auth.tokens]] rate`, README "Guardrails"): a
//! token beyond its rate gets 429 `rate_limited` with `Retry-After` and
//! nothing is stored; another token is not slowed by it.

use axum::{
    body::{to_bytes, Body},
    http::Request,
};
use serde_json::Value;
use tower::ServiceExt;
use txmgr::http::auth::token_hash_hex;

use crate::common::{
    node::{config_toml, TestNode},
    transfer, Anvil, TestDb,
};

const SLOW_TOKEN: &str = "slow-token-for-tests";
const FREE_TOKEN: &str = "free-token-for-tests";

/// `slow` may create 5 at once, then one per 100 s (so none comes back
/// during the test); `free` has no rate of its own.
fn tokens_toml() -> String {
    format!(
        r#"
[[auth.tokens]]
name = "slow"
role = "client"
sha256 = "{}"
rate = {{ creates_per_second = 0.01, burst = 5 }}
[[auth.tokens]]
name = "free"
role = "client"
sha256 = "{}"
"#,
        token_hash_hex(SLOW_TOKEN),
        token_hash_hex(FREE_TOKEN),
    )
}

/// POSTs a create with `token`: status, `Retry-After` and JSON body.
async fn create(node: &TestNode, token: &str, request_id: &str) -> (u16, Option<u64>, Value) {
    let request = Request::builder()
        .method("POST")
        .uri("/v1/transactions")
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .body(Body::from(transfer(request_id).to_string()))
        .expect("request");
    let response = node.app.clone().oneshot(request).await.expect("answer");
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok()?.parse().ok());
    let bytes = to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    (
        status,
        retry_after,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_token_beyond_its_rate_gets_429_and_another_token_is_not_slowed() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let toml = config_toml(&db.url, &anvil.rpc_url(), "n1", "") + &tokens_toml();
    let node = TestNode::start(&toml).await;

    // Twice its burst: the first five pass, the next five are refused.
    let mut statuses = Vec::new();
    for i in 0..10 {
        let (status, retry_after, body) = create(&node, SLOW_TOKEN, &format!("slow-{i}")).await;
        if status == 429 {
            assert_eq!(body["error"]["code"], "rate_limited", "{body}");
            assert!(
                body["error"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("\"slow\"")),
                "{body}"
            );
            // One create comes back every 100 s.
            assert!(
                retry_after.is_some_and(|s| (1..=100).contains(&s)),
                "{retry_after:?}"
            );
        }
        statuses.push(status);
    }
    assert_eq!(statuses, [202, 202, 202, 202, 202, 429, 429, 429, 429, 429]);
    // A replay is a create too: refused while the bucket is empty.
    let (status, _, _) = create(&node, SLOW_TOKEN, "slow-0").await;
    assert_eq!(status, 429);

    // The other token is not held by it.
    for i in 0..10 {
        let (status, _, body) = create(&node, FREE_TOKEN, &format!("free-{i}")).await;
        assert_eq!(status, 202, "{body}");
    }
    // Nothing refused was stored.
    assert_eq!(db.count("SELECT count(*) FROM managed_tx").await, 15);
    assert_eq!(
        db.count("SELECT count(*) FROM managed_tx WHERE request_id LIKE 'slow-%'")
            .await,
        5
    );
    node.stop().await;
}
