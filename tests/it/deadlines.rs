//! `valid_until` (README "Guardrails"): refused at the edge when in the
//! past, unparsable or too far ahead; an intent not given a nonce by its
//! deadline is REJECTED `expired` without using one (the next intent takes
//! the nonce); one sent but not mined by then is cancelled at the deadline
//! (not at its next resubmit), and the feed says why.

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::{
    node::{config_toml, TestNode},
    wait_until, Anvil, TestDb, DEV,
};

const SINK: &str = "0x000000000000000000000000000000000000dead";

fn transfer(request_id: &str, valid_until: Option<String>) -> Value {
    let mut body = json!({"submitter": DEV, "to": SINK, "value": "1", "request_id": request_id});
    if let Some(until) = valid_until {
        body["valid_until"] = json!(until);
    }
    body
}

fn in_secs(secs: i64) -> String {
    (chrono::Utc::now() + chrono::Duration::seconds(secs)).to_rfc3339()
}

async fn row(
    db: &TestDb,
    request_id: &str,
) -> (String, Option<String>, Option<i64>, Option<String>) {
    sqlx::query_as(
        "SELECT state, sub_state, nonce, last_error FROM managed_tx WHERE request_id = $1",
    )
    .bind(request_id)
    .fetch_one(&db.pool)
    .await
    .expect("row")
}

/// Waits until the database clock is past `until` (RFC 3339).
async fn db_clock_past(db: &TestDb, until: &str) {
    wait_until(Duration::from_secs(30), || async {
        sqlx::query_scalar::<_, bool>("SELECT now() > $1::timestamptz")
            .bind(until)
            .fetch_one(&db.pool)
            .await
            .expect("clock")
    })
    .await;
}

