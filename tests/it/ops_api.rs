//! The operator surface's edge (README "HTTP API" and "Security" and "Operations"): bearer-token
//! auth by role and submitter, health and readiness, Prometheus metrics, the
//! OpenAPI document and the dashboard page.

use std::collections::BTreeSet;

use crate::common::{
    node::{config_toml, TestNode},
    transfer_from, Anvil, Scenario, TestDb, DEV,
};
use axum::{
    body::{to_bytes, Body},
    http::Request,
};
use serde_json::json;
use tower::ServiceExt;
use txmgr::http::{auth::token_hash_hex, openapi::ROUTES};

const OTHER: &str = "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc";
const OPS_TOKEN: &str = "ops-token-for-tests";
const CLIENT_TOKEN: &str = "client-token-for-tests";
const LIMITED_TOKEN: &str = "limited-token-for-tests";

fn auth_toml(metrics_public: bool) -> String {
    format!(
        r#"
[http]
metrics_public = {metrics_public}
[[auth.tokens]]
name = "ops"
role = "ops"
sha256 = "{}"
[[auth.tokens]]
name = "svc"
role = "client"
sha256 = "{}"
[[auth.tokens]]
name = "limited"
role = "client"
sha256 = "{}"
submitters = ["{OTHER}"]
"#,
        token_hash_hex(OPS_TOKEN),
        token_hash_hex(CLIENT_TOKEN),
        token_hash_hex(LIMITED_TOKEN),
    )
}

