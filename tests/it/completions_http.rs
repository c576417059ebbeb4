//! `GET /v1/completions` over the router: long polls woken by a commit or
//! answered empty at their deadline, a held-back row served once the older
//! transaction ends, cursors that round-trip, and bad parameters refused
//! with their field. Serialised with the feed tests (see `completions`).

use std::{sync::Arc, time::Duration};
use txmgr::http::ServedChains;

use alloy::primitives::Address;
use axum::{
    body::{to_bytes, Body},
    http::{Request, StatusCode},
    Router,
};
use serde_json::Value;
use sqlx::PgPool;
use tokio::time::Instant;
use tower::ServiceExt;
use txmgr::{
    config::DEFAULT_MAX_LONG_POLLS,
    http::{app, AppState, CompletionNotifier, DirectSubmissions, Limits},
};

use crate::{
    common::{eventually, wait_until, TestDb},
    completions::{complete, CHAIN, OTHER_CHAIN, POLL_INTERVAL, SERIAL, SERVED_WITHIN, SUBMITTER},
};

/// The router with [`DirectSubmissions`] and a live notifier.
fn router(db: &TestDb, request_timeout: Duration) -> Router {
    router_with(db, request_timeout).0
}

/// [`router`], and its notifier (to see long polls waiting).
fn router_with(db: &TestDb, request_timeout: Duration) -> (Router, CompletionNotifier) {
    let known = [SUBMITTER.parse::<Address>().expect("address literal")];
    let completions = CompletionNotifier::listen(db.pool.clone(), DEFAULT_MAX_LONG_POLLS);
    let app = app(AppState {
        pool: db.pool.clone(),
        chains: ServedChains::single(
            CHAIN.into(),
            Arc::new(DirectSubmissions::new(db.pool.clone(), known)),
        ),
        limits: Limits {
            request_timeout,
            ..Limits::default()
        },
        completions: completions.clone(),
        ops: Default::default(),
    });
    (app, completions)
}

/// Waits until `n` long polls wait on `notifier`.
async fn waiting(notifier: &CompletionNotifier, n: usize) {
    wait_until(SERVED_WITHIN, || async { notifier.waiting() == n }).await;
}

async fn get(app: &Router, uri: &str) -> (StatusCode, Value) {
    let request = Request::get(uri).body(Body::empty()).expect("request");
    let response = app.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    let bytes = to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    (status, serde_json::from_slice(&bytes).expect("JSON body"))
}

fn items(body: &Value) -> &Vec<Value> {
    body["items"].as_array().expect("items array")
}

/// Waits until the notifier's LISTEN session is up, so a wake-up can only
/// come from the NOTIFY (a notifier without its session re-checks on a timer).
async fn listener_ready(pool: &PgPool) {
    wait_until(SERVED_WITHIN, || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM pg_stat_activity
              WHERE datname = current_database() AND query LIKE 'LISTEN %txmgr_completion%'",
        )
        .fetch_one(pool)
        .await
        .map(|n| n > 0)
        .unwrap_or(false)
    })
    .await;
}

#[tokio::test]
async fn long_poll_wakes_when_a_completion_commits() {
    let _serial = SERIAL.lock().await;
    let db = TestDb::migrated().await;
    let (app, notifier) = router_with(&db, Duration::from_secs(30));
    listener_ready(&db.pool).await;
    let (status, body) = get(&app, "/v1/completions").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(items(&body).is_empty());
    assert!(body["next_after"].is_null());

    let poll = tokio::spawn({
        let app = app.clone();
        async move { get(&app, "/v1/completions?wait=25s").await }
    });
    // Commit once the request waits.
    waiting(&notifier, 1).await;
    let started = Instant::now();
    let tx_id = complete(&db.pool, CHAIN, Some("order-1")).await;
    let (status, body) = poll.await.expect("poll");
    let elapsed = started.elapsed();
    assert_eq!(status, StatusCode::OK, "{body}");
    // Woken by the commit, not by its 25 s deadline (with room for a slow
    // machine: only a missed wake-up comes near the deadline).
    assert!(elapsed < Duration::from_secs(15), "woke after {elapsed:?}");
    let rows = items(&body);
    assert_eq!(rows.len(), 1, "{body}");
    assert_eq!(rows[0]["tx_id"], tx_id.to_string());
    assert_eq!(rows[0]["request_id"], "order-1");
    assert_eq!(rows[0]["state"], "CANCELLED");
    assert_eq!(rows[0]["submitter"], SUBMITTER);
    assert!(rows[0]["completed_at"].is_string());
    assert_eq!(body["next_after"], rows[0]["cursor"]);
}

