//! The tracking actors (head watcher, receipt, finality and resubmit pools)
//! are children of the Supervisor: one that dies is spawned again in its
//! slot, the ops view counts the restart, and tracking goes on through the
//! new actors (CONFIRMED needs the finality workers; the leaders' sweep
//! alone never confirms).

use std::time::Duration;

use crate::common::{node::TestNode, transfer, wait_until, Anvil, Scenario, TestDb};
use serde_json::Value;
use txmgr_actors::supervisor::TrackerChild;

async fn state(db: &TestDb, request_id: &str) -> String {
    sqlx::query_scalar("SELECT state FROM managed_tx WHERE request_id = $1")
        .bind(request_id)
        .fetch_optional(&db.pool)
        .await
        .expect("query")
        .unwrap_or_default()
}

/// Creates an intent and mines until it is CONFIRMED.
async fn create_and_confirm(node: &TestNode, anvil: &Anvil, db: &TestDb, request_id: &str) {
    let (status, answer) = node
        .request("POST", "/v1/transactions", Some(transfer(request_id)))
        .await;
    assert_eq!(status, 202, "{answer}");
    wait_until(Duration::from_secs(30), || async {
        if state(db, request_id).await == "CONFIRMED" {
            return true;
        }
        anvil.mine().await;
        false
    })
    .await;
}

