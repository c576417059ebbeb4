//! Lock order: a transaction that may change a nonce takes its submitters'
//! cursor rows first, in key order, and only then intent rows. A refusal
//! gives its nonce back (the cursor's lock) after its intent's row lock, so
//! without that order two group transactions — each allocating for one
//! submitter while recording the other's refusal, as the overlapped cycle
//! does — wait on each other.
//!
//! PostgreSQL's deadlock detector would abort one of them after
//! `deadlock_timeout` (and the committer would write its parts again one by
//! one); these tests raise the timeout for their database so that a cycle
//! stays visible and is reported as a failure, deterministically.

use super::*;

/// Sessions of this database that wait on each other: a lock cycle.
async fn lock_cycles(db: &TestDb) -> i64 {
    db.count(
        "SELECT count(*) FROM pg_stat_activity a
          WHERE a.datname = current_database()
            AND EXISTS (SELECT 1 FROM unnest(pg_blocking_pids(a.pid)) AS b(pid)
                         WHERE a.pid = ANY (pg_blocking_pids(b.pid)))",
    )
    .await
}

/// Sessions of this database waiting for a lock.
async fn lock_waiters(db: &TestDb) -> i64 {
    db.count(
        "SELECT count(*) FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock'",
    )
    .await
}

/// A pool whose sessions never run the deadlock detector within a test.
async fn pool_without_deadlock_detection(db: &TestDb) -> sqlx::PgPool {
    sqlx::query(&format!(
        r#"ALTER DATABASE "{}" SET deadlock_timeout = '1h'"#,
        db.name
    ))
    .execute(&db.pool)
    .await
    .expect("deadlock_timeout");
    db.connect_new_pool().await
}

/// Waits until every task has finished; fails as soon as two sessions wait
/// on each other.
async fn finish_without_a_cycle<T: Send + 'static>(
    db: &TestDb,
    tasks: Vec<tokio::task::JoinHandle<T>>,
) -> Vec<T> {
    crate::common::wait_until(Duration::from_secs(30), || async {
        let cycles = lock_cycles(db).await;
        assert_eq!(cycles, 0, "two transactions wait on each other: a deadlock");
        tasks.iter().all(|task| task.is_finished())
    })
    .await;
    let mut done = Vec::new();
    for task in tasks {
        done.push(task.await.expect("task"));
    }
    done
}

/// A leader of `key` with one intent ALLOCATED at nonce 0 (its attempt
/// persisted, no answer recorded) and one QUEUED.
async fn allocated_and_queued(
    db: &TestDb,
    key: SubmitterKey,
    byte: u8,
) -> (LeaseGuard, Uuid, Uuid) {
    let (lease, ids) = leader_with_queue(db, key, 2, Duration::from_secs(60)).await;
    let write = |w: Write| group::write_together(&db.pool, vec![(lease.clone(), w)]);
    assert!(write(allocate(&ids[..1])).await[0].is_ok());
    let persisted = write(persist(vec![attempt(ids[0], 0, B256::repeat_byte(byte))])).await;
    assert!(persisted[0].is_ok(), "{persisted:?}");
    (lease, ids[0], ids[1])
}

fn refusal(tx_id: Uuid) -> Write {
    Write::RecordBroadcast(group::BroadcastRecord {
        accepted: Vec::new(),
        retries: Vec::new(),
        rejects: vec![(tx_id, "insufficient funds for gas * price + value".into())],
        resubmit_interval: RESUBMIT,
        retry_after: Duration::from_secs(1),
    })
}

