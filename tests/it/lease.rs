//! Lease and fencing against real PostgreSQL (README "Data model and leases").
//!
//! Expiry is driven by moving the *database* clock (see `crate::common::clock`):
//! the tests never wait for leases to run out and never touch node clocks.

use std::{sync::Arc, time::Duration};

use crate::common::{clock::ClockedDb, TestDb};
use alloy::primitives::Address;
use sqlx::PgPool;
use txmgr_actors::{
    store::{acquire_or_renew, current_lease, nonce_cursor, release},
    FencedTx, LeaseGuard, LeaseOutcome, LeaseOwner, LeaseRequest, SubmitterKey,
};

pub(crate) const LEASE: Duration = Duration::from_secs(10);
pub(crate) const SKEW: Duration = Duration::from_secs(1);

pub(crate) fn submitter() -> SubmitterKey {
    SubmitterKey::new(31337, Address::repeat_byte(0x11))
}

/// The process "`node`" (one instance per node name in these tests).
pub(crate) fn request(node: &str) -> LeaseRequest {
    request_from(LeaseOwner::new(node, "i1"))
}

pub(crate) fn request_from(owner: LeaseOwner) -> LeaseRequest {
    LeaseRequest {
        submitter: submitter(),
        owner,
        duration: LEASE,
        clock_skew: SKEW,
    }
}

pub(crate) async fn setup() -> (TestDb, ClockedDb) {
    let db = TestDb::migrated().await;
    let clock = ClockedDb::install(&db.url, &db.pool).await;
    (db, clock)
}

pub(crate) async fn lead(pool: &PgPool, node: &str) -> LeaseGuard {
    lead_as(pool, &request(node).owner).await
}

