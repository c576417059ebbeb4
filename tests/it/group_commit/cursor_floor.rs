//! The next nonce is derived from the intents' nonces: allocations leave
//! the cursor row alone, and a nonce that leaves its intent's row raises
//! the row's floor, so the derived next nonce never goes back below a
//! nonce that was handed out (README "Data model and leases").

use super::*;
use crate::common::wait_until;

/// The cursor row as stored: its floor, its `released` list and its row
/// version (`xmin`, `ctid`: unchanged when nothing wrote the row).
async fn cursor_row(db: &TestDb, key: SubmitterKey) -> (i64, Vec<i64>, String) {
    sqlx::query_as(
        "SELECT next_nonce, released, xmin::text || '/' || ctid::text
           FROM submitter_nonce_cursor WHERE submitter = $1",
    )
    .bind(key.address_hex())
    .fetch_one(&db.pool)
    .await
    .expect("cursor row")
}

async fn allocated(db: &TestDb, lease: &LeaseGuard, ids: &[Uuid]) -> Vec<(Uuid, u64)> {
    let answers = group::write_together(&db.pool, vec![(lease.clone(), allocate(ids))]).await;
    match answers.into_iter().next().expect("an answer") {
        Ok(Answer::Allocated(assigned)) => assigned,
        other => panic!("not allocated: {other:?}"),
    }
}

#[tokio::test]
async fn allocations_leave_the_cursor_row_alone_and_the_next_nonce_follows_the_intents() {
    let db = TestDb::migrated().await;
    let key = submitter(40);
    let (lease, ids) = leader_with_queue(&db, key, 4, Duration::from_secs(30)).await;
    let before = cursor_row(&db, key).await;

    let first = allocated(&db, &lease, &ids[..3]).await;
    assert_eq!(first, vec![(ids[0], 0), (ids[1], 1), (ids[2], 2)]);
    assert_eq!(
        cursor_row(&db, key).await,
        before,
        "the allocation wrote no version of the cursor row"
    );
    assert_eq!(next_nonce(&db, key).await, 3, "derived from the intents");
    // The next allocation draws after the highest nonce on an intent.
    assert_eq!(allocated(&db, &lease, &ids[3..]).await, vec![(ids[3], 3)]);
    assert_eq!(cursor_row(&db, key).await, before);
}

#[tokio::test]
async fn a_nonce_leaving_its_intent_raises_the_floor_so_the_next_nonce_never_goes_back() {
    let db = TestDb::migrated().await;
    let key = submitter(41);
    let (lease, ids) = leader_with_queue(&db, key, 7, Duration::from_secs(30)).await;
    allocated(&db, &lease, &ids[..3]).await;
    assert_eq!(cursor_row(&db, key).await.0, 0, "the floor as created");

    // The top nonce leaves its intent without being given back (an outsider
    // consumed it: the intent goes back to QUEUED): it must not be drawn again.
    sqlx::query("UPDATE managed_tx SET state = 'QUEUED', nonce = NULL WHERE tx_id = $1")
        .bind(ids[2])
        .execute(&db.pool)
        .await
        .expect("requeue");
    assert_eq!(
        cursor_row(&db, key).await.0,
        3,
        "the trigger raised the floor"
    );
    assert_eq!(next_nonce(&db, key).await, 3);
    assert_eq!(
        allocated(&db, &lease, &ids[2..3]).await,
        vec![(ids[2], 3)],
        "a fresh nonce, not the consumed one"
    );

    // A rejected intent's nonce is given back: listed in `released`, drawn
    // first; the next never-used nonce stays where it was.
    let reject = Write::Allocate {
        reject: vec![(ids[2], "test: refused".to_owned())],
        tx_ids: Vec::new(),
        resubmit_interval: RESUBMIT,
        spend: None,
        expire_only: Vec::new(),
        presigned: None,
    };
    let answers = group::write_together(&db.pool, vec![(lease.clone(), reject)]).await;
    answers[0].as_ref().expect("rejected");
    let (floor, released, _) = cursor_row(&db, key).await;
    assert_eq!((floor, released), (4, vec![3]));
    assert_eq!(next_nonce(&db, key).await, 4);
    assert_eq!(
        allocated(&db, &lease, &ids[3..5]).await,
        vec![(ids[3], 3), (ids[4], 4)],
        "the released nonce first, then the next never used"
    );
    assert_eq!(cursor_row(&db, key).await.1, Vec::<i64>::new());

    // A deleted intent row (an operator's hand) raises the floor too.
    assert_eq!(allocated(&db, &lease, &ids[5..6]).await, vec![(ids[5], 5)]);
    assert_eq!(
        cursor_row(&db, key).await.0,
        5,
        "not written by the allocation"
    );
    sqlx::query("DELETE FROM managed_tx WHERE tx_id = $1")
        .bind(ids[5])
        .execute(&db.pool)
        .await
        .expect("delete");
    assert_eq!(cursor_row(&db, key).await.0, 6);
    assert_eq!(allocated(&db, &lease, &ids[6..]).await, vec![(ids[6], 6)]);
}

/// An allocation that waited for the cursor lock sees the nonces the lock's
/// previous holder wrote on intents, though that holder did not write the
/// cursor row: the highest nonce is read in a statement that starts after
/// the lock is taken.
#[tokio::test]
async fn an_allocation_that_waited_for_the_cursor_lock_draws_after_the_holders_nonces() {
    let db = TestDb::migrated().await;
    let key = submitter(42);
    let (lease, ids) = leader_with_queue(&db, key, 2, Duration::from_secs(30)).await;
    // Another allocation holds the cursor lock and gives nonce 0 to the
    // first intent, without writing the cursor row.
    let mut holder = db.pool.begin().await.expect("begin");
    sqlx::query("SELECT 1 FROM submitter_nonce_cursor WHERE submitter = $1 FOR UPDATE")
        .bind(key.address_hex())
        .execute(&mut *holder)
        .await
        .expect("lock the cursor");
    sqlx::query(
        "UPDATE managed_tx SET state = 'ALLOCATED', nonce = 0, fencing_token = $2
          WHERE tx_id = $1",
    )
    .bind(ids[0])
    .bind(lease.token)
    .execute(&mut *holder)
    .await
    .expect("assign");

    let pool = db.pool.clone();
    let waiting_lease = lease.clone();
    let second = ids[1];
    let allocation = tokio::spawn(async move {
        group::write_together(&pool, vec![(waiting_lease, allocate(&[second]))]).await
    });
    wait_until(Duration::from_secs(30), || async {
        let waiting: Vec<i32> = sqlx::query_scalar(
            "SELECT pid FROM pg_stat_activity
              WHERE datname = current_database() AND wait_event_type = 'Lock'
                AND query LIKE '%submitter_nonce_cursor%FOR UPDATE OF c%'",
        )
        .fetch_all(&db.pool)
        .await
        .expect("activity");
        !waiting.is_empty()
    })
    .await;
    holder.commit().await.expect("commit");

    let answers = allocation.await.expect("allocation task");
    assert_eq!(
        answers[0].as_ref().expect("allocated"),
        &Answer::Allocated(vec![(ids[1], 1)])
    );
}
