//! Submitter policies (README "Guardrails"): each rule the request decides
//! refuses at the edge with 403 `policy_violation` naming the field and the
//! rule, and stores nothing; layers merge rule by rule; a reload changes
//! them at once.

use std::path::PathBuf;

use serde_json::{json, Value};

use crate::common::{
    node::{config_toml, TestNode},
    Anvil, TestDb, DEV,
};

/// Allowed plain destination (anvil's dev account 1).
const PAYEE: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";
/// Allowed destination whose calls are limited to `transfer(address,uint256)`
/// (anvil's dev account 2: any data goes through on chain).
const TOKEN: &str = "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc";
/// A destination no rule allows.
const STRANGER: &str = "0x000000000000000000000000000000000000dead";

struct ConfigFile(PathBuf);

impl Drop for ConfigFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The submitter's own rules, and `max_value_per_tx` from `[defaults]`.
fn policy_toml(db: &TestDb, anvil: &Anvil, submitter_policy: &str) -> String {
    config_toml(&db.url, &anvil.rpc_url(), "n1", submitter_policy)
        + "[defaults]\nfinality = { confirmations = 1 }\n[defaults.policy]\nmax_value_per_tx = \"1000\"\nmax_fee_per_tx = \"63000000000000\"\n"
}

fn strict() -> String {
    format!(
        "policy = {{ allowed_to = [\"{PAYEE}\", \"{TOKEN}\"], allowed_selectors = {{ \"{TOKEN}\" = [\"0xa9059cbb\"] }}, deny_contract_creation = true }}"
    )
}

fn body(request_id: &str, to: Option<&str>, value: &str, data: &str) -> Value {
    let mut body =
        json!({"submitter": DEV, "request_id": request_id, "value": value, "data": data});
    if let Some(to) = to {
        body["to"] = json!(to);
    }
    body
}

async fn create(node: &TestNode, body: Value) -> (u16, Value) {
    node.request("POST", "/v1/transactions", Some(body)).await
}

/// Writes `toml` and reloads it.
async fn reload(node: &TestNode, file: &ConfigFile, toml: String) {
    std::fs::write(&file.0, toml).expect("write");
    let (status, report) = node.request("POST", "/v1/ops/reload", None).await;
    assert_eq!(status, 200, "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_rule_refuses_at_the_edge_storing_nothing_and_a_reload_changes_them() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let file = ConfigFile(
        std::env::temp_dir().join(format!("txmgr-policy-{}.toml", uuid::Uuid::new_v4())),
    );
    std::fs::write(&file.0, policy_toml(&db, &anvil, &strict())).expect("write");
    let node = TestNode::start_file(&file.0).await;

    let approve = format!("0x095ea7b3{}", "00".repeat(64));
    let transfer = format!("0xa9059cbb{}", "00".repeat(64));
    let refused = [
        (body("r-to", Some(STRANGER), "1", "0x"), "to", "allowed_to"),
        (
            body("r-sel", Some(TOKEN), "0", &approve),
            "data",
            "allowed_selectors",
        ),
        (
            body("r-nosel", Some(TOKEN), "1", "0x"),
            "data",
            "allowed_selectors",
        ),
        (
            body("r-create", None, "0", "0x6080"),
            "to",
            "deny_contract_creation",
        ),
        // From [defaults.policy]: the submitter's own table keeps it.
        (
            body("r-value", Some(PAYEE), "1001", "0x"),
            "value",
            "max_value_per_tx",
        ),
        // 21000 gas × 4 gwei = 8.4e13 wei at worst, over 6.3e13.
        (
            {
                let mut priced = body("r-fee", Some(PAYEE), "1", "0x");
                priced["gas_limit"] = json!(21000);
                priced["max_fee_per_gas"] = json!("4000000000");
                priced
            },
            "max_fee_per_gas",
            "max_fee_per_tx",
        ),
    ];
    for (request, field, rule) in &refused {
        let (status, answer) = create(&node, request.clone()).await;
        assert_eq!(status, 403, "{request}: {answer}");
        assert_eq!(answer["error"]["code"], "policy_violation", "{answer}");
        assert_eq!(answer["error"]["field"], *field, "{answer}");
        assert_eq!(answer["error"]["rule"], *rule, "{answer}");
    }
    assert_eq!(db.count("SELECT count(*) FROM managed_tx").await, 0);

    // What the rules allow goes out and confirms.
    for request in [
        body("ok-pay", Some(PAYEE), "1000", "0x"),
        body("ok-call", Some(TOKEN), "0", &transfer),
    ] {
        let (status, answer) = create(&node, request).await;
        assert_eq!(status, 202, "{answer}");
    }
    db.wait_count(
        "SELECT count(*) FROM managed_tx WHERE state = 'CONFIRMED'",
        2,
    )
    .await;
    // Priced by the engine within max_fee_per_tx: gas_limit × max fee per
    // gas of every attempt at most 6.3e13 wei.
    let within: bool = sqlx::query_scalar(
        "SELECT bool_and(COALESCE(max_fee_per_gas, gas_price) * gas_limit <= 63000000000000)
           FROM tx_attempt",
    )
    .fetch_one(&db.pool)
    .await
    .expect("attempts");
    assert!(within, "an attempt priced above max_fee_per_tx");
    let (_, metrics) = node.text("/metrics").await;
    assert!(
        metrics.contains(
            "txmgr_policy_refusals_total{chain=\"default\",rule=\"allowed_selectors\"} 2"
        ),
        "{metrics}"
    );

    // A reload drops the submitter's rules: the defaults' cap still holds.
    reload(&node, &file, policy_toml(&db, &anvil, "")).await;
    let (status, answer) = create(&node, body("after-to", Some(STRANGER), "1", "0x")).await;
    assert_eq!(status, 202, "{answer}");
    let (status, answer) = create(&node, body("after-value", Some(STRANGER), "1001", "0x")).await;
    assert_eq!(status, 403, "{answer}");
    assert_eq!(answer["error"]["rule"], "max_value_per_tx", "{answer}");
    node.stop().await;
}

