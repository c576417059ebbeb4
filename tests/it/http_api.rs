//! The client HTTP API end to end: `http::app` driven with `oneshot`, real
//! PostgreSQL behind `DirectSubmissions` (or a stub for engine refusals).

use std::{sync::Arc, time::Duration};
use txmgr::http::ServedChains;

use crate::common::TestDb;
use alloy::primitives::Address;
use async_trait::async_trait;
use axum::{
    body::Body,
    http::{header, Request, StatusCode},
};
use serde_json::{json, Value};
use txmgr::{
    config::DEFAULT_MAX_LONG_POLLS,
    http::{app, AppState, CompletionNotifier, Limits, Submissions},
};
use txmgr_actors::domain::{CreateError, CreateOutcome, NewIntent};

mod api;
use api::{limits, send, transfer, Api, ALICE, BOB, BODY_LIMIT, CHAIN, DATA_LIMIT};

#[tokio::test]
async fn create_is_accepted_then_readable() {
    let api = Api::new().await;
    let created = api.post(transfer("r-1")).await;
    assert_eq!(created.status, StatusCode::ACCEPTED, "{}", created.json);
    assert_eq!(created.json["state"], "QUEUED");
    assert_eq!(created.json["submitter"], ALICE);
    assert_eq!(created.json["request_id"], "r-1");
    let tx_id = created.json["tx_id"].as_str().expect("tx_id").to_owned();

    let got = api.get(&format!("/v1/transactions/{tx_id}")).await;
    assert_eq!(got.status, StatusCode::OK, "{}", got.json);
    assert_eq!(got.json["tx_id"], tx_id.as_str());
    assert_eq!(got.json["to"], BOB);
    assert_eq!(got.json["value"], "1000");
    assert_eq!(got.json["data"], "0xdead");
    assert_eq!(got.json["attempts"], 0);
    assert_eq!(got.json["receipt"], Value::Null);

    let by_id = api
        .get(&format!(
            "/v1/transactions?submitter={ALICE}&request_id=r-1"
        ))
        .await;
    assert_eq!(by_id.status, StatusCode::OK);
    assert_eq!(by_id.json["tx_id"], tx_id.as_str());
}

#[tokio::test]
async fn replay_answers_200_and_conflict_409_without_new_rows() {
    let api = Api::new().await;
    let first = api.post(transfer("r-1")).await;
    assert_eq!(first.status, StatusCode::ACCEPTED);
    let replay = api.post(transfer("r-1")).await;
    assert_eq!(replay.status, StatusCode::OK, "{}", replay.json);
    assert_eq!(replay.json["tx_id"], first.json["tx_id"]);
    assert_eq!(replay.json["state"], "QUEUED");

    let mut different = transfer("r-1");
    different["value"] = json!("2000");
    let conflict = api.post(different).await;
    conflict.assert_error(
        StatusCode::CONFLICT,
        "idempotency_conflict",
        Some("request_id"),
    );
    // The intent that holds the id, for a client whose first answer was lost.
    assert_eq!(conflict.json["error"]["tx_id"], first.json["tx_id"]);
    assert_eq!(api.rows().await, 1);
}

#[tokio::test]
async fn idempotency_key_header_stands_for_request_id() {
    let api = Api::new().await;
    let body = json!({"submitter": ALICE, "to": BOB}).to_string();
    let json_with_key = |key| {
        [
            ("content-type", "application/json"),
            ("idempotency-key", key),
        ]
    };
    let created = api.post_raw(body.clone(), &json_with_key("k-1")).await;
    assert_eq!(created.status, StatusCode::ACCEPTED, "{}", created.json);
    assert_eq!(created.json["request_id"], "k-1");

    // The same id in the body is the same request.
    let same = json!({"submitter": ALICE, "to": BOB, "request_id": "k-1"}).to_string();
    let replay = api.post_raw(same, &json_with_key("k-1")).await;
    assert_eq!(replay.status, StatusCode::OK, "{}", replay.json);
    assert_eq!(replay.json["tx_id"], created.json["tx_id"]);

    let other = json!({"submitter": ALICE, "to": BOB, "request_id": "k-2"}).to_string();
    api.post_raw(other, &json_with_key("k-1"))
        .await
        .assert_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            Some("request_id"),
        );
    assert_eq!(api.rows().await, 1);
}

