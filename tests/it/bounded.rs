//! Bounded everything (issue 12, item 12): node-wide ingress caps, the API's
//! concurrency limit, capped long polls, pages bounded in bytes, `/readyz`
//! from background state, and tracker messages coalesced per receiver —
//! each shown against a real node whose database is held up on purpose
//! (a table lock taken by the test) so that queues would grow. The tracker's
//! coalescing is in `bounded_tracker`.

use std::time::Duration;

use crate::common::{
    eventually,
    node::{config_toml, TestNode},
    transfer, wait_until, Anvil, TestDb, DEV,
};
use axum::{
    body::{to_bytes, Body},
    http::{HeaderMap, Request},
    Router,
};
use serde_json::{json, Value};
use tower::ServiceExt;

/// Pause between reads while waiting for the feed.
const POLL: Duration = Duration::from_millis(100);

/// The test configuration with extra keys in `[http]`, `[node]` and the
/// submitter's table.
pub(crate) fn toml(db: &TestDb, anvil: &Anvil, http: &str, node: &str, submitter: &str) -> String {
    config_toml(&db.url, &anvil.rpc_url(), "n1", submitter)
        .replace("[node]\n", &format!("[node]\n{node}\n"))
        + &format!("[http]\n{http}\n")
}

/// One answer of the router.
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) headers: HeaderMap,
    pub(crate) json: Value,
}

impl Reply {
    /// 503 `busy` with `Retry-After: 1`.
    #[track_caller]
    fn assert_busy(&self) {
        assert_eq!(self.status, 503, "{}", self.json);
        assert_eq!(self.json["error"]["code"], "busy", "{}", self.json);
        let retry_after = self.headers.get("retry-after").map(|v| v.as_bytes());
        assert_eq!(retry_after, Some(&b"1"[..]), "{}", self.json);
    }
}

pub(crate) async fn call(app: &Router, method: &str, uri: &str, body: Option<Value>) -> Reply {
    let mut request = Request::builder().method(method).uri(uri);
    if body.is_some() || method == "POST" {
        request = request.header("content-type", "application/json");
    }
    let body = body.map_or_else(Body::empty, |json| Body::from(json.to_string()));
    let response = app
        .clone()
        .oneshot(request.body(body).expect("request"))
        .await
        .expect("router answers");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    Reply {
        status,
        headers,
        json: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    }
}

fn with_data(request_id: &str, bytes: usize) -> Value {
    let mut body = transfer(request_id);
    body["data"] = json!(format!("0x{}", "ab".repeat(bytes)));
    body
}

