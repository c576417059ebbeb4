//! Every operation of `GET /v1/openapi.json` sent good and bad requests —
//! without a token, with a client token, with an ops token; bad ids,
//! parameters and bodies — and every answer's status must be one its
//! operation documents, with a JSON body in the error shape.

use std::{sync::Arc, time::Duration};
use txmgr::http::ServedChains;

use axum::{
    body::{to_bytes, Body},
    http::{header, Request, StatusCode},
    Router,
};
use serde_json::Value;
use tower::ServiceExt;
use txmgr::{
    config::{AuthConfig, Role, TokenConfig, DEFAULT_MAX_LONG_POLLS},
    http::{
        app,
        auth::{token_hash_hex, Auth},
        openapi::{self, ROUTES},
        AppState, CompletionNotifier, DirectSubmissions, Limits, OpsState, ERROR_CODES,
    },
};

use crate::common::TestDb;

const CHAIN: u64 = 31337;
const ALICE: &str = "0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const OPS_TOKEN: &str = "ops-secret";
const CLIENT_TOKEN: &str = "client-secret";

/// The client API with authentication on (one ops and one client token),
/// non-public metrics, no engine: what a tool embedding the API serves.
async fn authenticated_app(db: &TestDb) -> Router {
    let token = |name: &str, role, secret: &str| TokenConfig {
        name: name.to_owned(),
        role,
        sha256: token_hash_hex(secret),
        submitters: None,
        rate: None,
    };
    let auth = Auth::from_config(&AuthConfig {
        tokens: vec![
            token("ops", Role::Ops, OPS_TOKEN),
            token("client", Role::Client, CLIENT_TOKEN),
        ],
    });
    let known = [ALICE.parse().expect("address literal")];
    app(AppState {
        pool: db.pool.clone(),
        chains: ServedChains::single(
            CHAIN.into(),
            Arc::new(DirectSubmissions::new(db.pool.clone(), known)),
        ),
        limits: Limits {
            request_timeout: Duration::from_secs(10),
            ..Limits::default()
        },
        completions: CompletionNotifier::listen(db.pool.clone(), DEFAULT_MAX_LONG_POLLS),
        ops: Arc::new(OpsState {
            auth: Arc::new(auth),
            metrics_public: false,
            ..OpsState::default()
        }),
    })
}

struct Answer {
    status: StatusCode,
    allow: Option<String>,
    content_type: String,
    json: Value,
}