#[tokio::test]
async fn long_poll_serves_a_held_back_row_once_the_older_transaction_ends() {
    let _serial = SERIAL.lock().await;
    let db = TestDb::migrated().await;
    let (app, notifier) = router_with(&db, Duration::from_secs(10));
    listener_ready(&db.pool).await;

    // An older write transaction (it holds an xid) that sends no NOTIFY.
    let mut older = db.pool.begin().await.expect("begin older");
    sqlx::query("SELECT pg_current_xact_id()")
        .execute(&mut *older)
        .await
        .expect("assign xid");
    let started = Instant::now();
    let poll = tokio::spawn({
        let app = app.clone();
        async move { get(&app, "/v1/completions?wait=5s").await }
    });
    waiting(&notifier, 1).await;
    // The completion commits and notifies, but is held back behind `older`:
    // a read now (no wait) does not see it, and the poll still waits.
    let tx_id = complete(&db.pool, CHAIN, None).await;
    let (status, now) = get(&app, "/v1/completions").await;
    assert_eq!(status, StatusCode::OK, "{now}");
    assert!(
        items(&now).is_empty(),
        "served while an older transaction was open: {now}"
    );
    assert!(
        !poll.is_finished(),
        "served while an older transaction was open"
    );
    older.commit().await.expect("older commits");

    let (status, body) = poll.await.expect("poll");
    let elapsed = started.elapsed();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(items(&body).len(), 1, "{body}");
    assert_eq!(items(&body)[0]["tx_id"], tx_id.to_string());
    assert!(elapsed < Duration::from_secs(3), "served after {elapsed:?}");
}