#[test]
fn a_selector_list_for_a_destination_allowed_to_refuses_is_a_config_error() {
    let toml = format!(
        r#"
[database]
url = "postgres://localhost/x"
[chain]
rpc_url = "http://127.0.0.1:8545"
chain_id = 31337
[submitters."{DEV}"]
signer = {{ kind = "env", env = "K" }}
policy = {{ allowed_to = ["{PAYEE}"], allowed_selectors = {{ "{TOKEN}" = ["0xa9059cbb"] }} }}
"#
    );
    let err = txmgr::config::Config::from_toml_str(&toml, std::iter::empty::<(String, String)>())
        .expect_err("refused");
    let text = err.to_string();
    assert!(text.contains("policy.allowed_selectors"), "{text}");
    assert!(text.contains(TOKEN), "{text}");
}

#[test]
fn a_spend_limit_needs_an_amount_and_a_window_whatever_the_feed_retention() {
    let config = |retain: &str, limit: &str| {
        format!(
            r#"
[database]
url = "postgres://localhost/x"
[chain]
rpc_url = "http://127.0.0.1:8545"
chain_id = 31337
[feed]
retain = "{retain}"
[submitters."{DEV}"]
signer = {{ kind = "env", env = "K" }}
policy = {{ spend_limit = {limit} }}
"#
        )
    };
    let load = |retain: &str, limit: &str| {
        txmgr::config::Config::from_toml_str(
            &config(retain, limit),
            std::iter::empty::<(String, String)>(),
        )
    };
    let text = load("7days", r#"{ window = "1h" }"#)
        .expect_err("refused")
        .to_string();
    assert!(text.contains("policy.spend_limit"), "{text}");
    assert!(text.contains("`value`, `fees` or both"), "{text}");
    let text = load("7days", r#"{ fees = "1", window = "101years" }"#)
        .expect_err("refused")
        .to_string();
    assert!(text.contains("policy.spend_limit.window"), "{text}");
    // The ledger keeps its rows for the longest window any node runs, not
    // for `feed.retain`: neither a shorter feed nor one kept forever
    // (`0s`) refuses a window.
    for retain in ["7days", "1h", "0s"] {
        load(retain, r#"{ fees = "1", window = "8days" }"#)
            .unwrap_or_else(|e| panic!("feed.retain {retain}: {e}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_intent_stored_before_a_rule_was_tightened_is_rejected_at_allocation() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let file = ConfigFile(
        std::env::temp_dir().join(format!("txmgr-policy-{}.toml", uuid::Uuid::new_v4())),
    );
    std::fs::write(&file.0, policy_toml(&db, &anvil, "")).expect("write");
    let node = TestNode::start_file(&file.0).await;
    // Held by a pause while the rule changes under it.
    let (status, answer) = node
        .request(
            "POST",
            &format!("/v1/ops/submitters/{DEV}/pause"),
            Some(json!({"reason": "policy change"})),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = create(&node, body("stored-before", Some(STRANGER), "1", "0x")).await;
    assert_eq!(status, 202, "{answer}");
    // A contract creation stored before `allowed_to` was set: no `to`, so
    // only the listed destinations' rule can stop it.
    let (status, answer) = create(&node, body("created-before", None, "1000", &drain())).await;
    assert_eq!(status, 202, "{answer}");
    let tightened = format!("policy = {{ allowed_to = [\"{PAYEE}\"] }}");
    reload(&node, &file, policy_toml(&db, &anvil, &tightened)).await;
    let (status, answer) = create(&node, body("allowed", Some(PAYEE), "1", "0x")).await;
    assert_eq!(status, 202, "{answer}");
    let (status, answer) = node
        .request(
            "POST",
            &format!("/v1/ops/submitters/{DEV}/resume"),
            Some(json!({"reason": "policy in place"})),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    db.wait_count(
        "SELECT count(*) FROM managed_tx WHERE request_id = 'allowed' AND state = 'CONFIRMED' AND nonce = 0",
        1,
    )
    .await;
    for request_id in ["stored-before", "created-before"] {
        let (state, nonce, reason): (String, Option<i64>, Option<String>) =
            sqlx::query_as("SELECT state, nonce, last_error FROM managed_tx WHERE request_id = $1")
                .bind(request_id)
                .fetch_one(&db.pool)
                .await
                .expect("row");
        assert_eq!(state, "REJECTED", "{request_id}");
        assert_eq!(nonce, None, "{request_id}: no nonce drawn against the rule");
        assert!(
            reason
                .as_deref()
                .is_some_and(|r| r.starts_with("policy_violation: policy allowed_to")),
            "{request_id}: {reason:?}"
        );
    }
    node.stop().await;
}

/// Init code that self-destructs at once, sending the intent's `value` to
/// `STRANGER`: `PUSH20 <STRANGER>; SELFDESTRUCT`.
fn drain() -> String {
    format!("0x73{}ff", STRANGER.trim_start_matches("0x"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_contract_creation_is_refused_where_the_policy_lists_destinations() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let file = ConfigFile(
        std::env::temp_dir().join(format!("txmgr-policy-{}.toml", uuid::Uuid::new_v4())),
    );
    let only = |rules: &str| policy_toml(&db, &anvil, &format!("policy = {{ {rules} }}"));
    std::fs::write(&file.0, only(&format!("allowed_to = [\"{PAYEE}\"]"))).expect("write");
    let node = TestNode::start_file(&file.0).await;
    let (status, answer) = create(&node, body("drain-1", None, "1000", &drain())).await;
    assert_eq!(status, 403, "{answer}");
    assert_eq!(answer["error"]["code"], "policy_violation", "{answer}");
    assert_eq!(answer["error"]["field"], "to", "{answer}");
    assert_eq!(answer["error"]["rule"], "allowed_to", "{answer}");
    assert_eq!(db.count("SELECT count(*) FROM managed_tx").await, 0);
    // (A selector list alone refuses creations too: unit-tested in
    // `policy`, not here, where its refusal would add to the process-wide
    // counter the test above reads.)

    // Allowed in so many words: created, sent and confirmed (with room
    // for a creation's gas under `max_fee_per_tx`).
    reload(
        &node,
        &file,
        only(&format!(
            "allowed_to = [\"{PAYEE}\"], allow_contract_creation = true, \
             max_fee_per_tx = \"1000000000000000\""
        )),
    )
    .await;
    let (status, answer) = create(&node, body("drain-3", None, "1000", &drain())).await;
    assert_eq!(status, 202, "{answer}");
    let settled = || async {
        sqlx::query_as::<_, (String, Option<String>)>(
            "SELECT state, last_error FROM managed_tx WHERE request_id = 'drain-3'",
        )
        .fetch_one(&db.pool)
        .await
        .expect("row")
    };
    crate::common::wait_until(std::time::Duration::from_secs(30), || async {
        matches!(
            settled().await.0.as_str(),
            "CONFIRMED" | "FAILED" | "REJECTED"
        )
    })
    .await;
    let (state, reason) = settled().await;
    assert_eq!(state, "CONFIRMED", "{reason:?}");
    node.stop().await;
}

#[test]
fn config_check_warns_of_a_policy_a_request_can_step_around() {
    let file = ConfigFile(
        std::env::temp_dir().join(format!("txmgr-policy-{}.toml", uuid::Uuid::new_v4())),
    );
    let toml = format!(
        r#"
[database]
url = "postgres://localhost/x"
[chain]
rpc_url = "http://127.0.0.1:8545"
chain_id = 31337
[defaults.policy]
allowed_selectors = {{ "{TOKEN}" = ["0xa9059cbb"] }}
[submitters."{DEV}"]
signer = {{ kind = "env", env = "K" }}
policy = {{ allowed_to = ["{PAYEE}", "{TOKEN}"], allow_contract_creation = true }}
"#
    );
    std::fs::write(&file.0, &toml).expect("write");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_txmgr"))
        .args(["config", "check", "--config"])
        .arg(&file.0)
        .env_remove("RUST_LOG")
        .output()
        .expect("run txmgr");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "warning: submitters.{DEV}.policy.allow_contract_creation: contract creations are accepted"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("warning: defaults.policy.allowed_selectors: without policy.allowed_to"),
        "{stderr}"
    );
    // Creation both allowed and denied is an error.
    let contradiction = toml.replace(
        "allow_contract_creation = true",
        "allow_contract_creation = true, deny_contract_creation = true",
    );
    let err = txmgr::config::Config::from_toml_str(
        &contradiction,
        std::iter::empty::<(String, String)>(),
    )
    .expect_err("refused");
    assert!(
        err.to_string().contains("policy.allow_contract_creation"),
        "{err}"
    );
}
