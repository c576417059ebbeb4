//! Crash safety: a node dies between two steps of the pipeline; the node
//! that takes over finishes the work with the original nonces and bytes.

use std::{sync::Arc, time::Duration};

use crate::common::{
    faulty_chain::{FaultyChain, SendFault},
    intents::transfer,
    invariants,
    node::{config_toml, TestNode},
    wait_until, Anvil, TestDb, DEV,
};
use alloy::primitives::U256;
use txmgr_actors::{
    chain::ChainClient,
    domain::{CreateOutcome, Intent, NewIntent},
    store::{self, intents, nonce_cursor, pipeline},
    FencedTx, LeaseOwner, LeaseRequest, SubmitterKey,
};

const TO: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";

/// Queues three intents before node a starts, so its first cycle takes all
/// three in one batch and the fault stops the node with all of them at the
/// same step.
async fn queue_three(db: &TestDb) {
    let submitter = SubmitterKey::new(31337, DEV.parse().expect("address"));
    let intents: Vec<NewIntent> = (0..3)
        .map(|i| {
            let intent = Intent {
                to: Some(TO.parse().expect("address")),
                value: U256::from(7),
                data: Default::default(),
                gas_limit: None,
                max_fee_per_gas: None,
                max_priority_fee_per_gas: None,
                private: false,
                valid_until: None,
            };
            NewIntent::new(submitter, Some(format!("c{i}")), intent)
        })
        .collect();
    let outcomes = intents::insert_queued(&db.pool, &intents)
        .await
        .expect("queued");
    assert!(outcomes
        .iter()
        .all(|o| matches!(o, CreateOutcome::Created(_))));
}

/// Attempt hashes before the crash, to prove nothing was re-signed after it.
async fn attempt_hashes(db: &TestDb) -> Vec<(uuid::Uuid, i64, String)> {
    sqlx::query_as("SELECT tx_id, nonce, tx_hash FROM tx_attempt ORDER BY nonce")
        .fetch_all(&db.pool)
        .await
        .expect("attempts")
}

