//! Fenced writes against real PostgreSQL (README "Data model and leases"):
//! a stale holder writes nothing and is told so, and a take-over waits for
//! the commit in flight under the old token and then sees it.

use std::time::Duration;

use sqlx::PgPool;

use txmgr_actors::{
    store::{self, acquire_or_renew, nonce_cursor},
    FencedTx, LeaseGuard, StoreError,
};

use crate::{
    common::wait_until,
    lease::{lead, request, setup, submitter, LEASE, SKEW},
};

/// A write under `stale` is refused as fenced before it touches anything.
async fn assert_fenced(pool: &PgPool, stale: &LeaseGuard) {
    let err = FencedTx::begin(pool, stale, "allocate")
        .await
        .err()
        .expect("fenced");
    assert!(err.is_fenced());
}

/// The submitter's nonce cursor as stored.
async fn cursor_row(pool: &PgPool) -> nonce_cursor::NonceCursor {
    nonce_cursor::load(pool, submitter())
        .await
        .expect("load")
        .expect("row")
}

#[tokio::test]
async fn a_stale_holder_writes_nothing_and_gets_fenced() {
    let (db, clock) = setup().await;
    let node_a = clock.pool().await;
    let node_b = clock.pool().await;
    let a = lead(&node_a, "a").await;
    let mut ftx = FencedTx::begin(&node_a, &a, "init").await.expect("fenced");
    nonce_cursor::init(&mut ftx, 7).await.expect("init");
    ftx.commit().await.expect("commit");

    // Past expiry but before anyone takes over: a is already fenced out.
    clock.advance(LEASE).await;
    let err = FencedTx::begin(&node_a, &a, "allocate")
        .await
        .err()
        .expect("fenced");
    assert!(
        matches!(err, StoreError::Fenced { token: 1, .. }),
        "{err:?}"
    );

    clock.advance(SKEW).await;
    let b = lead(&node_b, "b").await;
    assert_eq!(b.token, 2);
    assert_fenced(&node_a, &a).await;

    let cursor = cursor_row(&db.pool).await;
    assert_eq!(cursor.next_nonce, 7, "the stale holder allocated nothing");
    assert_eq!(cursor.fencing_token, 1);
}

/// The take-over happens while the stale holder's fenced transaction is in
/// flight: the row lock makes the take-over wait for that commit, so the new
/// holder sees it, and everything the old holder tries afterwards is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_take_over_waits_for_the_in_flight_fenced_commit_and_sees_it() {
    let (db, clock) = setup().await;
    let node_a = clock.pool().await;
    let node_b = clock.pool().await;
    let a = lead(&node_a, "a").await;
    let mut init = FencedTx::begin(&node_a, &a, "init").await.expect("fenced");
    nonce_cursor::init(&mut init, 0).await.expect("init");
    init.commit().await.expect("commit");

    // a's transaction passes the fence, then its lease runs out mid-flight.
    let mut in_flight = FencedTx::begin(&node_a, &a, "allocate")
        .await
        .expect("fenced");
    let nonces = nonce_cursor::allocate(&mut in_flight, 3)
        .await
        .expect("allocate");
    assert_eq!(nonces, vec![0, 1, 2]);
    clock.advance(LEASE + SKEW).await;

    let take_over = tokio::spawn({
        let node_b = node_b.clone();
        async move { acquire_or_renew(&node_b, &request("b")).await }
    });
    // Barrier: b's statement is parked on a's row lock.
    wait_until(Duration::from_secs(10), || {
        let pool = db.pool.clone();
        async move {
            let waiting: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity
                  WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE submitter_lease%'",
            )
            .fetch_one(&pool)
            .await
            .expect("pg_stat_activity");
            waiting == 1
        }
    })
    .await;
    assert!(!take_over.is_finished());
    in_flight
        .commit()
        .await
        .expect("the in-flight fenced commit lands");

    let outcome = take_over.await.expect("task").expect("take over");
    let b = outcome.lease().cloned().expect("b took over");
    assert_eq!(b.token, 2);

    // b sees a's committed allocation and continues after it.
    let mut next = FencedTx::begin(&node_b, &b, "allocate")
        .await
        .expect("b fenced in");
    assert_eq!(
        nonce_cursor::allocate(&mut next, 2)
            .await
            .expect("allocate"),
        vec![3, 4]
    );
    next.commit().await.expect("commit");

    // a's next write is refused and leaves no trace.
    assert_fenced(&node_a, &a).await;
    let cursor = cursor_row(&db.pool).await;
    assert_eq!(cursor.next_nonce, 5);
    assert_eq!(cursor.fencing_token, 2);
    let _ = store::current_lease(&db.pool, submitter())
        .await
        .expect("read");
}

/// The same key on two chains holds two leases with their own tokens: when
/// chain A's lease is taken over, the old holder's writes on A are fenced
/// while its lease on chain B still writes.
#[tokio::test]
async fn a_take_over_on_one_chain_fences_only_that_chains_writes() {
    use txmgr_actors::{domain::SubmitterKey, store::LeaseRequest};
    let (_db, clock) = setup().await;
    let node_a = clock.pool().await;
    let node_b = clock.pool().await;
    let on_chain = |chain_id: u64, node: &str| LeaseRequest {
        submitter: SubmitterKey::new(chain_id, submitter().address),
        ..request(node)
    };
    let lead_on = |pool: PgPool, req: LeaseRequest| async move {
        acquire_or_renew(&pool, &req)
            .await
            .expect("lease query")
            .lease()
            .cloned()
            .expect("leads")
    };
    let a_on_1 = lead_on(node_a.clone(), on_chain(1, "a")).await;
    let a_on_8453 = lead_on(node_a.clone(), on_chain(8453, "a")).await;
    assert_eq!(
        (a_on_1.token, a_on_8453.token),
        (1, 1),
        "one token sequence per pair"
    );

    // Chain 1's lease lapses and node b takes it over; a renews 8453's.
    clock.advance(LEASE + SKEW).await;
    let a_on_8453 = lead_on(node_a.clone(), on_chain(8453, "a")).await;
    let b_on_1 = lead_on(node_b.clone(), on_chain(1, "b")).await;
    assert_eq!(b_on_1.token, 2);
    assert_fenced(&node_a, &a_on_1).await;
    let mut ftx = FencedTx::begin(&node_a, &a_on_8453, "init")
        .await
        .expect("chain 8453 is still a's");
    nonce_cursor::init(&mut ftx, 3).await.expect("init");
    ftx.commit().await.expect("commit");
    let cursor = nonce_cursor::load(&node_a, a_on_8453.submitter)
        .await
        .expect("load")
        .expect("row");
    assert_eq!(cursor.next_nonce, 3);
    assert!(
        nonce_cursor::load(&node_a, a_on_1.submitter)
            .await
            .expect("load")
            .is_none(),
        "nothing written on chain 1"
    );
}
