//! The group committer merges several leaders' fenced writes into one
//! transaction without weakening the fence: each part is checked against
//! its own lease, a stale part writes nothing while the others commit, and
//! a part that breaks the transaction fails only itself.

use std::time::Duration;

use crate::common::{txs::transfer_intent, TestDb};
use alloy::primitives::{Address, Bytes, B256};
use txmgr_actors::{
    domain::{AttemptKind, CreateOutcome, NewIntent},
    store::{
        self,
        group::{self, Answer, Write},
        intents, nonce_cursor,
        pipeline::NewAttempt,
        StoreError,
    },
    FencedTx, LeaseGuard, LeaseOwner, LeaseRequest, SubmitterKey,
};
use uuid::Uuid;

const RESUBMIT: Duration = Duration::from_secs(60);

fn submitter(i: u8) -> SubmitterKey {
    SubmitterKey::new(31337, Address::repeat_byte(0x10 + i))
}

fn request(key: SubmitterKey, node: &str, duration: Duration) -> LeaseRequest {
    LeaseRequest {
        submitter: key,
        owner: LeaseOwner::new(node, format!("{node}-instance")),
        duration,
        clock_skew: Duration::ZERO,
    }
}

/// A leader of `key` on node "a" with a nonce cursor at 0 and `n` QUEUED
/// intents (in acceptance order).
async fn leader_with_queue(
    db: &TestDb,
    key: SubmitterKey,
    n: usize,
    lease_for: Duration,
) -> (LeaseGuard, Vec<Uuid>) {
    let (lease, ids) = leader_without_cursor(db, key, n, lease_for).await;
    let mut ftx = FencedTx::begin(&db.pool, &lease, "init")
        .await
        .expect("fenced");
    nonce_cursor::init(&mut ftx, 0).await.expect("cursor");
    ftx.commit().await.expect("commit");
    (lease, ids)
}

/// A leader of `key` with `n` QUEUED intents and no nonce cursor yet.
async fn leader_without_cursor(
    db: &TestDb,
    key: SubmitterKey,
    n: usize,
    lease_for: Duration,
) -> (LeaseGuard, Vec<Uuid>) {
    let outcome = store::acquire_or_renew(&db.pool, &request(key, "a", lease_for))
        .await
        .expect("lease");
    let lease = outcome.lease().cloned().expect("a leads");
    let new: Vec<NewIntent> = (0..n)
        .map(|i| NewIntent::new(key, Some(format!("r{i}")), transfer_intent(1)))
        .collect();
    let ids = intents::insert_queued(&db.pool, &new)
        .await
        .expect("queued")
        .into_iter()
        .map(|outcome| match outcome {
            CreateOutcome::Created(created) => created.tx_id,
            other => panic!("not created: {other:?}"),
        })
        .collect();
    (lease, ids)
}

fn allocate(ids: &[Uuid]) -> Write {
    Write::Allocate {
        reject: Vec::new(),
        tx_ids: ids.to_vec(),
        resubmit_interval: RESUBMIT,
        spend: None,
        expire_only: Vec::new(),
        presigned: None,
    }
}

async fn states(db: &TestDb, key: SubmitterKey) -> Vec<(String, Option<i64>, Option<i64>)> {
    sqlx::query_as(
        "SELECT state, nonce, fencing_token FROM managed_tx
          WHERE submitter = $1 ORDER BY ingress_seq",
    )
    .bind(key.address_hex())
    .fetch_all(&db.pool)
    .await
    .expect("states")
}

/// The cursor's next nonce as the store derives it (the row's floor, or the
/// nonce after the highest on an intent).
async fn next_nonce(db: &TestDb, key: SubmitterKey) -> i64 {
    let cursor = txmgr_actors::store::nonce_cursor::load(&db.pool, key)
        .await
        .expect("cursor")
        .expect("a cursor row");
    i64::try_from(cursor.next_nonce).expect("nonce fits")
}

