//! Tracker messages coalesced per receiver, shown against a real node
//! whose database is held up on purpose (a table lock taken by the test):
//! a finality worker or a SubmitterActor that cannot make progress holds
//! one message of a kind, not one per head.

use std::time::Duration;

use txmgr_actors::submitter::Role;

use crate::{
    bounded::{call, toml},
    common::{node::TestNode, transfer, wait_until, Anvil, TestDb},
};

/// Waits until the node leads its submitter.
async fn leading(node: &TestNode) {
    wait_until(Duration::from_secs(30), || async {
        node.engine
            .handles()
            .iter()
            .any(|h| h.status().role() == Role::Leader)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_finality_worker_behind_a_blocked_query_holds_one_head_message_not_one_per_tick() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let node = TestNode::start(&toml(&db, &anvil, "", "", "")).await;
    let created = call(&node.app, "POST", "/v1/transactions", Some(transfer("t"))).await;
    assert_eq!(created.status, 202, "{}", created.json);
    // An open intent keeps the node leading, so the worker has work per head.
    let tracking = "SELECT count(*) FROM managed_tx WHERE state = 'TRACKING'";
    db.wait_count(tracking, 1).await;
    leading(&node).await;
    // The finality worker serving the submitter reads managed_tx on every head.
    let mut lock = db.pool.begin().await.expect("begin");
    sqlx::query("LOCK TABLE managed_tx IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *lock)
        .await
        .expect("lock");
    let progress = node.engine.progress();
    let start = progress.head();
    for mined in 1..=15 {
        anvil.mine().await;
        wait_until(Duration::from_secs(10), || async {
            progress.head() >= start + mined
        })
        .await;
    }
    let queue = progress.finality_queue();
    assert!(
        queue.depth <= 2,
        "two finality workers, at most one head message each: {queue:?}"
    );
    lock.rollback().await.expect("unlock");
    wait_until(Duration::from_secs(20), || async {
        progress.finality_queue().depth == 0
    })
    .await;
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_blocked_submitter_actor_holds_one_finality_report_not_one_per_head() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let finality = "finality = { confirmations = 3 }";
    let node = TestNode::start(&toml(&db, &anvil, "", "", finality)).await;
    let created = call(&node.app, "POST", "/v1/transactions", Some(transfer("f"))).await;
    assert_eq!(created.status, 202, "{}", created.json);
    let state = "SELECT count(*) FROM managed_tx WHERE state = 'TRACKING'";
    db.wait_count(state, 1).await;
    anvil.mine().await;
    let mined = "SELECT count(*) FROM managed_tx WHERE receipt IS NOT NULL";
    db.wait_count(mined, 1).await;
    // Every fenced write and lease renewal of the actor waits for this lock;
    // the finality worker's reads do not.
    let mut lock = db.pool.begin().await.expect("begin");
    sqlx::query("LOCK TABLE submitter_lease IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *lock)
        .await
        .expect("lock");
    let progress = node.engine.progress();
    // From the third confirmation on, every head finds the intent final and
    // reports it to the (blocked) actor.
    for _ in 0..14 {
        anvil.mine().await;
        let head = anvil.block_number().await;
        wait_until(Duration::from_secs(10), || async {
            progress.finality_head() >= head
        })
        .await;
    }
    let depth: usize = node
        .engine
        .handles()
        .iter()
        .map(|h| h.mailbox_depth())
        .sum();
    assert!(depth <= 3, "{depth} messages wait for the actor");
    // The actor dies with a report in its mailbox: its successor (spawned
    // by the supervisor) must still hear of the final intent, not find the
    // report marked as queued forever.
    for handle in node.engine.handles() {
        if let Some(actor) = handle.actor() {
            actor.kill();
        }
    }
    lock.rollback().await.expect("unlock");
    let confirmed = "SELECT count(*) FROM managed_tx WHERE state = 'CONFIRMED'";
    db.wait_count(confirmed, 1).await;
    node.stop().await;
}
