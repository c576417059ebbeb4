//! Actions on one intent are bounded (README "Resubmission, fee bumps,
//! STUCK and cancel"): a cancel of an intent already being cancelled changes
//! nothing (200 `unchanged`), a client asks for each action on one intent at
//! most once per resubmit interval (429 `rate_limited`), and every carried
//! out action — an operator's too — counts towards `max_resubmits`.

use std::time::Duration;

use serde_json::Value;
use txmgr::http::auth::token_hash_hex;
use uuid::Uuid;

use crate::common::{
    node::{config_toml, TestNode},
    txs::{attempts, completion_states, intent, wait_state},
    wait_until, Anvil, TestDb, DEV,
};

const CLIENT: &str = "action-bounds-client-token";
const OPS: &str = "action-bounds-ops-token";
const WAIT: Duration = Duration::from_secs(30);

/// A node with fee bumping on, a resubmit interval no test waits for, and a
/// client and an ops token.
async fn node(db: &TestDb, anvil: &Anvil, extra: &str) -> TestNode {
    let toml = config_toml(
        &db.url,
        &anvil.rpc_url(),
        "n1",
        &format!(
            "resubmit_interval = \"60s\"\nmax_in_flight = 1\ngas_bump = {{ enabled = true }}\n{extra}"
        ),
    ) + &format!(
        "[[auth.tokens]]\nname = \"svc\"\nrole = \"client\"\nsha256 = \"{}\"\n\
         [[auth.tokens]]\nname = \"ops\"\nrole = \"ops\"\nsha256 = \"{}\"\n",
        token_hash_hex(CLIENT),
        token_hash_hex(OPS)
    );
    TestNode::start(&toml).await
}

/// Creates a transfer as the client and waits until it is TRACKING.
async fn tracking(node: &TestNode, db: &TestDb) -> Uuid {
    let (status, created) = node
        .request_as(
            Some(CLIENT),
            "POST",
            "/v1/transactions",
            Some(serde_json::json!({"submitter": DEV, "request_id": "bounded", "to": DEV, "value": "1"})),
        )
        .await;
    assert_eq!(status, 202, "{created}");
    let tx_id = created["tx_id"]
        .as_str()
        .and_then(|id| id.parse().ok())
        .expect("tx_id");
    wait_state(&db.pool, tx_id, "TRACKING", WAIT).await;
    tx_id
}

async fn act(node: &TestNode, token: &str, tx_id: Uuid, action: &str) -> (u16, Value) {
    node.request_as(
        Some(token),
        "POST",
        &format!("/v1/transactions/{tx_id}/{action}"),
        None,
    )
    .await
}

/// Waits until the leader has taken every request on the intent and every
/// attempt it signed has an answer.
async fn settled(db: &TestDb, tx_id: Uuid) {
    wait_until(WAIT, || async {
        sqlx::query_scalar::<_, bool>(
            "SELECT m.requested_action IS NULL
                    AND NOT EXISTS (SELECT 1 FROM tx_attempt t WHERE t.tx_id = m.tx_id
                                       AND t.broadcast_result IS NULL
                                       AND t.tx_hash IS DISTINCT FROM m.accepted_hash)
               FROM managed_tx m WHERE m.tx_id = $1",
        )
        .bind(tx_id)
        .fetch_one(&db.pool)
        .await
        .unwrap_or(false)
    })
    .await;
}

async fn audited(db: &TestDb, tx_id: Uuid, action: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM ops_audit WHERE tx_id = $1 AND action = $2")
        .bind(tx_id)
        .bind(action)
        .fetch_one(&db.pool)
        .await
        .expect("audit")
}