fn node_toml(db: &TestDb, anvil: &Anvil) -> String {
    config_toml(&db.url, &anvil.rpc_url(), "n1", "")
        + "[http]\nmax_valid_for = \"1h\"\n[defaults]\nfinality = { confirmations = 1 }\n"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deadline_before_allocation_rejects_without_a_nonce_and_bad_ones_are_refused() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let node = TestNode::start(&node_toml(&db, &anvil)).await;

    for (until, why) in [
        (in_secs(-5), "past"),
        (in_secs(7200), "more than http.max_valid_for"),
        ("tomorrow".to_owned(), "RFC 3339"),
    ] {
        let (status, answer) = node
            .request(
                "POST",
                "/v1/transactions",
                Some(transfer("bad", Some(until))),
            )
            .await;
        assert_eq!(status, 400, "{answer}");
        assert_eq!(answer["error"]["field"], "valid_until", "{answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(why)),
            "{answer}"
        );
    }

    // Held by a pause until its deadline has passed.
    let pause = format!("/v1/ops/submitters/{DEV}/pause");
    let (status, answer) = node
        .request("POST", &pause, Some(json!({"reason": "hold"})))
        .await;
    assert_eq!(status, 200, "{answer}");
    let deadline = in_secs(2);
    for (id, until) in [("late", Some(deadline.clone())), ("next", None)] {
        let (status, answer) = node
            .request("POST", "/v1/transactions", Some(transfer(id, until)))
            .await;
        assert_eq!(status, 202, "{answer}");
    }
    db_clock_past(&db, &deadline).await;
    let (status, answer) = node
        .request(
            "POST",
            &format!("/v1/ops/submitters/{DEV}/resume"),
            Some(json!({"reason": "go"})),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    db.wait_count(
        "SELECT count(*) FROM managed_tx WHERE request_id = 'next' AND state = 'CONFIRMED'",
        1,
    )
    .await;
    let (state, sub_state, nonce, reason) = row(&db, "late").await;
    assert_eq!(state, "REJECTED");
    assert_eq!(sub_state.as_deref(), Some("expired"));
    assert_eq!(nonce, None, "no nonce used");
    assert!(reason.is_some_and(|r| r.starts_with("expired")));
    assert_eq!(
        row(&db, "next").await.2,
        Some(0),
        "the next intent takes nonce 0"
    );
    let has_late = |feed: &Value| {
        feed["items"]
            .as_array()
            .is_some_and(|items| items.iter().any(|i| i["request_id"] == "late"))
    };
    let feed = node.feed_when("/v1/completions", has_late).await;
    let late = feed["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|i| i["request_id"] == "late")
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(late["state"], "REJECTED", "{feed}");
    assert!(
        late["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("expired")),
        "{feed}"
    );
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sent_intent_not_mined_by_its_deadline_is_cancelled_then() {
    let db = TestDb::migrated().await;
    // Nothing is mined until the test mines: the intent stays in the pool.
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    // resubmit_interval stays 60 s: the cancel comes from the deadline.
    let node = TestNode::start(&node_toml(&db, &anvil)).await;
    let deadline = in_secs(3);
    let (status, answer) = node
        .request(
            "POST",
            "/v1/transactions",
            Some(transfer("deadline", Some(deadline.clone()))),
        )
        .await;
    assert_eq!(status, 202, "{answer}");
    wait_until(Duration::from_secs(30), || async {
        row(&db, "deadline").await.0 == "TRACKING"
    })
    .await;
    db_clock_past(&db, &deadline).await;
    // The cancel (a 0-value self-transfer at the nonce) is signed and sent.
    wait_until(Duration::from_secs(20), || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM tx_attempt a JOIN managed_tx m ON m.tx_id = a.tx_id
              WHERE m.request_id = 'deadline' AND a.kind = 'cancel'",
        )
        .fetch_one(&db.pool)
        .await
        .expect("attempts")
            == 1
    })
    .await;
    // Mined: the cancel wins.
    wait_until(Duration::from_secs(30), || async {
        if row(&db, "deadline").await.0 == "CANCELLED" {
            return true;
        }
        anvil.mine().await;
        false
    })
    .await;
    // The completion is written once the cancel is final.
    async fn feed_item(node: &TestNode) -> Value {
        let (_, feed) = node.request("GET", "/v1/completions", None).await;
        feed["items"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|i| i["request_id"] == "deadline")
            .cloned()
            .unwrap_or(Value::Null)
    }
    wait_until(Duration::from_secs(30), || async {
        if !feed_item(&node).await.is_null() {
            return true;
        }
        anvil.mine().await;
        false
    })
    .await;
    let item = feed_item(&node).await;
    let feed = &item;
    assert_eq!(item["state"], "CANCELLED", "{feed}");
    assert!(
        item["reason"]
            .as_str()
            .is_some_and(|r| r.contains("valid_until")),
        "{feed}"
    );
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_paused_submitters_intent_expires_at_its_deadline_not_at_the_resume() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let node = TestNode::start(&node_toml(&db, &anvil)).await;
    let (status, answer) = node
        .request(
            "POST",
            &format!("/v1/ops/submitters/{DEV}/pause"),
            Some(json!({"reason": "maintenance"})),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let deadline = in_secs(2);
    for (id, until) in [
        ("paused-expiring", Some(deadline.clone())),
        ("paused-kept", None),
    ] {
        let (status, answer) = node
            .request("POST", "/v1/transactions", Some(transfer(id, until)))
            .await;
        assert_eq!(status, 202, "{answer}");
    }
    // Still paused: the leader's sweep rejects it at the deadline (not a
    // minute later, nor at the resume), without a nonce.
    db_clock_past(&db, &deadline).await;
    wait_until(Duration::from_secs(10), || async {
        row(&db, "paused-expiring").await.0 == "REJECTED"
    })
    .await;
    let (state, sub_state, nonce, reason) = row(&db, "paused-expiring").await;
    assert_eq!(
        (state.as_str(), sub_state.as_deref(), nonce),
        ("REJECTED", Some("expired"), None)
    );
    assert!(reason.is_some_and(|r| r.contains("valid_until")));
    assert_eq!(row(&db, "paused-kept").await.0, "QUEUED");
    // Resumed: the other one takes nonce 0.
    let (status, answer) = node
        .request(
            "POST",
            &format!("/v1/ops/submitters/{DEV}/resume"),
            Some(json!({"reason": "done"})),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    wait_until(Duration::from_secs(30), || async {
        row(&db, "paused-kept").await.0 == "CONFIRMED"
    })
    .await;
    assert_eq!(row(&db, "paused-kept").await.2, Some(0));
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_leader_cancels_at_the_deadline_too_not_at_the_next_resubmit() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    // resubmit_interval and the sweep at 60 s: only the deadline's own
    // timer can bring the cancel within the test's bound.
    let toml =
        node_toml(&db, &anvil).replace("sweep_interval = \"1s\"", "sweep_interval = \"60s\"");
    assert!(toml.contains("sweep_interval = \"60s\""));
    let first = TestNode::start(&toml).await;
    let deadline = in_secs(6);
    let (status, answer) = first
        .request(
            "POST",
            "/v1/transactions",
            Some(transfer("handed-over", Some(deadline.clone()))),
        )
        .await;
    assert_eq!(status, 202, "{answer}");
    wait_until(Duration::from_secs(30), || async {
        row(&db, "handed-over").await.0 == "TRACKING"
    })
    .await;
    // The leader that armed the deadline's timer goes; another takes over.
    first.stop().await;
    let second = TestNode::start(&toml.replace("\"n1\"", "\"n2\"")).await;
    db_clock_past(&db, &deadline).await;
    wait_until(Duration::from_secs(20), || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM tx_attempt a JOIN managed_tx m ON m.tx_id = a.tx_id
              WHERE m.request_id = 'handed-over' AND a.kind = 'cancel'",
        )
        .fetch_one(&db.pool)
        .await
        .expect("attempts")
            == 1
    })
    .await;
    second.stop().await;
}