#[tokio::test]
async fn a_part_whose_lease_was_taken_over_is_refused_and_the_others_commit() {
    let db = TestDb::migrated().await;
    let short = Duration::from_millis(300);
    let (stale, stale_ids) = leader_with_queue(&db, submitter(0), 2, short).await;
    let (a1, ids1) = leader_with_queue(&db, submitter(1), 3, Duration::from_secs(30)).await;
    let (a2, ids2) = leader_with_queue(&db, submitter(2), 1, Duration::from_secs(30)).await;

    // Node b takes submitter 0 over once a's lease has expired (by the
    // database clock); a still holds its old guard and writes with it.
    crate::common::wait_until(Duration::from_secs(10), || async {
        store::acquire_or_renew(&db.pool, &request(submitter(0), "b", short))
            .await
            .expect("take over")
            .lease()
            .is_some()
    })
    .await;

    let answers = group::write_together(
        &db.pool,
        vec![
            (a1.clone(), allocate(&ids1)),
            (stale.clone(), allocate(&stale_ids)),
            (a2.clone(), allocate(&ids2)),
        ],
    )
    .await;
    assert_eq!(
        answers[0].as_ref().expect("first commits"),
        &Answer::Allocated(ids1.iter().copied().zip(0..3).collect())
    );
    assert!(
        matches!(&answers[1], Err(StoreError::Fenced { token, .. }) if *token == stale.token),
        "the stale part is fenced: {:?}",
        answers[1]
    );
    assert_eq!(
        answers[2].as_ref().expect("third commits"),
        &Answer::Allocated(vec![(ids2[0], 0)])
    );

    // The stale part wrote nothing: its intents are QUEUED, its cursor unmoved.
    assert!(states(&db, submitter(0))
        .await
        .iter()
        .all(|(state, nonce, _)| state == "QUEUED" && nonce.is_none()));
    assert_eq!(next_nonce(&db, submitter(0)).await, 0);
    // The others carry their own tokens.
    let first = states(&db, submitter(1)).await;
    assert_eq!(
        first,
        vec![
            ("ALLOCATED".to_owned(), Some(0), Some(a1.token)),
            ("ALLOCATED".to_owned(), Some(1), Some(a1.token)),
            ("ALLOCATED".to_owned(), Some(2), Some(a1.token)),
        ]
    );
    assert_eq!(next_nonce(&db, submitter(1)).await, 3);
    assert_eq!(next_nonce(&db, submitter(2)).await, 1);
}

#[tokio::test]
async fn a_cancelled_intent_gets_no_nonce_and_leaves_no_gap() {
    let db = TestDb::migrated().await;
    let key = submitter(3);
    let (lease, ids) = leader_with_queue(&db, key, 3, Duration::from_secs(30)).await;
    // An operator's cancel committed before the allocation.
    sqlx::query("UPDATE managed_tx SET state = 'CANCELLED' WHERE tx_id = $1")
        .bind(ids[1])
        .execute(&db.pool)
        .await
        .expect("cancel");
    let answers = group::write_together(&db.pool, vec![(lease, allocate(&ids))]).await;
    assert_eq!(
        answers[0].as_ref().expect("commits"),
        &Answer::Allocated(vec![(ids[0], 0), (ids[2], 1)])
    );
    let cursor = nonce_cursor::load(&db.pool, key)
        .await
        .expect("load")
        .expect("cursor");
    assert_eq!((cursor.next_nonce, cursor.released), (2, Vec::new()));
}

/// Persist `attempts`, nothing refused.
fn persist(attempts: Vec<NewAttempt>) -> Write {
    Write::PersistAttempts {
        attempts,
        refused: Vec::new(),
    }
}

fn attempt(tx_id: Uuid, nonce: u64, hash: B256) -> NewAttempt {
    NewAttempt {
        tx_id,
        nonce,
        tx_hash: hash,
        raw: Bytes::from(vec![0x02, nonce as u8]),
        max_fee_per_gas: Some(2_000_000_000),
        max_priority_fee_per_gas: Some(1_000_000_000),
        gas_price: None,
        gas_limit: 21_000,
        kind: AttemptKind::Original,
        private: false,
    }
}

