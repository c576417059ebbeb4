//! What a web page in the operator's browser can do to a node on loopback
//! (README "Security"), against real `txmgr run` processes: the POSTs a
//! page can send cross-site without CORS — no body, `text/plain`, a form —
//! change nothing (415 on reload, restart, the transaction actions and
//! creates), and a page reached by DNS rebinding, whose requests name the
//! attacker's host, reads nothing from a tokenless node (421) while the
//! node's own names are served. With tokens the `Host` is not checked.

use serde_json::{json, Value};
use txmgr::http::auth::token_hash_hex;

use crate::common::{
    daemon::{key_var, Daemon, DEV_KEYS},
    free_port,
    node::{config_toml, KEY_VAR},
    Anvil, TestDb,
};

/// A single loopback node, tokenless unless `extra` configures tokens.
async fn node(db: &TestDb, anvil: &Anvil, node_id: &str, extra: &str) -> Daemon {
    let port = free_port();
    let config = config_toml(&db.url, &anvil.rpc_url(), node_id, "").replace(
        &format!("env = \"{KEY_VAR}\""),
        &format!("env = \"{}\"", key_var(0)),
    ) + &format!("\n[http]\nlisten = \"127.0.0.1:{port}\"\n{extra}");
    let daemon = Daemon::start(node_id, port, &config).await;
    daemon.ready(&reqwest::Client::new()).await;
    daemon
}

/// Creates a transfer the proper way; its id.
async fn create(client: &reqwest::Client, daemon: &Daemon, token: Option<&str>) -> String {
    let mut request = client
        .post(format!("{}/v1/transactions", daemon.base()))
        .json(&json!({"submitter": DEV_KEYS[0].1, "to": DEV_KEYS[1].1, "value": "1"}));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let answer = request.send().await.expect("create");
    assert_eq!(answer.status(), 202);
    let body: Value = answer.json().await.expect("json");
    body["tx_id"].as_str().expect("tx_id").to_owned()
}

/// Status and error code of a POST with `content_type` (none: no header).
async fn post(
    client: &reqwest::Client,
    url: &str,
    content_type: Option<&str>,
    body: &str,
) -> (u16, String) {
    let mut request = client.post(url).body(body.to_owned());
    if let Some(content_type) = content_type {
        request = request.header("content-type", content_type);
    }
    let answer = request.send().await.expect("POST");
    let status = answer.status().as_u16();
    let body: Value = answer.json().await.unwrap_or(Value::Null);
    (
        status,
        body["error"]["code"].as_str().unwrap_or("").to_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn posts_a_page_can_send_without_cors_change_nothing() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let daemon = node(&db, &anvil, "cross-site-post", "").await;
    let client = reqwest::Client::new();
    let base = daemon.base();
    let tx_id = create(&client, &daemon, None).await;
    let transfer = json!({"submitter": DEV_KEYS[0].1, "to": DEV_KEYS[1].1, "value": "1"});

    let forged = [
        (format!("{base}/v1/ops/reload"), None, String::new()),
        (
            format!("{base}/v1/ops/submitters/{}/restart", DEV_KEYS[0].1),
            None,
            String::new(),
        ),
        (
            format!("{base}/v1/transactions/{tx_id}/cancel"),
            Some("text/plain"),
            "{}".to_owned(),
        ),
        (
            format!("{base}/v1/transactions/{tx_id}/rebroadcast"),
            Some("application/x-www-form-urlencoded"),
            "reason=x".to_owned(),
        ),
        (
            format!("{base}/v1/transactions"),
            Some("text/plain"),
            transfer.to_string(),
        ),
    ];
    for (url, content_type, body) in &forged {
        let answer = post(&client, url, *content_type, body).await;
        assert_eq!(
            answer,
            (415, "unsupported_media_type".to_owned()),
            "POST {url} with {content_type:?}"
        );
    }
    let detail: Value = client
        .get(format!("{base}/v1/transactions/{tx_id}"))
        .send()
        .await
        .expect("GET")
        .json()
        .await
        .expect("json");
    assert_ne!(detail["state"], "CANCELLED", "{detail}");

    // The same routes with Content-Type: application/json are served, an
    // empty body included.
    let json = Some("application/json");
    assert_eq!(
        post(&client, &format!("{base}/v1/ops/reload"), json, "")
            .await
            .0,
        200
    );
    let cancel = format!("{base}/v1/transactions/{tx_id}/cancel");
    assert_eq!(post(&client, &cancel, json, "").await.0, 202);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_rebinding_reads_nothing_from_a_tokenless_node() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let daemon = node(&db, &anvil, "cross-site-host", "").await;
    let client = reqwest::Client::new();
    let tx_id = create(&client, &daemon, None).await;
    let port = daemon.port;

    // A page from http://attacker.example:<port>/ whose name now resolves
    // to 127.0.0.1: the browser sends the attacker's name in Host.
    for path in [
        format!("/v1/transactions/{tx_id}"),
        "/v1/ops/actors".to_owned(),
        "/metrics".to_owned(),
    ] {
        let answer = client
            .get(format!("{}{path}", daemon.base()))
            .header("host", format!("attacker.example:{port}"))
            .send()
            .await
            .expect("GET");
        let status = answer.status().as_u16();
        let text = answer.text().await.unwrap_or_default();
        assert_eq!(status, 421, "GET {path} for attacker.example: {text}");
        assert!(text.contains("misdirected_request"), "{text}");
        assert!(
            !text.contains(&tx_id),
            "the answer leaks the intent: {text}"
        );
    }
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
    ] {
        let answer = client
            .get(format!("{}/v1/transactions/{tx_id}", daemon.base()))
            .header("host", &host)
            .send()
            .await
            .expect("GET");
        assert_eq!(answer.status().as_u16(), 200, "Host {host}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tokens_the_host_is_not_checked() {
    const OPS: &str = "cross-site-ops-token";
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let tokens = format!(
        "[[auth.tokens]]\nname = \"ops\"\nrole = \"ops\"\nsha256 = \"{}\"\n",
        token_hash_hex(OPS)
    );
    let daemon = node(&db, &anvil, "cross-site-tokens", &tokens).await;
    let client = reqwest::Client::new();
    let tx_id = create(&client, &daemon, Some(OPS)).await;
    // Behind a proxy or a load balancer the Host is the service's name.
    let answer = client
        .get(format!("{}/v1/transactions/{tx_id}", daemon.base()))
        .header("host", "txmgr.internal.example")
        .bearer_auth(OPS)
        .send()
        .await
        .expect("GET");
    assert_eq!(answer.status().as_u16(), 200);
}
