//! The HTTP API test client: the router over a fresh database, a reply
//! type with the error-shape assertion, and the request bodies.

use std::{sync::Arc, time::Duration};
use txmgr::http::ServedChains;

use alloy::primitives::Address;
use axum::{
    body::{to_bytes, Body},
    http::{HeaderMap, Request, StatusCode},
    Router,
};
use serde_json::{json, Value};
use tower::ServiceExt;
use txmgr::{
    config::DEFAULT_MAX_LONG_POLLS,
    http::{app, AppState, CompletionNotifier, DirectSubmissions, Limits},
};

use crate::common::TestDb;

/// Chain the API serves (anvil's id; no chain is contacted).
pub(crate) const CHAIN: u64 = 31337;
/// `data` limit in bytes, small so tests can exceed it cheaply.
pub(crate) const DATA_LIMIT: usize = 64;
/// Body limit in bytes, small so tests can exceed it cheaply.
pub(crate) const BODY_LIMIT: usize = 4096;
/// The one submitter the API knows.
pub(crate) const ALICE: &str = "0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
/// A recipient.
pub(crate) const BOB: &str = "0xbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

/// The API limits every test runs with.
pub(crate) fn limits() -> Limits {
    Limits {
        body_limit_bytes: BODY_LIMIT,
        data_limit_bytes: DATA_LIMIT,
        request_timeout: Duration::from_secs(30),
        ..Limits::default()
    }
}

/// The router over a fresh migrated database, driven with `oneshot`.
pub(crate) struct Api {
    pub(crate) db: TestDb,
    pub(crate) app: Router,
}

/// One answer: status, headers and the body as JSON (`Null` if none).
pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) json: Value,
}

impl Reply {
    /// Asserts the error shape, code and field.
    #[track_caller]
    pub(crate) fn assert_error(&self, status: StatusCode, code: &str, field: Option<&str>) {
        assert_eq!(self.status, status, "{}", self.json);
        assert_eq!(self.json["error"]["code"], code, "{}", self.json);
        assert_eq!(self.json["error"]["field"].as_str(), field, "{}", self.json);
        assert!(self.json["error"]["message"].is_string(), "{}", self.json);
    }
}

impl Api {
    /// A router over a fresh migrated database that knows [`ALICE`].
    pub(crate) async fn new() -> Api {
        let db = TestDb::migrated().await;
        let known = [ALICE.parse::<Address>().expect("address literal")];
        let state = AppState {
            pool: db.pool.clone(),
            chains: ServedChains::single(
                CHAIN.into(),
                Arc::new(DirectSubmissions::new(db.pool.clone(), known)),
            ),
            limits: limits(),
            completions: CompletionNotifier::listen(db.pool.clone(), DEFAULT_MAX_LONG_POLLS),
            ops: Default::default(),
        };
        Api {
            app: app(state),
            db,
        }
    }

    /// Sends any request.
    pub(crate) async fn send(&self, request: Request<Body>) -> Reply {
        send(&self.app, request).await
    }

    /// Posts `body` as is to `/v1/transactions` with `headers`.
    pub(crate) async fn post_raw(&self, body: impl Into<Body>, headers: &[(&str, &str)]) -> Reply {
        let mut request = Request::post("/v1/transactions");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        self.send(request.body(body.into()).expect("request")).await
    }

    /// Posts `body` as JSON to `/v1/transactions`.
    pub(crate) async fn post(&self, body: Value) -> Reply {
        self.post_raw(body.to_string(), &[("content-type", "application/json")])
            .await
    }

    /// GETs `uri`.
    pub(crate) async fn get(&self, uri: &str) -> Reply {
        self.send(Request::get(uri).body(Body::empty()).expect("request"))
            .await
    }

    /// Rows in `managed_tx`, to prove a refusal wrote nothing.
    pub(crate) async fn rows(&self) -> i64 {
        sqlx::query_scalar("SELECT count(*) FROM managed_tx")
            .fetch_one(&self.db.pool)
            .await
            .expect("count")
    }
}

/// Sends `request` through `app` and collects the reply.
pub(crate) async fn send(app: &Router, request: Request<Body>) -> Reply {
    let response = app.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
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

/// A transfer from [`ALICE`] to [`BOB`] under `request_id`.
pub(crate) fn transfer(request_id: &str) -> Value {
    json!({"submitter": ALICE, "request_id": request_id, "to": BOB, "value": "1000", "data": "0xdead"})
}
