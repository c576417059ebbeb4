//! Nonce cursor operations under the fence (README "How an intent is executed").

use std::time::Duration;

use crate::common::TestDb;
use alloy::primitives::Address;
use sqlx::PgPool;
use txmgr_actors::{
    store::{acquire_or_renew, nonce_cursor},
    FencedTx, LeaseGuard, LeaseOwner, LeaseRequest, StoreError, SubmitterKey,
};

fn submitter() -> SubmitterKey {
    SubmitterKey::new(31337, Address::repeat_byte(0x22))
}

async fn lead(pool: &PgPool) -> LeaseGuard {
    let request = LeaseRequest {
        submitter: submitter(),
        owner: LeaseOwner::new("node-a", "i1"),
        duration: Duration::from_secs(30),
        clock_skew: Duration::from_secs(1),
    };
    let outcome = acquire_or_renew(pool, &request).await.expect("lease");
    outcome.lease().cloned().expect("sole node leads")
}

/// A fenced transaction under `lease`, for a write named `operation`.
async fn fenced(pool: &PgPool, lease: &LeaseGuard, operation: &'static str) -> FencedTx {
    FencedTx::begin(pool, lease, operation)
        .await
        .expect("fence")
}

#[tokio::test]
async fn a_new_cursor_starts_at_the_given_nonce_and_init_never_resets_it() {
    let db = TestDb::migrated().await;
    let lease = lead(&db.pool).await;
    assert_eq!(
        nonce_cursor::load(&db.pool, submitter())
            .await
            .expect("load"),
        None
    );

    let mut ftx = fenced(&db.pool, &lease, "init").await;
    let cursor = nonce_cursor::init(&mut ftx, 5).await.expect("init");
    assert_eq!(cursor.next_nonce, 5);
    assert_eq!(
        nonce_cursor::allocate(&mut ftx, 3).await.expect("alloc"),
        vec![5, 6, 7]
    );
    ftx.commit().await.expect("commit");

    let mut ftx = fenced(&db.pool, &lease, "init").await;
    let again = nonce_cursor::init(&mut ftx, 0)
        .await
        .expect("init is idempotent");
    ftx.commit().await.expect("commit");
    assert_eq!(again.next_nonce, 8, "init never moves an existing cursor");
}

#[tokio::test]
async fn released_nonces_are_reused_lowest_first_before_fresh_ones() {
    let db = TestDb::migrated().await;
    let lease = lead(&db.pool).await;
    let mut ftx = fenced(&db.pool, &lease, "alloc").await;
    nonce_cursor::init(&mut ftx, 0).await.expect("init");
    assert_eq!(
        nonce_cursor::allocate(&mut ftx, 6).await.expect("alloc"),
        vec![0, 1, 2, 3, 4, 5]
    );
    ftx.commit().await.expect("commit");

    let mut ftx = fenced(&db.pool, &lease, "alloc").await;
    nonce_cursor::release(&mut ftx, &[4, 1])
        .await
        .expect("release");
    nonce_cursor::release(&mut ftx, &[4])
        .await
        .expect("releasing twice is harmless");
    let err = nonce_cursor::release(&mut ftx, &[9])
        .await
        .expect_err("never allocated");
    assert!(matches!(err, StoreError::Corrupt(_)));
    ftx.rollback().await.expect("rollback");

    let mut ftx = fenced(&db.pool, &lease, "alloc").await;
    nonce_cursor::release(&mut ftx, &[4, 1])
        .await
        .expect("release");
    assert_eq!(
        nonce_cursor::allocate(&mut ftx, 1).await.expect("alloc"),
        vec![1]
    );
    assert_eq!(
        nonce_cursor::allocate(&mut ftx, 3).await.expect("alloc"),
        vec![4, 6, 7]
    );
    ftx.commit().await.expect("commit");
    let cursor = nonce_cursor::load(&db.pool, submitter())
        .await
        .expect("load")
        .expect("row");
    assert_eq!((cursor.next_nonce, cursor.released), (8, vec![]));
}

#[tokio::test]
async fn adopting_the_chain_nonce_moves_up_only_and_drops_consumed_released_nonces() {
    let db = TestDb::migrated().await;
    let lease = lead(&db.pool).await;
    let mut ftx = fenced(&db.pool, &lease, "adopt").await;
    nonce_cursor::init(&mut ftx, 0).await.expect("init");
    nonce_cursor::allocate(&mut ftx, 10).await.expect("alloc");
    nonce_cursor::release(&mut ftx, &[2, 8])
        .await
        .expect("release");
    assert_eq!(
        nonce_cursor::adopt_chain_nonce(&mut ftx, 5)
            .await
            .expect("adopt"),
        None
    );
    assert_eq!(
        nonce_cursor::adopt_chain_nonce(&mut ftx, 12)
            .await
            .expect("adopt"),
        Some(10)
    );
    assert_eq!(
        nonce_cursor::adopt_chain_nonce(&mut ftx, 3)
            .await
            .expect("adopt"),
        None
    );
    ftx.commit().await.expect("commit");
    let cursor = nonce_cursor::load(&db.pool, submitter())
        .await
        .expect("load")
        .expect("row");
    assert_eq!(cursor.next_nonce, 12);
    assert!(
        cursor.released.is_empty(),
        "2 and 8 were consumed on chain: {cursor:?}"
    );
}

#[tokio::test]
async fn protect_is_set_with_a_reason_and_cleared() {
    let db = TestDb::migrated().await;
    let lease = lead(&db.pool).await;
    let mut ftx = fenced(&db.pool, &lease, "protect").await;
    nonce_cursor::init(&mut ftx, 0).await.expect("init");
    nonce_cursor::set_protect(&mut ftx, "chain pending nonce 3 > cursor 0")
        .await
        .expect("set");
    ftx.commit().await.expect("commit");
    let cursor = nonce_cursor::load(&db.pool, submitter())
        .await
        .expect("load")
        .expect("row");
    assert_eq!(
        cursor.protect_reason.as_deref(),
        Some("chain pending nonce 3 > cursor 0")
    );

    let mut ftx = fenced(&db.pool, &lease, "unprotect").await;
    nonce_cursor::clear_protect(&mut ftx, 0)
        .await
        .expect("clear");
    ftx.commit().await.expect("commit");
    let cursor = nonce_cursor::load(&db.pool, submitter())
        .await
        .expect("load")
        .expect("row");
    assert_eq!(cursor.protect_reason, None);
}

#[tokio::test]
async fn operations_on_a_missing_cursor_say_so() {
    let db = TestDb::migrated().await;
    let lease = lead(&db.pool).await;
    let mut ftx = fenced(&db.pool, &lease, "alloc").await;
    let err = nonce_cursor::allocate(&mut ftx, 1)
        .await
        .expect_err("no cursor");
    assert!(
        matches!(
            err,
            StoreError::Missing {
                what: "nonce cursor",
                ..
            }
        ),
        "{err:?}"
    );
}