#[tokio::test]
async fn a_part_that_breaks_the_shared_transaction_fails_alone() {
    let db = TestDb::migrated().await;
    let (good, good_ids) = leader_with_queue(&db, submitter(4), 1, Duration::from_secs(30)).await;
    let (bad, bad_ids) = leader_with_queue(&db, submitter(5), 1, Duration::from_secs(30)).await;
    for (lease, ids) in [(&good, &good_ids), (&bad, &bad_ids)] {
        let answer = group::write_together(&db.pool, vec![(lease.clone(), allocate(ids))]).await;
        assert!(answer[0].is_ok(), "{answer:?}");
    }
    // The bad part's attempt breaks a CHECK constraint (a gas limit of
    // zero): it fails the merged insert, so the batch is rolled back and
    // retried part by part.
    let mut broken = attempt(bad_ids[0], 0, B256::repeat_byte(0xcc));
    broken.gas_limit = 0;
    let answer = group::write_together(
        &db.pool,
        vec![(
            good.clone(),
            Write::PersistAttempts {
                attempts: vec![attempt(good_ids[0], 0, B256::repeat_byte(0xaa))],
                refused: Vec::new(),
            },
        )],
    )
    .await;
    assert!(answer[0].is_ok(), "{answer:?}");
    let answers = group::write_together(
        &db.pool,
        vec![
            (
                bad.clone(),
                Write::PersistAttempts {
                    attempts: vec![broken],
                    refused: Vec::new(),
                },
            ),
            (
                good.clone(),
                Write::PersistAttempts {
                    attempts: vec![attempt(good_ids[0], 0, B256::repeat_byte(0xbb))],
                    refused: Vec::new(),
                },
            ),
        ],
    )
    .await;
    assert!(
        matches!(&answers[0], Err(StoreError::Database(_))),
        "{:?}",
        answers[0]
    );
    assert!(answers[1].is_ok(), "{:?}", answers[1]);
    let attempts: i64 = sqlx::query_scalar("SELECT count(*) FROM tx_attempt WHERE tx_id = $1")
        .bind(good_ids[0])
        .fetch_one(&db.pool)
        .await
        .expect("count");
    assert_eq!(attempts, 2, "the good part's second attempt committed");
}

#[tokio::test]
async fn the_same_signed_bytes_persisted_again_add_no_attempt() {
    let db = TestDb::migrated().await;
    let (lease, ids) = leader_with_queue(&db, submitter(8), 1, Duration::from_secs(30)).await;
    let answer = group::write_together(&db.pool, vec![(lease.clone(), allocate(&ids))]).await;
    assert!(answer[0].is_ok(), "{answer:?}");
    // A group commit retried part by part after a commit whose outcome was
    // unknown writes its parts again; the attempt hash is not unique in the
    // database (migration 20261207000001), so the insert itself must skip
    // bytes already stored for the intent.
    let signed = attempt(ids[0], 0, B256::repeat_byte(0xdd));
    for _ in 0..2 {
        let answer = group::write_together(
            &db.pool,
            vec![(lease.clone(), persist(vec![signed.clone()]))],
        )
        .await;
        assert!(answer[0].is_ok(), "{answer:?}");
    }
    let attempts: i64 = sqlx::query_scalar("SELECT count(*) FROM tx_attempt WHERE tx_id = $1")
        .bind(ids[0])
        .fetch_one(&db.pool)
        .await
        .expect("count");
    assert_eq!(attempts, 1, "the same bytes were recorded twice");
}

#[tokio::test]
async fn a_part_that_cannot_be_written_fails_whole_and_alone() {
    let db = TestDb::migrated().await;
    let (good, good_ids) = leader_with_queue(&db, submitter(6), 1, Duration::from_secs(30)).await;
    let (bad, bad_ids) = leader_without_cursor(&db, submitter(7), 2, Duration::from_secs(30)).await;
    // The bad part rejects one intent and allocates the other, but has no
    // nonce cursor: nothing of it may be written, not even the rejection.
    let answers = group::write_together(
        &db.pool,
        vec![
            (
                bad.clone(),
                Write::Allocate {
                    reject: vec![(bad_ids[0], "gas estimation failed".into())],
                    tx_ids: vec![bad_ids[1]],
                    resubmit_interval: RESUBMIT,
                    spend: None,
                    expire_only: Vec::new(),
                    presigned: None,
                },
            ),
            (good.clone(), allocate(&good_ids)),
        ],
    )
    .await;
    assert!(
        matches!(&answers[0], Err(StoreError::Missing { .. })),
        "{:?}",
        answers[0]
    );
    assert_eq!(
        answers[1].as_ref().expect("the other part commits"),
        &Answer::Allocated(vec![(good_ids[0], 0)])
    );
    assert!(states(&db, submitter(7))
        .await
        .iter()
        .all(|(state, nonce, _)| state == "QUEUED" && nonce.is_none()));
}

mod cursor_floor;
mod lock_order;
mod presigned;
mod records;