/// Holds the ingress writer (a lock its INSERT waits for) while `held`
/// creates are admitted, then sends `over`: it must be refused at once with
/// 503 `busy`, and every admitted create must be stored once the writer runs.
async fn over_the_ingress_cap(node_keys: &str, held: Vec<Value>, over: Value) {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let node = TestNode::start(&toml(&db, &anvil, "", node_keys, "")).await;
    let mut lock = db.pool.begin().await.expect("begin");
    sqlx::query("LOCK TABLE managed_tx IN SHARE MODE")
        .execute(&mut *lock)
        .await
        .expect("lock");
    let admitted = held.len();
    let waiting: Vec<_> = held
        .into_iter()
        .map(|body| {
            let app = node.app.clone();
            tokio::spawn(async move { call(&app, "POST", "/v1/transactions", Some(body)).await })
        })
        .collect();
    wait_until(Duration::from_secs(10), || async {
        let depth: usize = node
            .engine
            .handles()
            .iter()
            .map(|h| h.ingress_depth())
            .sum();
        depth == admitted
    })
    .await;
    call(&node.app, "POST", "/v1/transactions", Some(over.clone()))
        .await
        .assert_busy();
    lock.rollback().await.expect("unlock");
    for task in waiting {
        let reply = task.await.expect("create task");
        assert_eq!(
            reply.status, 202,
            "an admitted create was lost: {}",
            reply.json
        );
    }
    let retried = call(&node.app, "POST", "/v1/transactions", Some(over)).await;
    assert_eq!(retried.status, 202, "{}", retried.json);
    let stored = db.count("SELECT count(*) FROM managed_tx").await;
    assert_eq!(stored, admitted as i64 + 1);
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn creates_beyond_the_node_ingress_item_cap_get_503_busy_and_admitted_ones_are_kept() {
    let held = (0..3).map(|i| transfer(&format!("held-{i}"))).collect();
    over_the_ingress_cap("ingress_max_items = 3", held, transfer("over")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn creates_beyond_the_node_ingress_byte_cap_get_503_busy_and_admitted_ones_are_kept() {
    // Two creates of 60 000 bytes of data fit in 150 000 bytes, a third does not.
    let held = (0..2)
        .map(|i| with_data(&format!("held-{i}"), 60_000))
        .collect();
    over_the_ingress_cap(
        "ingress_max_bytes = 150000",
        held,
        with_data("over", 60_000),
    )
    .await;
}

/// Long polls that go on until one answers 200 (a 503 `busy` is retried).
fn long_poll(app: &Router, uri: &'static str) -> tokio::task::JoinHandle<Reply> {
    let app = app.clone();
    tokio::spawn(async move {
        loop {
            let reply = call(&app, "GET", uri, None).await;
            if reply.status == 200 {
                return reply;
            }
            // Refused while another held the place: a client's back-off.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn api_requests_beyond_the_concurrency_limit_get_503_busy_while_probes_answer() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let http = "max_concurrent_requests = 2\nmax_long_polls = 2\nrequest_timeout = \"30s\"";
    let node = TestNode::start(&toml(&db, &anvil, http, "", "")).await;
    wait_until(Duration::from_secs(10), || async {
        call(&node.app, "GET", "/readyz", None).await.status == 200
    })
    .await;
    // Two long polls hold both places.
    let pollers = [
        long_poll(&node.app, "/v1/completions?wait=25s"),
        long_poll(&node.app, "/v1/completions?wait=25s"),
    ];
    let unknown = "/v1/transactions/00000000-0000-0000-0000-000000000000";
    wait_until(Duration::from_secs(20), || async {
        call(&node.app, "GET", unknown, None).await.status == 503
    })
    .await;
    call(&node.app, "GET", unknown, None).await.assert_busy();
    for probe in ["/healthz", "/readyz", "/metrics"] {
        let reply = call(&node.app, "GET", probe, None).await;
        assert_eq!(reply.status, 200, "{probe} while the API is saturated");
    }
    for poller in &pollers {
        poller.abort();
    }
    wait_until(Duration::from_secs(10), || async {
        call(&node.app, "GET", unknown, None).await.status == 404
    })
    .await;
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn long_polls_beyond_the_cap_get_503_busy_and_the_waiting_ones_are_served() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let http = "max_long_polls = 2\nrequest_timeout = \"30s\"";
    let finality = "finality = { confirmations = 1 }";
    let node = TestNode::start(&toml(&db, &anvil, http, "", finality)).await;
    let pollers = [
        long_poll(&node.app, "/v1/completions?wait=25s"),
        long_poll(&node.app, "/v1/completions?wait=25s"),
    ];
    // A third would wait too: refused at once, to be retried later.
    wait_until(Duration::from_secs(20), || async {
        call(&node.app, "GET", "/v1/completions?wait=1s", None)
            .await
            .status
            == 503
    })
    .await;
    call(&node.app, "GET", "/v1/completions?wait=1s", None)
        .await
        .assert_busy();
    // The waiting ones are woken by the completion.
    let created = call(&node.app, "POST", "/v1/transactions", Some(transfer("c"))).await;
    assert_eq!(created.status, 202, "{}", created.json);
    let mut next = String::new();
    for poller in pollers {
        let reply = poller.await.expect("long poll");
        assert_eq!(reply.json["items"][0]["request_id"], "c", "{}", reply.json);
        next = reply.json["next_after"].as_str().unwrap_or("").to_owned();
    }
    // Nothing after it: this one waits, so it needs a place again.
    let uri = format!("/v1/completions?wait=1s&after={next}");
    let after = call(&node.app, "GET", &uri, None).await;
    assert_eq!(after.status, 200, "places are given back: {}", after.json);
    node.stop().await;
}

/// Follows a listing from its first page; checks every page against the
/// byte budget and returns the `key` of every item and the number of pages.
async fn follow_pages(
    app: &Router,
    first: &str,
    next_field: &str,
    key: &str,
    budget: usize,
) -> (Vec<String>, usize) {
    let mut uri = first.to_owned();
    let mut seen = Vec::new();
    let mut pages = 0;
    loop {
        let reply = call(app, "GET", &uri, None).await;
        assert_eq!(reply.status, 200, "{}", reply.json);
        let items = reply.json["items"].as_array().cloned().unwrap_or_default();
        if items.is_empty() {
            return (seen, pages);
        }
        pages += 1;
        let bytes: usize = items.iter().map(|item| item.to_string().len() + 1).sum();
        assert!(
            items.len() == 1 || bytes <= budget,
            "{} items, {bytes} bytes over a budget of {budget}",
            items.len()
        );
        seen.extend(
            items
                .iter()
                .map(|item| item[key].as_str().unwrap_or("").to_owned()),
        );
        match reply.json[next_field].as_str() {
            Some(next) => uri = format!("{first}&after={next}"),
            None => return (seen, pages),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn list_and_feed_pages_end_at_their_byte_budget_and_their_cursors_continue() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let budget = 2000;
    let http = format!("page_max_bytes = {budget}");
    let finality = "finality = { confirmations = 1 }";
    let node = TestNode::start(&toml(&db, &anvil, &http, "", finality)).await;
    let mut request_ids: Vec<String> = (0..5).map(|i| format!("{i}-{}", "r".repeat(200))).collect();
    for request_id in &request_ids {
        let reply = call(
            &node.app,
            "POST",
            "/v1/transactions",
            Some(transfer(request_id)),
        )
        .await;
        assert_eq!(reply.status, 202, "{}", reply.json);
    }
    wait_until(Duration::from_secs(60), || async {
        db.count("SELECT count(*) FROM tx_completion").await == 5
    })
    .await;
    request_ids.sort();

    let list = format!("/v1/transactions?submitter={DEV}&limit=50");
    let (mut listed, pages) = follow_pages(&node.app, &list, "next", "request_id", budget).await;
    listed.sort();
    assert_eq!(listed, request_ids, "every intent listed exactly once");
    assert!(
        pages >= 3,
        "5 intents of ~1 KiB in {pages} pages of 2000 bytes"
    );

    // The feed serves a row once no older transaction runs anywhere on the
    // server: read it again until all five are there.
    let feed = "/v1/completions?limit=100";
    let (mut fed, pages) = eventually(Duration::from_secs(30), POLL, || async {
        let (fed, pages) = follow_pages(&node.app, feed, "next_after", "request_id", budget).await;
        (fed.len() == 5).then_some((fed, pages))
    })
    .await;
    fed.sort();
    assert_eq!(fed, request_ids, "every completion served exactly once");
    assert!(
        pages >= 2,
        "5 completions of ~500 bytes in {pages} pages of 2000 bytes"
    );
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn readyz_answers_from_background_checks_not_a_database_query_per_hit() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let node = TestNode::start(&toml(&db, &anvil, "", "", "")).await;
    wait_until(Duration::from_secs(10), || async {
        call(&node.app, "GET", "/readyz", None).await.status == 200
    })
    .await;
    // The readiness query waits for this lock; `/readyz` must not.
    let mut lock = db.pool.begin().await.expect("begin");
    sqlx::query("LOCK TABLE _sqlx_migrations IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *lock)
        .await
        .expect("lock");
    for _ in 0..5 {
        let reply = call(&node.app, "GET", "/readyz", None).await;
        assert_eq!(
            reply.status, 200,
            "answered from the last check: {}",
            reply.json
        );
    }
    // The background check reports the database that does not answer.
    wait_until(Duration::from_secs(20), || async {
        let reply = call(&node.app, "GET", "/readyz", None).await;
        reply.status == 503 && reply.json["reasons"].to_string().contains("database")
    })
    .await;
    lock.rollback().await.expect("unlock");
    wait_until(Duration::from_secs(20), || async {
        call(&node.app, "GET", "/readyz", None).await.status == 200
    })
    .await;
    node.stop().await;
}