async fn crash_at(fault: SendFault) {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    queue_three(&db).await;
    let faulty = std::sync::Mutex::new(None);
    let node_a = TestNode::start_with(&config_toml(&db.url, &anvil.rpc_url(), "a", ""), |chain| {
        let wrapped = FaultyChain::new(chain, fault);
        *faulty.lock().expect("lock") = Some(wrapped.clone());
        wrapped as Arc<dyn ChainClient>
    })
    .await;
    let faulty = faulty.lock().expect("lock").take().expect("wrapped");
    // Every attempt persisted and the broadcast under way when the node dies.
    wait_until(Duration::from_secs(30), || async {
        db.count("SELECT count(*) FROM tx_attempt").await == 3
            && faulty.sends.load(std::sync::atomic::Ordering::SeqCst) >= 1
    })
    .await;
    let before = attempt_hashes(&db).await;
    node_a.kill();

    // Node b finds the abandoned work by discovery once a's lease expires.
    let node_b = TestNode::start(&config_toml(&db.url, &anvil.rpc_url(), "b", "")).await;
    invariants::wait_mined(&db.pool, 3, Duration::from_secs(60)).await;
    invariants::check(&db.pool, &anvil, DEV, 0).await;
    assert_eq!(
        attempt_hashes(&db).await,
        before,
        "identical bytes, original nonces, no new signature"
    );
    let owner: String = sqlx::query_scalar("SELECT owner_node FROM submitter_lease")
        .fetch_one(&db.pool)
        .await
        .expect("lease");
    assert_eq!(owner, "b");
    node_b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crash_after_persisting_but_before_broadcast_loses_nothing() {
    crash_at(SendFault::HangBeforeSend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crash_after_broadcast_but_before_recording_it_mines_each_intent_once() {
    crash_at(SendFault::HangAfterSend).await;
}

/// A crash or a signer outage after the allocation committed (signing
/// happens outside that transaction) leaves intents ALLOCATED without an
/// attempt. Node a "dies" holding them; node b signs them again with the
/// same nonces.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn intents_allocated_but_never_signed_are_signed_again_with_the_same_nonces() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    queue_three(&db).await;
    let submitter = SubmitterKey::new(31337, DEV.parse().expect("address"));
    let request = LeaseRequest {
        submitter,
        owner: LeaseOwner::new("a", "i1"),
        duration: Duration::from_secs(2),
        clock_skew: Duration::from_millis(500),
    };
    let lease = store::acquire_or_renew(&db.pool, &request)
        .await
        .expect("lease");
    let lease = lease.lease().cloned().expect("a leads");
    let mut ftx = FencedTx::begin(&db.pool, &lease, "allocate")
        .await
        .expect("fenced");
    nonce_cursor::init(&mut ftx, 0).await.expect("cursor");
    let queued = pipeline::load_queued_within(&db.pool, submitter, 3, 1000, false)
        .await
        .expect("queued");
    let nonces = nonce_cursor::allocate(&mut ftx, queued.len())
        .await
        .expect("nonces");
    let assignments: Vec<(uuid::Uuid, u64)> = queued.iter().map(|q| q.tx_id).zip(nonces).collect();
    pipeline::assign_nonces(&mut ftx, &assignments, Duration::from_secs(60))
        .await
        .expect("assign");
    ftx.commit().await.expect("commit");
    assert_eq!(db.count("SELECT count(*) FROM tx_attempt").await, 0);

    // Node b finds the work by discovery once a's lease expires.
    let node_b = TestNode::start(&config_toml(&db.url, &anvil.rpc_url(), "b", "")).await;
    invariants::wait_mined(&db.pool, 3, Duration::from_secs(60)).await;
    invariants::check(&db.pool, &anvil, DEV, 0).await;
    let after: Vec<(uuid::Uuid, i64)> =
        sqlx::query_as("SELECT tx_id, nonce FROM managed_tx ORDER BY nonce")
            .fetch_all(&db.pool)
            .await
            .expect("after");
    let before: Vec<(uuid::Uuid, i64)> =
        assignments.iter().map(|(id, n)| (*id, *n as i64)).collect();
    assert_eq!(after, before, "each intent kept the nonce it was allocated");
    node_b.stop().await;
}

/// The leader draws nonces from its copy of the cursor and signs before its
/// one write (allocation and attempts together). A node that dies with that
/// write uncommitted has written and sent nothing: the intents are still
/// QUEUED, the cursor unmoved, and the next leader draws again — every
/// intent is mined once, with contiguous nonces.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crash_before_the_allocating_write_commits_sends_nothing_and_loses_nothing() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let faulty = std::sync::Mutex::new(None);
    let node_a = TestNode::start_with(&config_toml(&db.url, &anvil.rpc_url(), "a", ""), |chain| {
        let wrapped = FaultyChain::new(chain, SendFault::None);
        *faulty.lock().expect("lock") = Some(wrapped.clone());
        wrapped as Arc<dyn ChainClient>
    })
    .await;
    let faulty = faulty.lock().expect("lock").take().expect("wrapped");
    // A first intent: the cursor exists and the leader holds a copy of it.
    let (status, _) = node_a
        .request("POST", "/v1/transactions", Some(transfer("warm")))
        .await;
    assert_eq!(status, 202);
    invariants::wait_mined(&db.pool, 1, Duration::from_secs(30)).await;

    // The test holds the cursor row: a's next write waits on it with its
    // draw signed.
    let mut blocker = db.pool.begin().await.expect("begin");
    sqlx::query("SELECT 1 FROM submitter_nonce_cursor FOR UPDATE")
        .execute(&mut *blocker)
        .await
        .expect("lock the cursor");
    for id in ["c0", "c1", "c2"] {
        let (status, _) = node_a
            .request("POST", "/v1/transactions", Some(transfer(id)))
            .await;
        assert_eq!(status, 202);
    }
    let waiting = |db: &TestDb| {
        let pool = db.pool.clone();
        async move {
            sqlx::query_scalar::<_, i32>(
                "SELECT pid FROM pg_stat_activity
                  WHERE datname = current_database() AND wait_event_type = 'Lock'
                    AND query LIKE '%submitter_nonce_cursor%FOR UPDATE OF c%'",
            )
            .fetch_all(&pool)
            .await
            .expect("activity")
        }
    };
    wait_until(Duration::from_secs(30), || async {
        !waiting(&db).await.is_empty()
    })
    .await;
    // a dies: its process gone, its connections close and PostgreSQL rolls
    // back what it had not committed.
    node_a.kill();
    for pid in waiting(&db).await {
        sqlx::query("SELECT pg_terminate_backend($1)")
            .bind(pid)
            .execute(&db.pool)
            .await
            .expect("terminate");
    }
    blocker.rollback().await.expect("release");
    assert_eq!(
        faulty.sends.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "nothing of the uncommitted draw was sent"
    );
    assert_eq!(db.count("SELECT count(*) FROM tx_attempt").await, 1);
    assert_eq!(
        db.count("SELECT count(*) FROM managed_tx WHERE state = 'QUEUED'")
            .await,
        3
    );

    let node_b = TestNode::start(&config_toml(&db.url, &anvil.rpc_url(), "b", "")).await;
    invariants::wait_mined(&db.pool, 4, Duration::from_secs(60)).await;
    invariants::check(&db.pool, &anvil, DEV, 0).await;
    let nonces: Vec<i64> = sqlx::query_scalar("SELECT nonce FROM managed_tx ORDER BY nonce")
        .fetch_all(&db.pool)
        .await
        .expect("nonces");
    assert_eq!(nonces, vec![0, 1, 2, 3]);
    node_b.stop().await;
}
