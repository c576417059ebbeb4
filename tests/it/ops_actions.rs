//! Operator views and actions on a running engine (README "HTTP API" and "Configuration"):
//! the actor view answers while an actor is blocked, restart keeps every
//! intent, unprotect clears PROTECT (audited), reload retunes running actors.

use std::{sync::Arc, time::Duration};

use crate::common::{
    faulty_chain::{FaultyChain, SendFault},
    invariants,
    node::{config_toml, TestNode},
    transfer, wait_until, Anvil, Scenario, TestDb, DEV,
};
use alloy::primitives::Address;
use serde_json::{json, Value};
use txmgr_actors::chain::ChainClient;

const OTHER: &str = "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc";

fn dev() -> Address {
    DEV.parse().expect("address literal")
}

/// The actor row of DEV in `GET /v1/ops/actors`.
async fn dev_row(node: &TestNode) -> Value {
    let (status, body) = node.request("GET", "/v1/ops/actors", None).await;
    assert_eq!(status, 200, "{body}");
    body["submitters"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["submitter"] == DEV).cloned())
        .unwrap_or(Value::Null)
}

async fn wait_leader(node: &TestNode, min_token: i64) -> Value {
    let mut row = Value::Null;
    for _ in 0..150 {
        row = dev_row(node).await;
        if row["role"] == "leader" && row["fencing_token"].as_i64().unwrap_or(0) >= min_token {
            return row;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("never leader with token >= {min_token}: {row}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn actors_view_answers_fast_while_the_actor_is_blocked() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let mut faulty = None;
    let node = TestNode::start_with(&config_toml(&db.url, &anvil.rpc_url(), "n1", ""), |chain| {
        let wrapped = FaultyChain::new(chain, SendFault::Gated);
        faulty = Some(wrapped.clone());
        wrapped as Arc<dyn ChainClient>
    })
    .await;
    let faulty = faulty.expect("wrapped");
    let (status, _) = node
        .request("POST", "/v1/transactions", Some(transfer("g1")))
        .await;
    assert_eq!(status, 202);
    wait_until(Duration::from_secs(30), || async {
        faulty.sends.load(std::sync::atomic::Ordering::SeqCst) > 0
    })
    .await;
    // The actor is parked inside its broadcast now, and stays parked until
    // the gate opens below: a view that waited for the actor would never
    // answer. (No wall-clock bound: that would only measure the machine.)
    node.engine.notify(dev());
    let row = tokio::time::timeout(Duration::from_secs(30), dev_row(&node))
        .await
        .expect("ops/actors answered while the actor is blocked");
    assert_eq!(row["role"], "leader", "{row}");
    assert!(row["fencing_token"].as_i64().unwrap_or(0) >= 1, "{row}");
    assert!(row["lease_time_left_ms"].as_u64().unwrap_or(0) > 0, "{row}");
    assert_eq!(row["in_flight"], 1, "{row}");
    let (status, cluster) = node.request("GET", "/v1/ops/cluster", None).await;
    assert_eq!(status, 200);
    assert_eq!(cluster["leases"][0]["owner"], "n1", "{cluster}");
    assert_eq!(cluster["leases"][0]["expired"], false, "{cluster}");
    faulty.open_gate();
    invariants::wait_mined(&db.pool, 1, Duration::from_secs(30)).await;
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn restart_drains_and_comes_back_as_leader_without_losing_work() {
    let Scenario { db, anvil, node } = Scenario::single_node("").await;
    for id in ["r1", "r2", "r3"] {
        let (status, _) = node
            .request("POST", "/v1/transactions", Some(transfer(id)))
            .await;
        assert_eq!(status, 202);
    }
    let before = wait_leader(&node, 1).await;
    let token = before["fencing_token"].as_i64().unwrap_or(0);
    let path = format!("/v1/ops/submitters/{DEV}/restart");
    let (status, body) = node.request("POST", &path, None).await;
    assert_eq!(status, 200, "{body}");
    wait_leader(&node, token + 1).await;
    for id in ["r4", "r5"] {
        let (status, _) = node
            .request("POST", "/v1/transactions", Some(transfer(id)))
            .await;
        assert_eq!(status, 202);
    }
    invariants::wait_mined(&db.pool, 5, Duration::from_secs(30)).await;
    invariants::check(&db.pool, &anvil, DEV, 0).await;
    let audited: Vec<Option<String>> =
        sqlx::query_scalar("SELECT outcome FROM ops_audit WHERE action = 'restart'")
            .fetch_all(&db.pool)
            .await
            .expect("audit");
    assert_eq!(audited, [Some("done".to_owned())]);
    node.stop().await;
}

/// A node whose submitter is in PROTECT: one intent of ours mined, then
/// the key used by a transaction that is not ours.
async fn protected_node() -> Scenario {
    let scenario = Scenario::single_node("on_external_nonce = \"protect\"").await;
    let (status, _) = scenario
        .node
        .request("POST", "/v1/transactions", Some(transfer("before-protect")))
        .await;
    assert_eq!(status, 202);
    invariants::wait_mined(&scenario.db.pool, 1, Duration::from_secs(30)).await;
    scenario
        .anvil
        .rpc(
            "eth_sendTransaction",
            json!([{"from": DEV, "to": OTHER, "value": "0x1"}]),
        )
        .await;
    wait_until(Duration::from_secs(30), || async {
        dev_row(&scenario.node).await["protect_reason"].is_string()
    })
    .await;
    scenario
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unprotect_resyncs_the_cursor_and_accepts_creates_again() {
    let Scenario {
        db,
        anvil: _anvil,
        node,
    } = protected_node().await;
    let (status, _) = node
        .request("POST", "/v1/transactions", Some(transfer("p1")))
        .await;
    assert_eq!(status, 423);

    let path = format!("/v1/ops/submitters/{DEV}/unprotect");
    let (status, body) = node.request("POST", &path, Some(json!({}))).await;
    assert_eq!(status, 400, "a reason is required: {body}");
    let (status, body) = node
        .request(
            "POST",
            &path,
            Some(json!({"reason": "ticket 42: our own hot wallet script"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["next_nonce"], 2, "{body}");
    assert!(body["previous_reason"].is_string(), "{body}");
    let (status, body) = node
        .request("POST", "/v1/transactions", Some(transfer("p2")))
        .await;
    assert_eq!(status, 202, "{body}");
    wait_until(Duration::from_secs(30), || async {
        let mined: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM managed_tx WHERE request_id = 'p2' AND nonce = 2
                AND state IN ('TRACKING', 'CONFIRMED')",
        )
        .fetch_one(&db.pool)
        .await
        .unwrap_or(0);
        mined == 1
    })
    .await;
    let (who, reason): (String, Option<String>) = sqlx::query_as(
        "SELECT actor, reason FROM ops_audit WHERE action = 'unprotect' AND submitter = $1",
    )
    .bind(DEV)
    .fetch_one(&db.pool)
    .await
    .expect("audit row");
    assert_eq!(who, "anonymous");
    assert_eq!(
        reason.as_deref(),
        Some("ticket 42: our own hot wallet script")
    );
    node.stop().await;
}

/// The submitter's PROTECT reason as stored.
async fn stored_protect_reason(db: &TestDb) -> Option<String> {
    sqlx::query_scalar("SELECT protect_reason FROM submitter_nonce_cursor WHERE submitter = $1")
        .bind(DEV)
        .fetch_one(&db.pool)
        .await
        .expect("cursor row")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unprotect_and_its_audit_row_commit_together_or_not_at_all() {
    let Scenario {
        db,
        anvil: _anvil,
        node,
    } = protected_node().await;

    // The audit insert fails (as it would on a full disk or a broken
    // table): PROTECT must stay, and nothing may claim otherwise.
    sqlx::query(
        "ALTER TABLE ops_audit ADD CONSTRAINT no_unprotect CHECK (action <> 'unprotect') NOT VALID",
    )
    .execute(&db.pool)
    .await
    .expect("constraint");
    let path = format!("/v1/ops/submitters/{DEV}/unprotect");
    let reason = json!({"reason": "ticket 43"});
    let (status, body) = node.request("POST", &path, Some(reason.clone())).await;
    assert!(
        status >= 500,
        "the action failed as a whole: {status} {body}"
    );
    assert!(
        stored_protect_reason(&db).await.is_some(),
        "PROTECT was cleared without its audit row"
    );
    assert!(dev_row(&node).await["protect_reason"].is_string());
    let (status, _) = node
        .request("POST", "/v1/transactions", Some(transfer("a1")))
        .await;
    assert_eq!(status, 423, "still protected");

    // With the audit table healthy again the same request does both.
    sqlx::query("ALTER TABLE ops_audit DROP CONSTRAINT no_unprotect")
        .execute(&db.pool)
        .await
        .expect("drop constraint");
    let (status, body) = node.request("POST", &path, Some(reason)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(stored_protect_reason(&db).await, None);
    let rows: Vec<(String, Option<String>)> = sqlx::query_as(
        "SELECT reason, outcome FROM ops_audit WHERE action = 'unprotect' AND submitter = $1",
    )
    .bind(DEV)
    .fetch_all(&db.pool)
    .await
    .expect("audit rows");
    assert_eq!(rows, [("ticket 43".to_owned(), Some("done".to_owned()))]);
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restart_is_audited_with_its_outcome_and_never_runs_unaudited() {
    let Scenario {
        db,
        anvil: _anvil,
        node,
    } = Scenario::single_node("").await;
    let (status, _) = node
        .request("POST", "/v1/transactions", Some(transfer("w1")))
        .await;
    assert_eq!(status, 202);
    let token = wait_leader(&node, 1).await["fencing_token"]
        .as_i64()
        .unwrap_or(0);

    // A restart that cannot happen (the submitter is not configured here)
    // leaves no row claiming it did.
    let (status, body) = node
        .request("POST", &format!("/v1/ops/submitters/{OTHER}/restart"), None)
        .await;
    assert_eq!(status, 422, "{body}");
    let claimed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM ops_audit
          WHERE action = 'restart' AND submitter = $1 AND outcome IS DISTINCT FROM 'failed'",
    )
    .bind(OTHER)
    .fetch_one(&db.pool)
    .await
    .expect("audit");
    assert_eq!(claimed, 0, "a failed restart is audited as failed");

    // When its audit row cannot be written, the restart does not run.
    sqlx::query(
        "ALTER TABLE ops_audit ADD CONSTRAINT no_restart CHECK (action <> 'restart') NOT VALID",
    )
    .execute(&db.pool)
    .await
    .expect("constraint");
    let path = format!("/v1/ops/submitters/{DEV}/restart");
    let (status, body) = node.request("POST", &path, None).await;
    assert!(status >= 500, "{status} {body}");
    let row = dev_row(&node).await;
    // A restart releases the lease: the token would be 0 or a newer one.
    assert_eq!(row["fencing_token"], token, "not restarted: {row}");
    node.stop().await;
}