#[tokio::test]
async fn long_poll_answers_empty_at_the_deadline() {
    let _serial = SERIAL.lock().await;
    let db = TestDb::migrated().await;
    let app = router(&db, Duration::from_secs(30));
    complete(&db.pool, CHAIN, None).await;
    let first = eventually(SERVED_WITHIN, POLL_INTERVAL, || async {
        let (_, body) = get(&app, "/v1/completions").await;
        (!items(&body).is_empty()).then_some(body)
    })
    .await;
    let after = first["next_after"].as_str().expect("cursor").to_owned();
    // Another chain's completion is served too, though this node serves
    // only CHAIN: the feed is one stream whatever the node serves.
    let other = complete(&db.pool, OTHER_CHAIN, None).await;
    let second = eventually(SERVED_WITHIN, POLL_INTERVAL, || async {
        let (_, body) = get(&app, &format!("/v1/completions?after={after}")).await;
        (!items(&body).is_empty()).then_some(body)
    })
    .await;
    assert_eq!(items(&second)[0]["tx_id"], other.to_string(), "{second}");
    assert_eq!(items(&second)[0]["chain_id"], OTHER_CHAIN, "{second}");
    let after = second["next_after"].as_str().expect("cursor").to_owned();

    // Nothing new: the long poll waits until its deadline.
    let started = Instant::now();
    let (status, body) = get(&app, &format!("/v1/completions?after={after}&wait=1s")).await;
    let elapsed = started.elapsed();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(items(&body).is_empty(), "{body}");
    assert_eq!(body["next_after"], after.as_str());
    assert!(
        elapsed >= Duration::from_secs(1),
        "answered early: {elapsed:?}"
    );
    // Far from the 27 s a missed deadline would take, with room for load.
    assert!(
        elapsed < Duration::from_secs(15),
        "answered late: {elapsed:?}"
    );

    // A wait beyond the request timeout ends as an empty page, not a 503.
    let short = router(&db, Duration::from_millis(500));
    let (status, body) = get(&short, &format!("/v1/completions?after={after}&wait=60s")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(items(&body).is_empty(), "{body}");
}

#[tokio::test]
async fn cursors_round_trip_through_the_api() {
    let _serial = SERIAL.lock().await;
    let db = TestDb::migrated().await;
    let app = router(&db, Duration::from_secs(10));
    let mut ids = Vec::new();
    let mut others = Vec::new();
    for i in 0..3 {
        ids.push(complete(&db.pool, CHAIN, Some(&format!("r-{i}"))).await);
        others.push(complete(&db.pool, OTHER_CHAIN, None).await);
    }
    // The feed serves a row only once no older transaction anywhere on the
    // server is still running (other tests' included): wait until all six
    // are served; from then on every read below is stable.
    eventually(SERVED_WITHIN, POLL_INTERVAL, || async {
        let (_, body) = get(&app, "/v1/completions?limit=100").await;
        (items(&body).len() == 6).then_some(())
    })
    .await;
    // A chain this node does not serve is a valid filter: its rows only.
    let (status, other) = get(&app, &format!("/v1/completions?chain_id={OTHER_CHAIN}")).await;
    assert_eq!(status, StatusCode::OK, "{other}");
    let served: Vec<&Value> = items(&other).iter().map(|row| &row["tx_id"]).collect();
    let want: Vec<Value> = others
        .iter()
        .map(|id| Value::from(id.to_string()))
        .collect();
    assert_eq!(served, want.iter().collect::<Vec<_>>());
    // Paging below filters on CHAIN: the other chain's rows move the
    // cursor without being shown.
    let only = format!("chain_id={CHAIN}");
    // Three rows read (ids[0], others[0], ids[1]), two shown.
    let (_, first) = get(&app, &format!("/v1/completions?{only}&limit=3")).await;
    let page = items(&first);
    assert_eq!(page.len(), 2, "{first}");
    assert_eq!(page[0]["tx_id"], ids[0].to_string());
    assert_eq!(page[1]["tx_id"], ids[1].to_string());
    assert_eq!(first["next_after"], page[1]["cursor"]);

    // Any row's cursor continues right after that row.
    let from_first = page[0]["cursor"].as_str().expect("cursor");
    let (_, body) = get(&app, &format!("/v1/completions?after={from_first}&{only}")).await;
    let rest: Vec<&Value> = items(&body).iter().map(|row| &row["tx_id"]).collect();
    assert_eq!(
        rest,
        [
            &Value::from(ids[1].to_string()),
            &Value::from(ids[2].to_string())
        ]
    );

    let next = first["next_after"].as_str().expect("cursor");
    let (status, second) = get(
        &app,
        &format!("/v1/completions?after={next}&{only}&limit=2"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        items(&second).len(),
        1,
        "the filtered chain's rows are not shown: {second}"
    );
    assert_eq!(items(&second)[0]["tx_id"], ids[2].to_string());
    let last = second["next_after"].as_str().expect("cursor");
    // Only a hidden row is left: nothing shown, the cursor moves past it.
    let (_, end) = get(&app, &format!("/v1/completions?after={last}&{only}")).await;
    assert!(items(&end).is_empty());
    let past = end["next_after"].as_str().expect("cursor");
    assert_ne!(past, last, "moved past the other chain's last row");
    let (_, end) = get(&app, &format!("/v1/completions?after={past}&{only}")).await;
    assert!(items(&end).is_empty());
    assert_eq!(
        end["next_after"], past,
        "an empty page hands the cursor back"
    );
}

#[tokio::test]
async fn bad_parameters_are_refused_with_their_field() {
    let _serial = SERIAL.lock().await;
    let db = TestDb::migrated().await;
    let app = router(&db, Duration::from_secs(10));
    for (query, field) in [
        ("after=garbage", "after"),
        ("after=1-", "after"),
        ("after=-1-2", "after"),
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=many", "limit"),
        ("wait=61s", "wait"),
        ("wait=soon", "wait"),
        ("wait=1s&wait=2s", "wait"),
        ("from=1-1", "from"),
    ] {
        let (status, body) = get(&app, &format!("/v1/completions?{query}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert_eq!(body["error"]["code"], "invalid_request", "{query}: {body}");
        assert_eq!(body["error"]["field"], field, "{query}: {body}");
    }
    let (status, body) = get(&app, "/v1/completions?limit=1000&wait=0s").await;
    assert_eq!(status, StatusCode::OK, "{body}");
}
