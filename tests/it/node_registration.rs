//! One live process per node id (issue 12 item 8), against real
//! PostgreSQL: registration is atomic, refuses a live holder, replaces a
//! stale one; the start-up claim refuses a holder whose heartbeat moves and
//! takes over from one whose heartbeat stopped; a superseded process learns
//! it from its heartbeat and cannot remove its successor's row.

use std::{sync::Arc, time::Duration};

use crate::common::{clock::ClockedDb, TestDb};
use sqlx::PgPool;
use txmgr_actors::{
    cluster::{claim_node_id, ClaimError},
    store::node::{self, Heartbeat, Registration},
    LeaseOwner,
};

const LIVENESS: Duration = Duration::from_secs(6);
const BUILD: node::NodeBuild = node::NodeBuild {
    version: "test",
    commit: "test",
    schema_version: 0,
};

async fn register(pool: &PgPool, owner: &LeaseOwner) -> Registration {
    node::register(pool, owner, "127.0.0.1:1", &BUILD, LIVENESS)
        .await
        .expect("register")
}

async fn instance_of(pool: &PgPool, node_id: &str) -> Option<String> {
    node::holder(pool, node_id)
        .await
        .expect("holder")
        .map(|h| h.instance)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_processes_registering_one_node_id_at_once_exactly_one_wins() {
    let db = TestDb::migrated().await;
    let barrier = Arc::new(tokio::sync::Barrier::new(50));
    let racers: Vec<_> = (0..50)
        .map(|i| {
            let pool = db.pool.clone();
            let barrier = barrier.clone();
            let owner = LeaseOwner::new("n1", format!("i{i}"));
            tokio::spawn(async move {
                barrier.wait().await;
                (owner.clone(), register(&pool, &owner).await)
            })
        })
        .collect();
    let mut winners = Vec::new();
    let mut refused = Vec::new();
    for racer in racers {
        match racer.await.expect("racer task") {
            (owner, Registration::Registered) => winners.push(owner),
            (_, Registration::Held(holder)) => refused.push(holder.instance),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one process gets the node id");
    let winner = &*winners[0].instance;
    assert_eq!(refused.len(), 49);
    assert!(refused.iter().all(|i| i == winner), "{refused:?}");
    assert_eq!(instance_of(&db.pool, "n1").await.as_deref(), Some(winner));
}

#[tokio::test]
async fn a_live_holder_is_kept_and_a_stale_one_replaced_and_told_so() {
    let db = TestDb::migrated().await;
    let clock = ClockedDb::install(&db.url, &db.pool).await;
    let pool = clock.pool().await;
    let first = LeaseOwner::new("n1", "first");
    let second = LeaseOwner::new("n1", "second");
    assert_eq!(register(&pool, &first).await, Registration::Registered);
    assert!(matches!(
        register(&pool, &second).await,
        Registration::Held(h) if h.instance == "first"
    ));
    // Re-registering itself is always allowed (an operator removed the row).
    assert_eq!(register(&pool, &first).await, Registration::Registered);

    // The first stops heartbeating (crash, freeze): once its heartbeat is
    // older than the liveness window, the node id is free.
    clock.advance(LIVENESS).await;
    assert_eq!(register(&pool, &second).await, Registration::Registered);
    assert!(matches!(
        node::heartbeat(&pool, &first).await.expect("heartbeat"),
        Heartbeat::Superseded(h) if h.instance == "second"
    ));
    assert_eq!(
        node::heartbeat(&pool, &second).await.expect("heartbeat"),
        Heartbeat::Beat
    );
    // The superseded process leaving does not remove its successor.
    node::deregister(&pool, &first).await.expect("deregister");
    assert_eq!(instance_of(&pool, "n1").await.as_deref(), Some("second"));
    node::deregister(&pool, &second).await.expect("deregister");
    assert_eq!(instance_of(&pool, "n1").await, None);
    assert_eq!(
        node::heartbeat(&pool, &second).await.expect("heartbeat"),
        Heartbeat::Missing
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_start_up_claim_refuses_a_heartbeating_holder_and_waits_out_a_dead_one() {
    let db = TestDb::migrated().await;
    // Far longer than the heartbeat period below, so a loaded machine that
    // delays a heartbeat does not make the live holder look dead.
    let liveness = Duration::from_secs(3);
    let poll = Duration::from_millis(20);
    let live = LeaseOwner::new("n1", "live");
    node::register(&db.pool, &live, "127.0.0.1:1", &BUILD, liveness)
        .await
        .expect("register");
    let beating = tokio::spawn({
        let pool = db.pool.clone();
        let live = live.clone();
        async move {
            loop {
                node::heartbeat(&pool, &live).await.expect("heartbeat");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    });
    let twin = LeaseOwner::new("n1", "twin");
    let refused = claim_node_id(&db.pool, &twin, "127.0.0.1:2", &BUILD, liveness, poll).await;
    match refused {
        Err(ClaimError::InUse {
            node_id, instance, ..
        }) => assert_eq!((node_id.as_str(), instance.as_str()), ("n1", "live")),
        other => panic!("a live holder must be refused: {other:?}"),
    }
    assert_eq!(instance_of(&db.pool, "n1").await.as_deref(), Some("live"));

    // The holder dies (no graceful exit): a restart waits for its heartbeat
    // to go stale, then gets the node id.
    beating.abort();
    let _ = beating.await;
    let restarted = LeaseOwner::new("n1", "restarted");
    let started = std::time::Instant::now();
    // The timeout only guards against a hang; a slow machine is not a failure.
    tokio::time::timeout(
        liveness * 20,
        claim_node_id(&db.pool, &restarted, "127.0.0.1:3", &BUILD, liveness, poll),
    )
    .await
    .expect("a dead holder does not block the restart for good")
    .expect("the restart gets the node id");
    // It waited for the dead holder's heartbeat to go stale (the last one was
    // at most one heartbeat period before the abort): never a take-over of a
    // holder that might still be alive. A lower bound cannot fail by load.
    assert!(
        started.elapsed() >= liveness / 2,
        "took the node id after {:?}, before the heartbeat went stale",
        started.elapsed()
    );
    assert_eq!(
        instance_of(&db.pool, "n1").await.as_deref(),
        Some("restarted")
    );
}