async fn call(
    app: &Router,
    method: &str,
    uri: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> Answer {
    let mut request = Request::builder().method(method).uri(uri);
    if let Some(token) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    if body.is_some() {
        request = request.header(header::CONTENT_TYPE, "application/json");
    }
    let request = request
        .body(body.map_or_else(Body::empty, |b| Body::from(b.to_owned())))
        .expect("request");
    let response = app.clone().oneshot(request).await.expect("infallible");
    let header_text = |name| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let allow = header_text(header::ALLOW);
    let content_type = header_text(header::CONTENT_TYPE).unwrap_or_default();
    let status = response.status();
    let bytes = to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    Answer {
        status,
        allow,
        content_type,
        json: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    }
}

/// Asserts the API's error shape with `code`.
#[track_caller]
fn assert_error(answer: &Answer, status: u16, code: &str) {
    assert_eq!(answer.status.as_u16(), status, "{}", answer.json);
    assert!(
        answer.content_type.starts_with("application/json"),
        "{}",
        answer.content_type
    );
    assert_eq!(answer.json["error"]["code"], code, "{}", answer.json);
    assert!(
        answer.json["error"]["message"].is_string(),
        "{}",
        answer.json
    );
}

#[tokio::test]
async fn a_wrong_method_answers_405_in_the_error_shape_with_allow() {
    let db = TestDb::migrated().await;
    let app = authenticated_app(&db).await;
    for (method, uri, token) in [
        ("DELETE", "/v1/transactions", Some(OPS_TOKEN)),
        ("PUT", "/healthz", None),
        ("GET", "/v1/ops/reload", Some(OPS_TOKEN)),
        ("PATCH", "/v1/openapi.json", None),
    ] {
        let answer = call(&app, method, uri, token, None).await;
        assert_error(&answer, 405, "method_not_allowed");
        assert!(
            answer.allow.as_deref().is_some_and(|a| !a.is_empty()),
            "{method} {uri}: Allow names the methods there are"
        );
    }
}

#[tokio::test]
async fn a_path_parameter_that_is_not_utf8_is_a_json_400_naming_it() {
    let db = TestDb::migrated().await;
    let app = authenticated_app(&db).await;
    for (method, uri, field) in [
        ("GET", "/v1/transactions/%FF", "tx_id"),
        ("POST", "/v1/transactions/%C3%28/cancel", "tx_id"),
        ("POST", "/v1/ops/submitters/%FF/restart", "address"),
    ] {
        // An empty JSON body: a POST without it is refused before its path
        // is read (415).
        let body = (method == "POST").then_some("");
        let answer = call(&app, method, uri, Some(OPS_TOKEN), body).await;
        assert_error(&answer, 400, "invalid_request");
        assert_eq!(answer.json["error"]["field"], field, "{}", answer.json);
    }
}

/// Concrete URIs for a documented path: a well-formed id, a malformed one,
/// and (for query routes) good, bad and unknown parameters.
fn uris(path: &str) -> Vec<String> {
    let ids: &[&str] = if path.contains("{tx_id}") {
        &["0190c7a4-6b1e-7cc0-8000-000000000000", "not-a-uuid", "%FF"]
    } else if path.contains("{address}") {
        &[ALICE, "0x12", "%FF"]
    } else if path.contains("{name}") {
        &["hook", "bad%20name", "%FF"]
    } else {
        &[""]
    };
    let mut uris: Vec<String> = ids
        .iter()
        .map(|id| {
            path.replace("{tx_id}", id)
                .replace("{address}", id)
                .replace("{name}", id)
        })
        .collect();
    let queries: &[&str] = match path {
        "/v1/transactions" => &[
            "?submitter=0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "?submitter=0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa&request_id=nope",
            "?submitter=0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa&limit=0",
            "?submitter=nope&state=LOST",
            "?bogus=1",
            "?submitter=%FF",
        ],
        "/v1/completions" => &[
            "?limit=5",
            "?after=x",
            "?wait=forever",
            "?limit=%FF",
            "?funds=true",
            "?funds=maybe",
        ],
        _ => &[],
    };
    for query in queries {
        uris.push(format!("{path}{query}"));
    }
    uris
}

/// Bodies for a documented operation: none, and for POST an empty object,
/// an array, broken JSON and a plausible one.
fn bodies(method: &str) -> Vec<Option<&'static str>> {
    if method != "post" {
        return vec![None];
    }
    vec![
        None,
        Some("{}"),
        Some("[1]"),
        Some("{\"reason\": "),
        Some("{\"reason\": \"ticket 7\"}"),
        Some("{\"all\": true}"),
        Some("{\"id\": 0}"),
        Some("{\"submitter\": \"0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\", \"to\": \"0xbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\", \"value\": \"1\"}"),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_status_the_router_answers_is_documented_for_its_operation() {
    let db = TestDb::migrated().await;
    let app = authenticated_app(&db).await;
    let doc = serde_json::to_value(openapi::document()).expect("document serialises");
    let schemas = &doc["components"]["schemas"];
    let codes: Vec<&str> = schemas["ErrorDetail"]["properties"]["code"]["enum"]
        .as_array()
        .expect("code is an enum")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(codes, ERROR_CODES, "the schema lists every error code");
    let mut undocumented = Vec::new();
    let mut answered = 0;
    for (method, path) in ROUTES {
        let operation = &doc["paths"][path][method];
        let documented = operation["responses"]
            .as_object()
            .unwrap_or_else(|| panic!("{method} {path} is documented"));
        for uri in uris(path) {
            for body in bodies(method) {
                for token in [None, Some("wrong"), Some(CLIENT_TOKEN), Some(OPS_TOKEN)] {
                    let answer = call(&app, &method.to_uppercase(), &uri, token, body).await;
                    answered += 1;
                    let status = answer.status.as_u16();
                    let what = format!(
                        "{} {uri} token={token:?} body={body:?} -> {status} {}",
                        method.to_uppercase(),
                        answer.json
                    );
                    assert!(status < 500 || status == 503, "server error: {what}");
                    if !documented.contains_key(&status.to_string()) {
                        undocumented.push(what);
                        continue;
                    }
                    if status >= 400 {
                        let code = answer.json["error"]["code"].as_str().unwrap_or_default();
                        let health = path == &"/readyz" && answer.json["status"].is_string();
                        assert!(
                            health || ERROR_CODES.contains(&code),
                            "not the error shape: {what}"
                        );
                    }
                }
            }
        }
    }
    assert!(
        undocumented.is_empty(),
        "{} of {answered} answers have a status their operation does not document:\n{}",
        undocumented.len(),
        undocumented.join("\n")
    );
}