pub(crate) async fn lead_as(pool: &PgPool, owner: &LeaseOwner) -> LeaseGuard {
    let outcome = acquire_or_renew(pool, &request_from(owner.clone()))
        .await
        .expect("lease query");
    outcome
        .lease()
        .cloned()
        .unwrap_or_else(|| panic!("{owner} expected to lead, got {outcome:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_nodes_race_for_one_submitter_and_exactly_one_wins() {
    let (db, clock) = setup().await;
    let pool = clock.pool().await;
    let barrier = Arc::new(tokio::sync::Barrier::new(50));
    let racers: Vec<_> = (0..50)
        .map(|i| {
            let pool = pool.clone();
            let barrier = barrier.clone();
            tokio::spawn(async move {
                barrier.wait().await;
                acquire_or_renew(&pool, &request(&format!("node-{i}"))).await
            })
        })
        .collect();
    let mut winners = Vec::new();
    let mut losers = 0;
    for racer in racers {
        match racer.await.expect("racer task").expect("lease query") {
            LeaseOutcome::Acquired(lease) => winners.push(lease),
            LeaseOutcome::NotLeader(info) => {
                assert_eq!(info.fencing_token, 1);
                losers += 1;
            }
            other => panic!("unexpected outcome in a race on an empty table: {other:?}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one winner");
    assert_eq!(losers, 49);
    assert_eq!(winners[0].token, 1);
    let info = current_lease(&db.pool, submitter())
        .await
        .expect("read")
        .expect("row");
    assert!(info.is_owned_by(&winners[0].owner), "{info:?}");
}

#[tokio::test]
async fn renewal_keeps_the_token_and_take_over_after_expiry_plus_skew_increments_it() {
    let (_db, clock) = setup().await;
    let pool = clock.pool().await;
    let first = lead(&pool, "a").await;
    assert_eq!(first.token, 1);

    let renewed = acquire_or_renew(&pool, &request("a")).await.expect("renew");
    assert!(
        matches!(&renewed, LeaseOutcome::Renewed(l) if l.token == 1),
        "{renewed:?}"
    );

    // Live lease: b is refused.
    let refused = acquire_or_renew(&pool, &request("b")).await.expect("try");
    assert!(
        matches!(&refused, LeaseOutcome::NotLeader(i) if i.owner_node == "a"),
        "{refused:?}"
    );

    // Expired, but within the skew allowance: still refused.
    clock.advance(LEASE + Duration::from_millis(200)).await;
    let within_skew = acquire_or_renew(&pool, &request("b")).await.expect("try");
    assert!(
        matches!(within_skew, LeaseOutcome::NotLeader(_)),
        "{within_skew:?}"
    );

    // Past expiry + skew: taken over with token + 1.
    clock.advance(SKEW).await;
    let taken = acquire_or_renew(&pool, &request("b"))
        .await
        .expect("take over");
    match taken {
        LeaseOutcome::TakenOver {
            lease,
            previous_owner,
        } => {
            assert_eq!(lease.token, 2);
            assert_eq!(previous_owner, "a");
        }
        other => panic!("expected take-over, got {other:?}"),
    }
    // The old holder is now refused.
    let old = acquire_or_renew(&pool, &request("a")).await.expect("try");
    assert!(
        matches!(old, LeaseOutcome::NotLeader(i) if i.owner_node == "b" && i.fencing_token == 2)
    );
}

#[tokio::test]
async fn reacquiring_an_own_expired_lease_draws_a_new_token() {
    let (_db, clock) = setup().await;
    let pool = clock.pool().await;
    assert_eq!(lead(&pool, "a").await.token, 1);
    // Our own lease needs no skew allowance: expired is expired.
    clock.advance(LEASE).await;
    let again = acquire_or_renew(&pool, &request("a"))
        .await
        .expect("re-acquire");
    assert!(
        matches!(&again, LeaseOutcome::TakenOver { lease, previous_owner } if lease.token == 2 && previous_owner == "a"),
        "{again:?}"
    );
}

#[tokio::test]
async fn tokens_never_decrease_across_take_overs_and_releases() {
    let (_db, clock) = setup().await;
    let pool = clock.pool().await;
    let mut last = 0;
    for round in 0..6 {
        let node = ["a", "b", "c"][round % 3];
        let lease = lead(&pool, node).await;
        assert!(
            lease.token > last,
            "token went from {last} to {}",
            lease.token
        );
        last = lease.token;
        // Renewal never changes it.
        assert_eq!(lead(&pool, node).await.token, last);
        if round % 2 == 0 {
            assert!(release(&pool, &lease).await.expect("release"));
        } else {
            clock.advance(LEASE + SKEW).await;
        }
    }
    assert_eq!(last, 6);
}

/// Two processes with one `node_id` are two owners (issue 12 item 8): the
/// second neither renews nor uses the first's live lease; it takes over only
/// after expiry + skew, with a new token, and the first — same node id, old
/// token — is fenced, can neither renew nor release.
#[tokio::test]
async fn a_second_process_with_the_same_node_id_is_another_owner() {
    let (db, clock) = setup().await;
    let pool = clock.pool().await;
    let first = LeaseOwner::new("n1", "first");
    let second = LeaseOwner::new("n1", "second");
    let old = lead_as(&pool, &first).await;
    assert_eq!(old.token, 1);
    let mut ftx = FencedTx::begin(&pool, &old, "init").await.expect("fenced");
    nonce_cursor::init(&mut ftx, 3).await.expect("init");
    ftx.commit().await.expect("commit");

    let refused = acquire_or_renew(&pool, &request_from(second.clone()))
        .await
        .expect("try");
    assert!(
        matches!(&refused, LeaseOutcome::NotLeader(i) if i.is_owned_by(&first) && i.fencing_token == 1),
        "the same node id does not renew another process's lease: {refused:?}"
    );
    clock.advance(LEASE + Duration::from_millis(200)).await;
    let within_skew = acquire_or_renew(&pool, &request_from(second.clone()))
        .await
        .expect("try");
    assert!(
        matches!(within_skew, LeaseOutcome::NotLeader(_)),
        "{within_skew:?}"
    );

    clock.advance(SKEW).await;
    let taken = acquire_or_renew(&pool, &request_from(second.clone()))
        .await
        .expect("take over");
    let new = match taken {
        LeaseOutcome::TakenOver {
            lease,
            previous_owner,
        } => {
            assert_eq!(previous_owner, "n1");
            lease
        }
        other => panic!("expected take-over, got {other:?}"),
    };
    assert_eq!(new.token, 2);

    let err = FencedTx::begin(&pool, &old, "allocate")
        .await
        .err()
        .expect("the old instance is fenced");
    assert!(err.is_fenced(), "{err:?}");
    // Even with the new token, the old instance's identity is not the owner.
    let forged = LeaseGuard {
        token: new.token,
        ..old.clone()
    };
    let err = FencedTx::begin(&pool, &forged, "allocate")
        .await
        .err()
        .expect("owner identity includes the instance");
    assert!(err.is_fenced(), "{err:?}");
    let again = acquire_or_renew(&pool, &request_from(first.clone()))
        .await
        .expect("try");
    assert!(matches!(again, LeaseOutcome::NotLeader(_)), "{again:?}");
    assert!(!release(&pool, &old).await.expect("stale release"));

    let info = current_lease(&db.pool, submitter())
        .await
        .expect("read")
        .expect("row");
    assert!(info.is_owned_by(&second), "{info:?}");
    assert_eq!(info.fencing_token, 2);
    let mut ftx = FencedTx::begin(&pool, &new, "allocate")
        .await
        .expect("the new instance is fenced in");
    assert_eq!(
        nonce_cursor::allocate(&mut ftx, 1).await.expect("allocate"),
        vec![3]
    );
    ftx.commit().await.expect("commit");
}

#[tokio::test]
async fn a_released_lease_is_taken_at_once_and_a_stale_release_changes_nothing() {
    let (_db, clock) = setup().await;
    let pool = clock.pool().await;
    let a = lead(&pool, "a").await;
    assert!(release(&pool, &a).await.expect("release"));
    // No waiting for expiry or skew after a graceful release.
    let b = lead(&pool, "b").await;
    assert_eq!(b.token, 2);
    // a releasing again (stale) must not free b's lease.
    assert!(!release(&pool, &a).await.expect("stale release"));
    let info = current_lease(&pool, submitter())
        .await
        .expect("read")
        .expect("row");
    assert_eq!((info.owner_node.as_str(), info.fencing_token), ("b", 2));
    assert!(info.expires_in > Duration::ZERO);
}

#[tokio::test]
async fn expiry_follows_the_database_clock_not_the_node_clock() {
    let (_db, clock) = setup().await;
    let pool = clock.pool().await;
    lead(&pool, "a").await;
    // Not a millisecond passes on this machine, yet the database says an
    // hour did: the lease is over and b takes it.
    clock.advance(Duration::from_secs(3600)).await;
    let taken = acquire_or_renew(&pool, &request("b"))
        .await
        .expect("take over");
    assert!(matches!(taken, LeaseOutcome::TakenOver { .. }), "{taken:?}");
    // And the other way: b's lease holds however long the node believes
    // time has passed, as long as the database clock has not moved.
    let lease_b = taken.lease().cloned().expect("b leads");
    let refused = acquire_or_renew(&pool, &request("c")).await.expect("try");
    assert!(matches!(refused, LeaseOutcome::NotLeader(_)));
    let mut ftx = FencedTx::begin(&pool, &lease_b, "test")
        .await
        .expect("b still fenced in");
    nonce_cursor::init(&mut ftx, 0).await.expect("init");
    ftx.commit().await.expect("commit");
}