/// Status, headers and raw body of a request.
async fn raw(
    node: &TestNode,
    token: Option<&str>,
    method: &str,
    path: &str,
) -> (u16, axum::http::HeaderMap, String) {
    let mut builder = Request::builder().method(method).uri(path);
    if let Some(token) = token {
        builder = builder.header("authorization", format!("Bearer {token}"));
    }
    let response = node
        .app
        .clone()
        .oneshot(builder.body(Body::empty()).expect("request"))
        .await
        .expect("router answers");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    (
        status,
        headers,
        String::from_utf8_lossy(&bytes).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn auth_matrix_by_token_role_and_submitter() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let toml = config_toml(&db.url, &anvil.rpc_url(), "n1", "") + &auth_toml(false);
    let node = TestNode::start(&toml).await;

    // Missing and wrong tokens: 401 with a challenge.
    let (status, headers, body) = raw(&node, None, "GET", "/v1/ops/actors").await;
    assert_eq!(status, 401, "{body}");
    assert!(headers
        .get("www-authenticate")
        .is_some_and(|v| v.to_str().unwrap_or("").starts_with("Bearer")));
    assert!(body.contains("\"unauthorized\""));
    let (status, _, _) = raw(&node, Some("wrong"), "GET", "/v1/ops/actors").await;
    assert_eq!(status, 401);
    let (status, _) = node
        .request("POST", "/v1/transactions", Some(transfer_from(DEV, "a")))
        .await;
    assert_eq!(status, 401);

    // A client token on ops: 403. The ops token: 200.
    let (status, body) = node
        .request_as(Some(CLIENT_TOKEN), "GET", "/v1/ops/actors", None)
        .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "forbidden");
    let (status, body) = node
        .request_as(Some(OPS_TOKEN), "GET", "/v1/ops/actors", None)
        .await;
    assert_eq!(status, 200, "{body}");

    // Clients create and read; a limited client only for its submitters.
    let (status, created) = node
        .request_as(
            Some(CLIENT_TOKEN),
            "POST",
            "/v1/transactions",
            Some(transfer_from(DEV, "b")),
        )
        .await;
    assert_eq!(status, 202, "{created}");
    let (status, body) = node
        .request_as(
            Some(LIMITED_TOKEN),
            "POST",
            "/v1/transactions",
            Some(transfer_from(DEV, "c")),
        )
        .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["field"], "submitter");
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM managed_tx WHERE request_id = 'c'")
        .fetch_one(&db.pool)
        .await
        .expect("count");
    assert_eq!(rows, 0, "a forbidden create writes nothing");
    let path = format!("/v1/transactions?submitter={DEV}&request_id=b");
    let (status, _) = node
        .request_as(Some(LIMITED_TOKEN), "GET", &path, None)
        .await;
    assert_eq!(status, 403);
    let (status, _) = node
        .request_as(Some(CLIENT_TOKEN), "GET", &path, None)
        .await;
    assert_eq!(status, 200);
    let by_id = format!(
        "/v1/transactions/{}",
        created["tx_id"].as_str().unwrap_or("")
    );
    let (status, _) = node
        .request_as(Some(LIMITED_TOKEN), "GET", &by_id, None)
        .await;
    assert_eq!(status, 404, "another submitter's transaction stays hidden");

    // Open endpoints; metrics is ops-only with metrics_public = false.
    for path in ["/healthz", "/readyz", "/ops/", "/v1/openapi.json"] {
        let (status, _, body) = raw(&node, None, "GET", path).await;
        assert_eq!(status, 200, "{path}: {body}");
    }
    let (status, _, _) = raw(&node, None, "GET", "/metrics").await;
    assert_eq!(status, 401);
    let (status, _, _) = raw(&node, Some(CLIENT_TOKEN), "GET", "/metrics").await;
    assert_eq!(status, 403);
    let (status, _, body) = raw(&node, Some(OPS_TOKEN), "GET", "/metrics").await;
    assert_eq!(status, 200);
    assert!(body.contains("txmgr_"), "{body}");
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn metrics_need_an_ops_token_by_default_once_tokens_are_configured() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    // auth_toml without its `[http] metrics_public` line: unset.
    let tokens = auth_toml(false).replace("[http]\nmetrics_public = false\n", "");
    assert!(!tokens.contains("metrics_public"), "{tokens}");
    let toml = config_toml(&db.url, &anvil.rpc_url(), "n1", "") + &tokens;
    let node = TestNode::start(&toml).await;
    let (status, _, _) = raw(&node, None, "GET", "/metrics").await;
    assert_eq!(
        status, 401,
        "the exposition lists every submitter: not open"
    );
    let (status, _, _) = raw(&node, Some(OPS_TOKEN), "GET", "/metrics").await;
    assert_eq!(status, 200);
    node.stop().await;
    // Without tokens (loopback only) it stays open.
    let open = TestNode::start(&config_toml(&db.url, &anvil.rpc_url(), "n2", "")).await;
    let (status, _, _) = raw(&open, None, "GET", "/metrics").await;
    assert_eq!(status, 200);
    open.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn metrics_public_readyz_and_chain_down() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let toml = config_toml(&db.url, &anvil.rpc_url(), "n1", "") + &auth_toml(true);
    let node = TestNode::start(&toml).await;
    let (status, _) = node
        .request_as(
            Some(CLIENT_TOKEN),
            "POST",
            "/v1/transactions",
            Some(transfer_from(DEV, "m1")),
        )
        .await;
    assert_eq!(status, 202);
    let (status, _) = node
        .request_as(
            Some(CLIENT_TOKEN),
            "POST",
            "/v1/transactions",
            Some(json!({"submitter": DEV, "to": "nope"})),
        )
        .await;
    assert_eq!(status, 400);
    // RPC counters come from the engine's own work, which runs after the
    // create was answered: wait for the first one to be recorded.
    crate::common::wait_until(std::time::Duration::from_secs(10), || async {
        raw(&node, None, "GET", "/metrics")
            .await
            .2
            .contains("txmgr_rpc_calls_total")
    })
    .await;
    let (status, _, text) = raw(&node, None, "GET", "/metrics").await;
    assert_eq!(status, 200);
    assert!(
        text.contains("txmgr_creates_total{chain=\"default\",result=\"created\"}"),
        "{text}"
    );
    assert!(
        text.contains("txmgr_creates_total{chain=\"none\",result=\"invalid_request\"}"),
        "{text}"
    );
    assert!(text.contains("txmgr_rpc_calls_total"), "{text}");
    // Every sample line parses as `name{labels} value`.
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let value = line.rsplit(' ').next().unwrap_or("");
        assert!(value.parse::<f64>().is_ok(), "bad sample line {line:?}");
    }

    let (status, _, body) = raw(&node, None, "GET", "/readyz").await;
    assert_eq!(status, 200, "{body}");
    drop(anvil);
    // Readiness follows the endpoint monitor (no RPC per request): the dead
    // endpoint is out of service after `unhealthy_after_failures` failures.
    crate::common::wait_until(std::time::Duration::from_secs(10), || async {
        raw(&node, None, "GET", "/readyz").await.0 == 503
    })
    .await;
    let (status, _, body) = raw(&node, None, "GET", "/readyz").await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("chain"), "{body}");
    let (status, _, _) = raw(&node, None, "GET", "/healthz").await;
    assert_eq!(status, 200);
    node.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn openapi_lists_every_route_and_the_dashboard_is_self_contained() {
    let Scenario {
        db: _db,
        anvil: _anvil,
        node,
    } = Scenario::single_node("").await;
    let (status, doc) = node.request("GET", "/v1/openapi.json", None).await;
    assert_eq!(status, 200);
    assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")));
    let mut documented = BTreeSet::new();
    if let Some(paths) = doc["paths"].as_object() {
        for (path, item) in paths {
            for method in item.as_object().into_iter().flat_map(|m| m.keys()) {
                documented.insert((method.clone(), path.clone()));
            }
        }
    }
    let routed: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|(m, p)| ((*m).to_owned(), (*p).to_owned()))
        .collect();
    assert_eq!(documented, routed, "the document lists exactly the routes");
    assert!(doc["components"]["schemas"]["ErrorResponse"].is_object());
    // Every listed route exists in the router (the fallback says "no such route").
    for (method, path) in ROUTES {
        let concrete = path
            .replace("{tx_id}", "00000000-0000-0000-0000-000000000000")
            .replace("{address}", DEV);
        let (status, _, body) = raw(&node, None, &method.to_uppercase(), &concrete).await;
        assert!(
            !(status == 404 && body.contains("no such route")) && status != 405,
            "{method} {path} is not routed: {status} {body}"
        );
    }
    let (status, headers, page) = raw(&node, None, "GET", "/ops/").await;
    assert_eq!(status, 200);
    assert!(headers
        .get("content-type")
        .is_some_and(|v| v.to_str().unwrap_or("").starts_with("text/html")));
    assert!(page.contains("/v1/ops/actors") && page.contains("sessionStorage"));
    // Nothing loaded from elsewhere: no script or stylesheet by reference,
    // no URL an attribute, a style or a fetch would load (the inlined
    // charting library's MIT banner names its home page: text, not a load).
    assert!(
        !page.contains("<script src") && !page.contains("<link"),
        "no external assets"
    );
    let compact: String = page.chars().filter(|c| !c.is_whitespace()).collect();
    for load in [
        "src=\"http",
        "href=\"http",
        "src='http",
        "href='http",
        "url(http",
        "url(\"http",
        "url('http",
        "fetch(\"http",
        "fetch('http",
        "import(\"http",
    ] {
        assert!(
            !compact.contains(load),
            "the page loads {load}…: no external assets"
        );
    }
    node.stop().await;
}