async fn resubmits(db: &TestDb, tx_id: Uuid) -> i32 {
    sqlx::query_scalar("SELECT resubmits FROM managed_tx WHERE tx_id = $1")
        .bind(tx_id)
        .fetch_one(&db.pool)
        .await
        .expect("resubmits")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifteen_cancels_of_one_intent_replace_it_once() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let node = node(&db, &anvil, "").await;
    let tx_id = tracking(&node, &db).await;

    let started = std::time::Instant::now();
    let mut answers = Vec::new();
    for _ in 0..15 {
        answers.push(act(&node, CLIENT, tx_id, "cancel").await);
    }
    assert!(started.elapsed() < Duration::from_secs(5), "within 5 s");
    // The claim clears the request before the cancel is signed: wait for it.
    wait_until(WAIT, || async {
        attempts(&db.pool, tx_id)
            .await
            .iter()
            .any(|a| a.kind == "cancel")
    })
    .await;
    settled(&db, tx_id).await;
    // And an operator's cancel once the cancel is out changes nothing either.
    answers.push(act(&node, OPS, tx_id, "cancel").await);
    settled(&db, tx_id).await;

    let kinds: Vec<String> = attempts(&db.pool, tx_id)
        .await
        .into_iter()
        .map(|a| a.kind)
        .collect();
    assert_eq!(kinds, ["original", "cancel"], "one replacement, no bumps");
    let (status, first) = &answers[0];
    assert_eq!(
        (*status, first["status"].as_str()),
        (202, Some("requested")),
        "{first}"
    );
    for (status, body) in &answers[1..] {
        assert_eq!(
            (*status, body["status"].as_str(), body["state"].as_str()),
            (200, Some("unchanged"), Some("TRACKING")),
            "a second cancel of a cancelling intent: {body}"
        );
    }
    assert_eq!(
        audited(&db, tx_id, "tx_cancel").await,
        1,
        "one request recorded"
    );
    assert_eq!(
        resubmits(&db, tx_id).await,
        1,
        "the cancel counts as a resubmit"
    );
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_rebroadcasts_an_intent_once_per_resubmit_interval() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let node = node(&db, &anvil, "").await;
    let tx_id = tracking(&node, &db).await;
    let sent_before: i32 =
        sqlx::query_scalar("SELECT submit_attempts FROM managed_tx WHERE tx_id = $1")
            .bind(tx_id)
            .fetch_one(&db.pool)
            .await
            .expect("submit_attempts");

    let mut statuses = Vec::new();
    for _ in 0..10 {
        let (status, body) = act(&node, CLIENT, tx_id, "rebroadcast").await;
        if status == 429 {
            assert_eq!(body["error"]["code"], "rate_limited", "{body}");
        }
        statuses.push(status);
    }
    assert_eq!(statuses, [[202].as_slice(), &[429; 9]].concat());
    settled(&db, tx_id).await;
    let sent = || async {
        sqlx::query_scalar::<_, i32>("SELECT submit_attempts FROM managed_tx WHERE tx_id = $1")
            .bind(tx_id)
            .fetch_one(&db.pool)
            .await
            .expect("submit_attempts")
    };
    // The claim clears the request before the bytes go out: wait for the send.
    wait_until(WAIT, || async { sent().await > sent_before }).await;
    assert_eq!(sent().await, sent_before + 1, "one re-broadcast");
    assert_eq!(audited(&db, tx_id, "tx_rebroadcast").await, 1);
    assert_eq!(resubmits(&db, tx_id).await, 1, "it counts as a resubmit");
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_operators_actions_count_towards_max_resubmits() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let node = node(&db, &anvil, "max_resubmits = 2").await;
    let tx_id = tracking(&node, &db).await;
    for (i, action) in ["speedup", "rebroadcast", "speedup"]
        .into_iter()
        .enumerate()
    {
        let (status, body) = act(&node, OPS, tx_id, action).await;
        assert_eq!(status, 202, "{action}: {body}");
        settled(&db, tx_id).await;
        assert_eq!(
            resubmits(&db, tx_id).await,
            i32::try_from(i + 1).expect("small")
        );
    }
    // The third resubmit is over max_resubmits (2): STUCK (then bumped as
    // asked: it stays tracked), with its reason and a completion row.
    let stuck = intent(&db.pool, tx_id).await;
    assert_eq!(stuck.state, "STUCK", "{stuck:?}");
    assert!(
        stuck
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("max_resubmits 2")),
        "{stuck:?}"
    );
    assert_eq!(completion_states(&db.pool, tx_id).await, ["STUCK"]);
    node.stop().await;
}