#[tokio::test]
async fn concurrent_duplicates_settle_on_one_row() {
    let api = Arc::new(Api::new().await);
    let tasks: Vec<_> = (0..100)
        .map(|_| {
            let api = Arc::clone(&api);
            tokio::spawn(async move { api.post(transfer("hot")).await })
        })
        .collect();
    let mut ids = std::collections::HashSet::new();
    let mut accepted = 0;
    for task in tasks {
        let reply = task.await.expect("task");
        match reply.status {
            StatusCode::ACCEPTED => accepted += 1,
            StatusCode::OK => {}
            other => panic!("unexpected {other}: {}", reply.json),
        }
        ids.insert(reply.json["tx_id"].as_str().expect("tx_id").to_owned());
    }
    assert_eq!(accepted, 1);
    assert_eq!(ids.len(), 1);
    assert_eq!(api.rows().await, 1);
}

#[tokio::test]
async fn bad_input_is_refused_with_code_and_field_and_writes_nothing() {
    let api = Api::new().await;
    let with = |key: &str, value: Value| {
        let mut body = transfer("r-bad");
        body[key] = value;
        body
    };
    let two_pow_256 =
        "115792089237316195423570985008687907853269984665640564039457584007913129639936";
    // Each body is a valid transfer with one field spoilt; that field is blamed.
    let spoilt = [
        ("submitter", json!("0x1234")),
        ("to", json!("0xAbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")), // bad checksum
        ("data", json!("0xabc")),
        ("data", json!("0xzz")),
        ("data", json!(format!("0x{}", "00".repeat(DATA_LIMIT + 1)))),
        ("value", json!(1000)), // numbers are refused
        ("value", json!("ten")),
        ("value", json!("-1")),
        ("value", json!(two_pow_256)),
        ("max_fee_per_gas", json!(two_pow_256)),
        ("gas_limit", json!(0)),
        ("gas_limit", json!(-5)),
        ("gasLimit", json!(21000)), // unknown field
        ("request_id", json!("x".repeat(257))),
        ("request_id", json!("")),
    ];
    let mut priority_over_max = with("max_priority_fee_per_gas", json!("10"));
    priority_over_max["max_fee_per_gas"] = json!("9");
    let mut cases: Vec<(String, Option<&str>)> = spoilt
        .into_iter()
        .map(|(key, value)| (with(key, value).to_string(), Some(key)))
        .collect();
    cases.extend([
        (r#"{"submitter": "#.to_owned(), None),
        ("[1, 2]".to_owned(), None),
        (json!({"to": BOB}).to_string(), Some("submitter")),
        (json!({"submitter": ALICE}).to_string(), Some("data")), // deploy without code
        (
            priority_over_max.to_string(),
            Some("max_priority_fee_per_gas"),
        ),
    ]);
    for (body, field) in cases {
        let reply = api
            .post_raw(body.clone(), &[("content-type", "application/json")])
            .await;
        let shown = format!("{body:.120} -> {}", reply.json);
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{shown}");
        assert_eq!(reply.json["error"]["code"], "invalid_request", "{shown}");
        assert_eq!(reply.json["error"]["field"].as_str(), field, "{shown}");
    }

    // No Content-Type (what a cross-site page can send): refused before
    // the body is read.
    api.post_raw(transfer("r").to_string(), &[])
        .await
        .assert_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            None,
        );
    let mut stranger = transfer("r");
    stranger["submitter"] = json!(BOB);
    api.post(stranger).await.assert_error(
        StatusCode::UNPROCESSABLE_ENTITY,
        "unknown_submitter",
        None,
    );

    // Over the body limit, announced by Content-Length (the tower-http layer
    // refuses) or not (the extractor's limited read refuses): same answer.
    let huge = with("data", json!(format!("0x{}", "00".repeat(BODY_LIMIT)))).to_string();
    let length = huge.len().to_string();
    let announced = [
        ("content-type", "application/json"),
        ("content-length", length.as_str()),
    ];
    api.post_raw(huge.clone(), &announced).await.assert_error(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        None,
    );
    api.post_raw(huge, &[("content-type", "application/json")])
        .await
        .assert_error(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", None);

    assert_eq!(api.rows().await, 0);
}

#[tokio::test]
async fn list_pages_through_a_submitters_transactions() {
    let api = Api::new().await;
    let mut created = Vec::new();
    for i in 0..5 {
        let reply = api.post(transfer(&format!("r-{i}"))).await;
        created.push(reply.json["tx_id"].clone());
    }
    let mut seen = Vec::new();
    let mut uri = format!("/v1/transactions?submitter={ALICE}&limit=2");
    loop {
        let page = api.get(&uri).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.json);
        let items = page.json["items"].as_array().expect("items");
        assert!(items.len() <= 2);
        seen.extend(items.iter().map(|item| item["tx_id"].clone()));
        match page.json["next"].as_str() {
            Some(next) => uri = format!("/v1/transactions?submitter={ALICE}&limit=2&after={next}"),
            None => break,
        }
    }
    assert_eq!(seen, created);

    let queued = api
        .get(&format!("/v1/transactions?submitter={ALICE}&state=QUEUED"))
        .await;
    assert_eq!(queued.json["items"].as_array().map(Vec::len), Some(5));
    assert_eq!(queued.json["next"], Value::Null);
    let confirmed = api
        .get(&format!(
            "/v1/transactions?submitter={ALICE}&state=CONFIRMED"
        ))
        .await;
    assert_eq!(confirmed.json["items"], json!([]));

    for (query, field) in [
        (format!("submitter={ALICE}&state=queued"), "state"),
        (format!("submitter={ALICE}&limit=0"), "limit"),
        (format!("submitter={ALICE}&limit=501"), "limit"),
        (format!("submitter={ALICE}&after=abc"), "after"),
        (format!("submitter={ALICE}&colour=red"), "colour"),
        (
            format!("submitter={ALICE}&request_id=r-1&state=QUEUED"),
            "request_id",
        ),
        ("state=QUEUED".to_owned(), "submitter"),
        ("submitter=0xzz".to_owned(), "submitter"),
    ] {
        api.get(&format!("/v1/transactions?{query}"))
            .await
            .assert_error(StatusCode::BAD_REQUEST, "invalid_request", Some(field));
    }
}

