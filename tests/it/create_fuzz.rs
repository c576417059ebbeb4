//! Fuzz-style test of `POST /v1/transactions` (issue 6): a fixed-seed stream
//! of random and malformed bodies never yields a 5xx, every refusal has the
//! one error shape, and only accepted (202) bodies write a row. And what a
//! fuzzer gets accepted cannot stop the engine (issue 12): an intent whose
//! code halts the EVM is rejected, and the submitter's later work proceeds.

use crate::common::{
    invariants,
    node::{config_toml, TestNode},
    Anvil, Scenario, TestDb, DEV,
};
use axum::{
    body::{to_bytes, Body},
    http::Request,
};
use rand::{rngs::StdRng, Rng, SeedableRng};
use serde_json::{json, Map, Value};
use tower::ServiceExt;

const TO: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";
const CASES: usize = 500;
const FIELDS: &[&str] = &[
    "submitter",
    "to",
    "value",
    "data",
    "gas_limit",
    "request_id",
];

/// Sends raw bytes as a create; returns status and body text.
async fn post_raw(node: &TestNode, content_type: Option<&str>, body: Vec<u8>) -> (u16, String) {
    let mut builder = Request::builder().method("POST").uri("/v1/transactions");
    if let Some(ct) = content_type {
        builder = builder.header("content-type", ct);
    }
    let response = node
        .app
        .clone()
        .oneshot(builder.body(Body::from(body)).expect("request"))
        .await
        .expect("router answers");
    let status = response.status().as_u16();
    let bytes = to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

fn random_string(rng: &mut StdRng) -> String {
    let len = rng.random_range(0..40);
    match rng.random_range(0..4) {
        0 => (0..len).map(|_| rng.random_range(' '..='~')).collect(),
        1 => (0..len).map(|_| rng.random::<char>()).collect(),
        2 => format!(
            "0x{}",
            (0..len)
                .map(|_| b"0123456789abcdefABCDEFxyz"[rng.random_range(0..25)] as char)
                .collect::<String>()
        ),
        _ => "9".repeat(rng.random_range(1..200)),
    }
}

fn random_value(rng: &mut StdRng, depth: u32) -> Value {
    match rng.random_range(0..if depth > 2 { 6 } else { 8 }) {
        0 => Value::Null,
        1 => Value::Bool(rng.random()),
        2 => json!(rng.random::<i64>()),
        3 => json!(rng.random::<f64>() * 1e30),
        4 => Value::String(random_string(rng)),
        5 => json!(u64::MAX),
        6 => Value::Array(
            (0..rng.random_range(0..4))
                .map(|_| random_value(rng, depth + 1))
                .collect(),
        ),
        _ => {
            let mut map = Map::new();
            for _ in 0..rng.random_range(0..4) {
                map.insert(random_string(rng), random_value(rng, depth + 1));
            }
            Value::Object(map)
        }
    }
}

/// A plausible create with one or more fields mutated.
fn mutated_create(rng: &mut StdRng, case: usize) -> Value {
    let mut body = json!({
        "submitter": DEV, "to": TO, "value": "1", "request_id": format!("fuzz-{case}"),
    });
    let map = body.as_object_mut().expect("object");
    for _ in 0..rng.random_range(1..4) {
        let field = FIELDS[rng.random_range(0..FIELDS.len())];
        match rng.random_range(0..4) {
            0 => {
                map.remove(field);
            }
            1 => {
                map.insert(field.to_string(), random_value(rng, 0));
            }
            2 => {
                map.insert(random_string(rng), random_value(rng, 0));
            }
            _ => {
                let odd = [
                    "0x", "0xzz", "-1", "1e3", "0x0", "", "00", " 1", "1.5",
                    "115792089237316195423570985008687907853269984665640564039457584007913129639936",
                ];
                map.insert(
                    field.to_string(),
                    json!(odd[rng.random_range(0..odd.len())]),
                );
            }
        }
    }
    body
}

/// One fuzz case: content type and raw body bytes.
fn case(rng: &mut StdRng, i: usize) -> (Option<&'static str>, Vec<u8>) {
    let json_ct = Some("application/json");
    match rng.random_range(0..7) {
        0 => (json_ct, random_value(rng, 0).to_string().into_bytes()),
        1 | 2 => (json_ct, mutated_create(rng, i).to_string().into_bytes()),
        3 => {
            let full = mutated_create(rng, i).to_string();
            let cut = rng.random_range(0..full.len().max(1));
            (json_ct, full.as_bytes()[..cut].to_vec())
        }
        4 => {
            let len = rng.random_range(0..64);
            (json_ct, (0..len).map(|_| rng.random::<u8>()).collect())
        }
        5 => {
            // Valid JSON framing around invalid UTF-8 inside a string.
            let mut bytes = br#"{"submitter":""#.to_vec();
            bytes.extend([0xff, 0xfe, 0xc3]);
            bytes.extend(format!(r#"","to":"{TO}","value":"1"}}"#).as_bytes());
            (json_ct, bytes)
        }
        _ => {
            let cts = [
                None,
                Some("text/plain"),
                Some("application/json; charset=utf-8"),
            ];
            let ct = cts[rng.random_range(0..cts.len())];
            (ct, mutated_create(rng, i).to_string().into_bytes())
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn random_and_malformed_creates_never_5xx_and_never_write_rejected_rows() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let node = TestNode::start(&config_toml(
        &db.url,
        &anvil.rpc_url(),
        "fuzz",
        "max_in_flight = 256",
    ))
    .await;
    let mut rng = StdRng::seed_from_u64(0x7a6d_6772_2006);
    let mut accepted = 0i64;
    let mut by_status = std::collections::BTreeMap::<u16, usize>::new();
    for i in 0..CASES {
        let (ct, bytes) = case(&mut rng, i);
        let shown = String::from_utf8_lossy(&bytes).into_owned();
        let (status, text) = post_raw(&node, ct, bytes).await;
        *by_status.entry(status).or_default() += 1;
        assert!(status < 500, "case {i}: {status} for {shown:?}: {text}");
        if (200..300).contains(&status) {
            // 200 is an idempotent replay of an earlier accepted body.
            assert!(
                status == 202 || status == 200,
                "case {i}: {shown:?}: {text}"
            );
            accepted += i64::from(status == 202);
            continue;
        }
        let body: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("case {i}: {status} body is not JSON ({e}): {text:?}"));
        let error = &body["error"];
        assert!(
            error["code"].is_string() && error["message"].is_string(),
            "case {i}: {status} without the error shape for {shown:?}: {body}"
        );
    }
    println!("fuzz statuses: {by_status:?}, accepted {accepted}");
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM managed_tx")
        .fetch_one(&db.pool)
        .await
        .expect("count");
    assert_eq!(
        rows, accepted,
        "rows written vs 202 answers ({by_status:?})"
    );
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_intent_whose_code_halts_the_evm_is_rejected_and_blocks_nothing() {
    let Scenario {
        db,
        anvil: _anvil,
        node,
    } = Scenario::single_node("").await;
    // Init code 0x0c is an undefined opcode (schemathesis sent such bytes):
    // estimating the deployment halts, as it will every time.
    let halting = json!({"submitter": DEV, "data": "0x0c", "request_id": "halts"});
    let (status, body) = node
        .request("POST", "/v1/transactions", Some(halting))
        .await;
    assert_eq!(status, 202, "{body}");
    let good = json!({"submitter": DEV, "to": TO, "value": "1", "request_id": "after"});
    let (status, body) = node.request("POST", "/v1/transactions", Some(good)).await;
    assert_eq!(status, 202, "{body}");
    invariants::wait_mined(&db.pool, 1, std::time::Duration::from_secs(30)).await;
    let (state, nonce, error): (String, Option<i64>, Option<String>) = sqlx::query_as(
        "SELECT state, nonce, last_error FROM managed_tx WHERE request_id = 'halts'",
    )
    .fetch_one(&db.pool)
    .await
    .expect("intent");
    assert_eq!((state.as_str(), nonce), ("REJECTED", None), "{error:?}");
    node.stop().await;
}