#[tokio::test]
async fn two_group_transactions_allocating_and_recording_refusals_crosswise_never_deadlock() {
    let db = TestDb::migrated().await;
    let (a, b) = (submitter(20), submitter(21));
    let (lease_a, refused_a, queued_a) = allocated_and_queued(&db, a, 0xa0).await;
    let (lease_b, refused_b, queued_b) = allocated_and_queued(&db, b, 0xb0).await;
    let pool = pool_without_deadlock_detection(&db).await;

    // Hold both cursors, so each group transaction waits for its first
    // cursor lock and both go on together.
    let mut blocker = db.pool.begin().await.expect("begin");
    sqlx::query("SELECT FROM submitter_nonce_cursor WHERE submitter = ANY($1) FOR UPDATE")
        .bind(vec![a.address_hex(), b.address_hex()])
        .execute(&mut *blocker)
        .await
        .expect("hold cursors");

    // Each allocates for one submitter and records the other's refusal.
    let crosswise = [
        vec![
            (lease_a.clone(), allocate(&[queued_a])),
            (lease_b.clone(), refusal(refused_b)),
        ],
        vec![
            (lease_b.clone(), allocate(&[queued_b])),
            (lease_a.clone(), refusal(refused_a)),
        ],
    ];
    let tasks: Vec<_> = crosswise
        .into_iter()
        .map(|parts| {
            let pool = pool.clone();
            tokio::spawn(async move { group::write_together(&pool, parts).await })
        })
        .collect();
    crate::common::wait_until(Duration::from_secs(30), || async {
        lock_waiters(&db).await >= 2
    })
    .await;
    blocker.commit().await.expect("release cursors");

    for answers in finish_without_a_cycle(&db, tasks).await {
        assert!(answers.iter().all(Result::is_ok), "{answers:?}");
    }
    // Either transaction may have gone first (the other then reused the
    // refused nonce or drew the next): each submitter's refused intent
    // holds no nonce, its other intent holds one, and no nonce is lost.
    for (key, refused, queued) in [(a, refused_a, queued_a), (b, refused_b, queued_b)] {
        let rows: Vec<(Uuid, String, Option<i64>)> = sqlx::query_as(
            "SELECT tx_id, state, nonce FROM managed_tx WHERE tx_id = ANY($1) ORDER BY ingress_seq",
        )
        .bind(vec![refused, queued])
        .fetch_all(&db.pool)
        .await
        .expect("intents");
        assert_eq!(rows[0], (refused, "REJECTED".to_owned(), None));
        assert_eq!((rows[1].0, rows[1].1.as_str()), (queued, "ALLOCATED"));
        let held = u64::try_from(rows[1].2.expect("a nonce")).expect("nonce");
        let cursor = nonce_cursor::load(&db.pool, key)
            .await
            .expect("cursor")
            .expect("row");
        let mut accounted = cursor.released.clone();
        accounted.push(held);
        accounted.sort_unstable();
        assert_eq!(
            accounted,
            (0..cursor.next_nonce).collect::<Vec<_>>(),
            "every nonce below the next is held or given back"
        );
    }
}

#[tokio::test]
async fn a_requeue_waits_for_the_cursor_before_it_locks_the_intent_a_record_refuses() {
    let db = TestDb::migrated().await;
    let key = submitter(22);
    let (lease, ids) = leader_with_queue(&db, key, 2, Duration::from_secs(60)).await;
    let write = |w: Write| group::write_together(&db.pool, vec![(lease.clone(), w)]);
    assert!(write(allocate(&ids)).await[0].is_ok());
    let (refused, accepted) = (ids[0], ids[1]);
    let accepted_hash = B256::repeat_byte(0xc1);
    let persisted = write(persist(vec![
        attempt(refused, 0, B256::repeat_byte(0xc0)),
        attempt(accepted, 1, accepted_hash),
    ]))
    .await;
    assert!(persisted[0].is_ok(), "{persisted:?}");
    let pool = pool_without_deadlock_detection(&db).await;

    // The record (an acceptance, then a refusal) waits at its acceptance,
    // holding the cursor it locked for its refusal.
    let mut blocker = db.pool.begin().await.expect("begin");
    sqlx::query("SELECT FROM managed_tx WHERE tx_id = $1 FOR UPDATE")
        .bind(accepted)
        .execute(&mut *blocker)
        .await
        .expect("hold row");
    let record = Write::RecordBroadcast(group::BroadcastRecord {
        accepted: vec![(accepted, accepted_hash, "accepted")],
        retries: Vec::new(),
        rejects: vec![(refused, "nonce too low".into())],
        resubmit_interval: RESUBMIT,
        retry_after: Duration::from_secs(1),
    });
    let recording = {
        let (pool, lease) = (pool.clone(), lease.clone());
        tokio::spawn(async move {
            let answers = group::write_together(&pool, vec![(lease, record)]).await;
            assert!(answers.iter().all(Result::is_ok), "{answers:?}");
        })
    };
    crate::common::wait_until(Duration::from_secs(30), || async {
        lock_waiters(&db).await >= 1
    })
    .await;
    // Meanwhile the sweep requeues the refused intent (its nonce went to
    // a transaction that is not ours).
    let requeueing = {
        let (pool, lease) = (pool.clone(), lease.clone());
        tokio::spawn(async move {
            let mut ftx = FencedTx::begin(&pool, &lease, "test_requeue")
                .await
                .expect("fenced");
            store::tracking::requeue(&mut ftx, refused, "nonce 0 was consumed elsewhere")
                .await
                .expect("requeue");
            ftx.commit().await.expect("commit");
        })
    };
    let (requeue, db_ref) = (&requeueing, &db);
    crate::common::wait_until(Duration::from_secs(30), || async move {
        requeue.is_finished() || lock_waiters(db_ref).await >= 2
    })
    .await;
    blocker.commit().await.expect("release row");
    finish_without_a_cycle(&db, vec![recording, requeueing]).await;

    // The record got there first: the refusal stands, so the requeue found
    // nothing in flight to requeue.
    let states: Vec<(String, Option<i64>)> = sqlx::query_as(
        "SELECT state, nonce FROM managed_tx WHERE tx_id = ANY($1) ORDER BY ingress_seq",
    )
    .bind(vec![refused, accepted])
    .fetch_all(&db.pool)
    .await
    .expect("intents");
    assert_eq!(
        states,
        vec![
            ("REJECTED".to_owned(), None),
            ("TRACKING".to_owned(), Some(1))
        ]
    );
}