#[tokio::test]
async fn missing_things_are_404_and_bad_ids_400() {
    let api = Api::new().await;
    let unknown = uuid::Uuid::now_v7();
    api.get(&format!("/v1/transactions/{unknown}"))
        .await
        .assert_error(StatusCode::NOT_FOUND, "not_found", None);
    api.get("/v1/transactions/not-a-uuid").await.assert_error(
        StatusCode::BAD_REQUEST,
        "invalid_request",
        Some("tx_id"),
    );
    api.get(&format!(
        "/v1/transactions?submitter={ALICE}&request_id=nope"
    ))
    .await
    .assert_error(StatusCode::NOT_FOUND, "not_found", None);
    api.get("/v1/nothing-here")
        .await
        .assert_error(StatusCode::NOT_FOUND, "not_found", None);
    // Text PostgreSQL cannot hold (NUL) or that breaks logs is refused at
    // the edge with its field, never a 500 from the database.
    for bad in ["%00", "a%00b", "%0A", &"x".repeat(300)] {
        api.get(&format!(
            "/v1/transactions?submitter={ALICE}&request_id={bad}"
        ))
        .await
        .assert_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            Some("request_id"),
        );
    }
}

/// Answers every create with the same refusal, or never (to hit the timeout).
struct Refusing(Option<CreateError>);

#[async_trait]
impl Submissions for Refusing {
    async fn create(&self, _intent: NewIntent) -> Result<CreateOutcome, CreateError> {
        match &self.0 {
            Some(error) => Err(error.clone()),
            None => std::future::pending().await,
        }
    }
}

#[tokio::test]
async fn engine_refusals_map_to_their_codes() {
    use CreateError::*;
    let db = TestDb::migrated().await;
    let cases = [
        (
            Some(Protected("nonce used externally".into())),
            423,
            "submitter_protected",
        ),
        (
            Some(Overloaded {
                retry_after: Duration::from_millis(1200),
            }),
            429,
            "overloaded",
        ),
        (
            Some(Busy {
                retry_after: Duration::from_millis(1200),
            }),
            503,
            "busy",
        ),
        (
            Some(Unavailable("pg: connection reset".into())),
            503,
            "unavailable",
        ),
        (Some(Draining(Address::ZERO)), 422, "unknown_submitter"),
        (None, 503, "unavailable"), // the request timeout
    ];
    for (refusal, status, code) in cases {
        let state = AppState {
            pool: db.pool.clone(),
            chains: ServedChains::single(CHAIN.into(), Arc::new(Refusing(refusal))),
            limits: Limits {
                request_timeout: Duration::from_millis(200),
                ..limits()
            },
            completions: CompletionNotifier::listen(db.pool.clone(), DEFAULT_MAX_LONG_POLLS),
            ops: Default::default(),
        };
        let request = Request::post("/v1/transactions")
            .header("content-type", "application/json")
            .body(Body::from(transfer("r-1").to_string()))
            .expect("request");
        let reply = send(&app(state), request).await;
        let status = StatusCode::from_u16(status).expect("valid status");
        reply.assert_error(status, code, None);
        if code == "overloaded" || code == "busy" {
            let retry_after = reply.headers.get(header::RETRY_AFTER).map(|v| v.as_bytes());
            assert_eq!(retry_after, Some(&b"2"[..]));
        }
        // Internal details never reach the client.
        assert!(
            !reply.json.to_string().contains("connection reset"),
            "{}",
            reply.json
        );
    }
}