/// The tracking actors as `GET /v1/ops/actors` shows them.
async fn tracker_actors(node: &TestNode) -> Vec<Value> {
    let (status, body) = node.request("GET", "/v1/ops/actors", None).await;
    assert_eq!(status, 200, "{body}");
    body["chains"][0]["pools"]["actors"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Waits until every tracking actor runs and the head watcher has been
/// restarted `head` times, every pool worker `workers` times.
async fn all_restarted(node: &TestNode, head: u64, workers: u64) {
    wait_until(Duration::from_secs(10), || async {
        let actors = tracker_actors(node).await;
        !actors.is_empty()
            && actors.iter().all(|a| {
                let expected = if a["actor"] == "head_watcher" {
                    head
                } else {
                    workers
                };
                a["running"] == true && a["restarts"] == expected
            })
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killed_tracking_actors_come_back_and_tracking_continues() {
    let Scenario { db, anvil, node } =
        Scenario::single_node("finality = { confirmations = 2 }").await;
    create_and_confirm(&node, &anvil, &db, "before").await;

    let actors = tracker_actors(&node).await;
    let kinds: Vec<&str> = actors.iter().filter_map(|a| a["actor"].as_str()).collect();
    for kind in [
        "head_watcher",
        "receipt_worker",
        "finality_worker",
        "resubmit_worker",
    ] {
        assert!(kinds.contains(&kind), "{kind} missing from {actors:?}");
    }
    assert!(
        actors
            .iter()
            .all(|a| a["running"] == true && a["restarts"] == 0),
        "{actors:?}"
    );

    // Kill every pool worker, as a panic in its handler would end it. The
    // head watcher lives on: it must find the new workers in their slots.
    let engine = node.engine.clone();
    let tree = engine.tracker();
    for child in tree.children() {
        if child != TrackerChild::Head {
            tree.cell(child).expect("running").kill();
        }
    }
    all_restarted(&node, 0, 1).await;
    create_and_confirm(&node, &anvil, &db, "after_first_restart").await;

    // Then all of them, head watcher included, soon after: restarted again
    // (after a longer backoff for the workers).
    for child in tree.children() {
        tree.cell(child).expect("running").stop(Some("test".into()));
    }
    all_restarted(&node, 1, 2).await;
    create_and_confirm(&node, &anvil, &db, "after_second_restart").await;

    node.stop().await;
    // A shutdown stops them for good: once the supervisor that restarts
    // them is gone, none runs, and none can be started again.
    wait_until(Duration::from_secs(30), || async {
        !engine.snapshot().supervisor_alive
    })
    .await;
    wait_until(Duration::from_secs(30), || async {
        tree.snapshot().iter().all(|a| !a.running)
    })
    .await;
    assert!(!engine.snapshot().supervisor_alive);
}

/// The attempt hashes of an intent, oldest first.
async fn attempt_hashes(db: &TestDb, request_id: &str) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT a.tx_hash FROM tx_attempt a JOIN managed_tx m ON m.tx_id = a.tx_id
          WHERE m.request_id = $1 ORDER BY a.created_at",
    )
    .bind(request_id)
    .fetch_all(&db.pool)
    .await
    .expect("attempts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_resubmit_timer_lost_with_its_worker_is_covered_by_the_leaders_sweep() {
    // No mining: the transaction waits in the pool until the test drops it.
    let Scenario { db, anvil, node } = Scenario::single_node_on(
        &["--no-mining"],
        "resubmit_interval = \"2s\"\nfinality = { confirmations = 1 }",
    )
    .await;
    let (status, answer) = node
        .request("POST", "/v1/transactions", Some(transfer("lost-timer")))
        .await;
    assert_eq!(status, 202, "{answer}");
    wait_until(Duration::from_secs(30), || async {
        state(&db, "lost-timer").await == "TRACKING"
    })
    .await;
    let hashes = attempt_hashes(&db, "lost-timer").await;
    assert_eq!(hashes.len(), 1, "{hashes:?}");
    // The node that took the transaction loses it, and the only reminder
    // to send it again (its resubmit timer) dies with the workers.
    anvil
        .rpc("anvil_dropTransaction", serde_json::json!([hashes[0]]))
        .await;
    let engine = node.engine.clone();
    let tree = engine.tracker();
    for child in tree.children() {
        if matches!(child, TrackerChild::Resubmit(_)) {
            tree.cell(child).expect("running").kill();
        }
    }
    wait_until(Duration::from_secs(10), || async {
        tracker_actors(&node).await.iter().all(|a| {
            a["running"] == true && (a["actor"] != "resubmit_worker" || a["restarts"] == 1)
        })
    })
    .await;
    // The 1 s sweep claims the overdue intent and re-broadcasts its bytes.
    wait_until(Duration::from_secs(30), || async {
        if state(&db, "lost-timer").await == "CONFIRMED" {
            return true;
        }
        anvil.mine().await;
        false
    })
    .await;
    assert_eq!(
        attempt_hashes(&db, "lost-timer").await,
        hashes,
        "re-broadcast, not re-signed"
    );
    node.stop().await;
}

/// The chain's subtree as `GET /v1/ops/actors` shows it.
async fn chain_view(node: &TestNode) -> Value {
    let (status, body) = node.request("GET", "/v1/ops/actors", None).await;
    assert_eq!(status, 200, "{body}");
    body["chains"][0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_chain_supervisor_that_ends_is_started_again_with_its_subtree() {
    let Scenario { db, anvil, node } =
        Scenario::single_node("finality = { confirmations = 2 }").await;
    create_and_confirm(&node, &anvil, &db, "before").await;
    let chain = chain_view(&node).await;
    assert_eq!(chain["supervisor_alive"], true, "{chain}");
    assert_eq!(chain["supervisor_restarts"], 0, "{chain}");

    // As a panic in one of its handlers would end it: its children (the
    // tracking pools and the submitter's actor) end with it.
    let engine = node.engine.clone();
    engine.crash_supervisor();
    wait_until(Duration::from_secs(10), || async {
        let chain = chain_view(&node).await;
        chain["supervisor_alive"] == true
            && chain["supervisor_restarts"] == 1
            && chain["pools"]["actors"]
                .as_array()
                .is_some_and(|a| !a.is_empty() && a.iter().all(|a| a["running"] == true))
    })
    .await;
    // The node's root started the supervisor again, which started its
    // pools and, on the next create, the submitter's actor: work goes on.
    create_and_confirm(&node, &anvil, &db, "after_supervisor_restart").await;

    node.stop().await;
    wait_until(Duration::from_secs(30), || async {
        !engine.snapshot().supervisor_alive
    })
    .await;
    assert_eq!(
        engine.supervisor_restarts(),
        1,
        "a shutdown is not restarted"
    );
}
