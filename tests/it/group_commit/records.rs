//! Group commit's record writes and the merged queue read.

use super::*;

#[tokio::test]
async fn a_retry_record_touches_only_intents_still_in_flight() {
    let db = TestDb::migrated().await;
    let key = submitter(8);
    let (lease, ids) = leader_with_queue(&db, key, 1, Duration::from_secs(30)).await;
    let write = |w: Write| group::write_together(&db.pool, vec![(lease.clone(), w)]);
    assert!(write(allocate(&ids)).await[0].is_ok());
    let sent = B256::repeat_byte(0xcc);
    let persisted = write(Write::PersistAttempts {
        attempts: vec![attempt(ids[0], 0, sent)],
        refused: Vec::new(),
    })
    .await;
    assert!(persisted[0].is_ok(), "{persisted:?}");
    // The intent has left flight (as a refusal or an operator would make
    // it) before a late record of a retried broadcast arrives.
    sqlx::query(
        "UPDATE managed_tx SET state = 'REJECTED', last_error = 'refused', retry_at = NULL
          WHERE tx_id = $1",
    )
    .bind(ids[0])
    .execute(&db.pool)
    .await
    .expect("reject");
    let recorded = write(Write::RecordBroadcast(group::BroadcastRecord {
        accepted: Vec::new(),
        retries: vec![store::pipeline::RetryLater {
            tx_id: ids[0],
            tx_hash: sent,
            error: "connection reset".into(),
            unknown: true,
        }],
        rejects: Vec::new(),
        resubmit_interval: RESUBMIT,
        retry_after: Duration::from_secs(1),
    }))
    .await;
    assert!(recorded[0].is_ok(), "{recorded:?}");
    let (state, error, retry_at, pooled): (String, Option<String>, Option<String>, bool) =
        sqlx::query_as(
            "SELECT state, last_error, retry_at::text, maybe_pooled FROM managed_tx WHERE tx_id = $1",
        )
        .bind(ids[0])
        .fetch_one(&db.pool)
        .await
        .expect("intent");
    assert_eq!(
        (state.as_str(), error.as_deref(), retry_at, pooled),
        ("REJECTED", Some("refused"), None, false),
        "a finished intent is not rescheduled"
    );
}

/// The queue reader answers several leaders' reads with one statement: each
/// gets its own oldest QUEUED intents within its batch and free in-flight
/// slots, and an intent that cannot be decoded fails only its submitter's read.
#[tokio::test]
async fn one_merged_queue_read_answers_each_leader_within_its_own_limits() {
    use store::queue_read::{read_together, QueueRequest};
    let db = TestDb::migrated().await;
    let long = Duration::from_secs(30);
    let (_, ids0) = leader_with_queue(&db, submitter(0), 5, long).await;
    let (lease1, ids1) = leader_with_queue(&db, submitter(1), 3, long).await;
    let (_, _) = leader_with_queue(&db, submitter(2), 2, long).await;
    // Submitter 1: one intent ALLOCATED occupies one of its two slots.
    group::write_together(&db.pool, vec![(lease1, allocate(&ids1[..1]))])
        .await
        .remove(0)
        .expect("allocated");
    // Submitter 2: a stored intent this version cannot read.
    sqlx::query("UPDATE managed_tx SET intent = '{\"bogus\": 1}' WHERE submitter = $1")
        .bind(submitter(2).address_hex())
        .execute(&db.pool)
        .await
        .expect("corrupt");
    let ask = |i: u8, batch: usize, max_in_flight: u32| QueueRequest {
        key: submitter(i),
        batch,
        max_in_flight,
        count_mined: false,
    };
    let answers = read_together(
        &db.pool,
        &[
            ask(0, 3, 100),
            ask(1, 10, 2),
            ask(2, 10, 100),
            ask(3, 10, 100),
        ],
    )
    .await;
    assert_eq!(answers.len(), 4);
    let ids = |i: usize| -> Vec<Uuid> {
        answers[i]
            .as_ref()
            .expect("read")
            .iter()
            .map(|q| q.tx_id)
            .collect()
    };
    assert_eq!(
        ids(0),
        ids0[..3].to_vec(),
        "oldest first, at most the batch"
    );
    assert_eq!(ids(1), ids1[1..2].to_vec(), "only the free in-flight slot");
    assert!(
        matches!(answers[2], Err(StoreError::Corrupt(_))),
        "{:?}",
        answers[2]
    );
    assert!(ids(3).is_empty(), "a submitter with nothing queued");
}

/// Reads that wait with writes are answered in the writes' transaction,
/// after them: a read counts the slots a write of the same batch took. A
/// transaction that fails does not lose its reads (they are read alone,
/// after the parts' own writes), and reads with no write are read alone.
#[tokio::test]
async fn reads_batched_with_writes_see_them_and_survive_a_failed_transaction() {
    use store::queue_read::QueueRequest;
    let db = TestDb::migrated().await;
    let long = Duration::from_secs(30);
    let (lease, ids) = leader_with_queue(&db, submitter(10), 4, long).await;
    let (bad, bad_ids) = leader_with_queue(&db, submitter(11), 1, long).await;
    let ask = |i: u8, max_in_flight: u32| QueueRequest {
        key: submitter(i),
        batch: 10,
        max_in_flight,
        count_mined: false,
    };
    let read_ids = |answer: &store::StoreResult<Vec<store::pipeline::QueuedTx>>| -> Vec<Uuid> {
        answer
            .as_ref()
            .expect("read")
            .iter()
            .map(|q| q.tx_id)
            .collect()
    };

    // One intent allocated in the batch: of three slots, two are free.
    let (written, read) = group::write_and_read_together(
        &db.pool,
        vec![(lease.clone(), allocate(&ids[..1]))],
        vec![ask(10, 3), ask(11, 10)],
    )
    .await;
    assert!(written[0].is_ok(), "{written:?}");
    assert_eq!(read_ids(&read[0]), ids[1..3].to_vec(), "after the write");
    assert_eq!(read_ids(&read[1]), bad_ids, "another submitter's read");

    // A part that breaks the shared transaction (a hash already stored):
    // the good part and the reads are still answered, the read after the
    // good part's write.
    let taken = B256::repeat_byte(0xd1);
    let persisted = group::write_together(
        &db.pool,
        vec![(lease.clone(), persist(vec![attempt(ids[0], 0, taken)]))],
    )
    .await;
    assert!(persisted[0].is_ok(), "{persisted:?}");
    let (written, read) = group::write_and_read_together(
        &db.pool,
        vec![
            (bad.clone(), allocate(&bad_ids)),
            (lease.clone(), allocate(&ids[1..2])),
        ],
        vec![ask(10, 3)],
    )
    .await;
    assert!(written.iter().all(Result::is_ok), "{written:?}");
    let (_, broken) = group::write_and_read_together(
        &db.pool,
        vec![
            (bad.clone(), persist(vec![attempt(bad_ids[0], 0, taken)])),
            (lease.clone(), allocate(&ids[2..3])),
        ],
        vec![ask(10, 4), ask(11, 10)],
    )
    .await;
    assert_eq!(read_ids(&read[0]), ids[2..3].to_vec());
    assert_eq!(
        read_ids(&broken[0]),
        ids[3..4].to_vec(),
        "read alone, after the good part's allocation"
    );
    assert!(read_ids(&broken[1]).is_empty(), "nothing queued");

    // No write waiting: the reads are read alone.
    let (written, read) =
        group::write_and_read_together(&db.pool, Vec::new(), vec![ask(10, 10)]).await;
    assert!(written.is_empty());
    assert_eq!(read_ids(&read[0]), ids[3..4].to_vec());
}

/// A plain acceptance is recorded on the intent (`accepted_hash`) and leaves
/// the attempt's row as inserted: one row version per intent fewer on the
/// way out (issue 28). Every other answer is still written on its attempt,
/// and an acceptance of a later attempt writes the earlier one's answer.
#[tokio::test]
async fn an_acceptance_names_the_attempt_on_the_intent_and_leaves_the_attempt_row_alone() {
    let db = TestDb::migrated().await;
    let key = submitter(9);
    let (lease, ids) = leader_with_queue(&db, key, 3, Duration::from_secs(30)).await;
    let write = |w: Write| group::write_together(&db.pool, vec![(lease.clone(), w)]);
    assert!(write(allocate(&ids)).await[0].is_ok());
    let (first, known, late) = (
        B256::repeat_byte(0xa1),
        B256::repeat_byte(0xa2),
        B256::repeat_byte(0xa4),
    );
    let persisted = write(persist(vec![
        attempt(ids[0], 0, first),
        attempt(ids[1], 1, known),
        attempt(ids[2], 2, late),
    ]))
    .await;
    assert!(persisted[0].is_ok(), "{persisted:?}");
    let version = |hash: B256| {
        let pool = db.pool.clone();
        async move {
            sqlx::query_as::<_, (String, Option<String>)>(
                "SELECT xmin::text || '/' || ctid::text, broadcast_result FROM tx_attempt
                  WHERE tx_hash = $1",
            )
            .bind(format!("{hash:#x}"))
            .fetch_one(&pool)
            .await
            .expect("attempt")
        }
    };
    let inserted = version(first).await;
    let record = |accepted: Vec<(Uuid, B256, &'static str)>| {
        write(Write::RecordBroadcast(group::BroadcastRecord {
            accepted,
            retries: Vec::new(),
            rejects: Vec::new(),
            resubmit_interval: RESUBMIT,
            retry_after: Duration::from_secs(1),
        }))
    };
    // The third intent has left flight (as an operator would make it)
    // before its acceptance is recorded: no update names it, so its attempt
    // carries the answer.
    sqlx::query("UPDATE managed_tx SET state = 'REJECTED', last_error = 'x' WHERE tx_id = $1")
        .bind(ids[2])
        .execute(&db.pool)
        .await
        .expect("reject");
    let recorded = record(vec![
        (ids[0], first, "accepted"),
        (ids[1], known, "already_known"),
        (ids[2], late, "accepted"),
    ])
    .await;
    assert!(recorded[0].is_ok(), "{recorded:?}");
    assert_eq!(
        version(first).await,
        inserted,
        "the accepted attempt's row is the version its insert wrote"
    );
    assert_eq!(version(known).await.1.as_deref(), Some("already_known"));
    assert_eq!(version(late).await.1.as_deref(), Some("accepted"));
    let named: Vec<(String, Option<String>)> = sqlx::query_as(
        "SELECT state, accepted_hash FROM managed_tx WHERE tx_id = ANY($1) ORDER BY nonce",
    )
    .bind(&ids[..2])
    .fetch_all(&db.pool)
    .await
    .expect("intents");
    assert_eq!(
        named,
        vec![
            ("TRACKING".to_owned(), Some(format!("{first:#x}"))),
            ("TRACKING".to_owned(), Some(format!("{known:#x}"))),
        ]
    );
    let answers = |tx_id: Uuid| {
        let pool = db.pool.clone();
        async move {
            crate::common::txs::attempts(&pool, tx_id)
                .await
                .into_iter()
                .map(|a| (a.tx_hash, a.result))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        answers(ids[0]).await,
        vec![(format!("{first:#x}"), Some("accepted".to_owned()))],
        "the answer read back is the intent's acceptance"
    );

    // A later attempt of the same intent accepted on the way out: the
    // intent names it now, and the first attempt's answer is written.
    let later = B256::repeat_byte(0xa3);
    let mut replacement = attempt(ids[0], 0, later);
    replacement.kind = AttemptKind::Bump;
    let persisted = write(persist(vec![replacement])).await;
    assert!(persisted[0].is_ok(), "{persisted:?}");
    let recorded = record(vec![(ids[0], later, "accepted")]).await;
    assert!(recorded[0].is_ok(), "{recorded:?}");
    assert_eq!(version(first).await.1.as_deref(), Some("accepted"));
    assert_eq!(version(later).await.1, None);
    assert_eq!(
        answers(ids[0]).await,
        vec![
            (format!("{first:#x}"), Some("accepted".to_owned())),
            (format!("{later:#x}"), Some("accepted".to_owned())),
        ]
    );
}

/// A re-broadcast sends the newest attempt a node accepted, not a newer
/// replacement the node refused — also when that acceptance is kept on the
/// intent (`accepted_hash`) rather than written on the attempt.
#[tokio::test]
async fn a_resend_picks_the_attempt_the_intent_names_as_accepted_over_a_refused_replacement() {
    let db = TestDb::migrated().await;
    let (lease, ids) = leader_with_queue(&db, submitter(12), 1, Duration::from_secs(30)).await;
    let write = |w: Write| group::write_together(&db.pool, vec![(lease.clone(), w)]);
    assert!(write(allocate(&ids)).await[0].is_ok());
    let (original, replacement) = (B256::repeat_byte(0xe1), B256::repeat_byte(0xe2));
    assert!(write(persist(vec![attempt(ids[0], 0, original)])).await[0].is_ok());
    let recorded = write(Write::RecordBroadcast(group::BroadcastRecord {
        accepted: vec![(ids[0], original, "accepted")],
        resubmit_interval: RESUBMIT,
        ..group::BroadcastRecord::default()
    }))
    .await;
    assert!(recorded[0].is_ok(), "{recorded:?}");
    let mut bump = attempt(ids[0], 0, replacement);
    bump.kind = AttemptKind::Bump;
    assert!(write(persist(vec![bump])).await[0].is_ok());
    let mut ftx = FencedTx::begin(&db.pool, &lease, "refused")
        .await
        .expect("fenced");
    store::pipeline::record_attempt_results(
        &mut ftx,
        [(ids[0], replacement, "replacement_underpriced".to_owned())].into_iter(),
    )
    .await
    .expect("refusal");
    ftx.commit().await.expect("commit");
    sqlx::query(
        "UPDATE managed_tx SET next_resubmit_at = now() - interval '1 second' WHERE tx_id = $1",
    )
    .bind(ids[0])
    .execute(&db.pool)
    .await
    .expect("due");

    let mut ftx = FencedTx::begin(&db.pool, &lease, "claim")
        .await
        .expect("fenced");
    let claimed = store::resubmit_claims::claim_due(&mut ftx, None, 10, RESUBMIT)
        .await
        .expect("claim");
    ftx.commit().await.expect("commit");
    assert_eq!(claimed.len(), 1, "{claimed:?}");
    assert_eq!(claimed[0].latest_hash, replacement, "the newest attempt");
    assert_eq!(
        claimed[0].resend_hash, original,
        "the accepted original, not the refused replacement"
    );
}

/// A leader's queue read counts the slots its unmined intents take from
/// their own index: the intents already mined and awaiting finality (a
/// chain's whole finality depth of them, on a busy submitter thousands) are
/// not read on every read. When mined intents hold their slots until final
/// (`hold_slot_until_final`), they are counted.
#[tokio::test]
async fn the_queue_read_does_not_read_the_mined_intents_awaiting_finality() {
    use store::queue_read::{query, QueueRequest};
    let db = TestDb::migrated().await;
    let key = submitter(0);
    let (_lease, queued) = leader_with_queue(&db, key, 3, Duration::from_secs(30)).await;
    // 2,000 intents mined and not final, then 2 sent and not mined yet.
    sqlx::query(
        "INSERT INTO managed_tx (tx_id, chain_id, submitter, request_hash, intent, state, nonce,
                                 receipt, receipt_block_number, receipt_block_hash, mined_tx_hash)
         SELECT gen_random_uuid(), $1, $2, decode(repeat('00', 32), 'hex'), '{}'::jsonb, 'TRACKING', n,
                CASE WHEN n < 2000 THEN '{}'::jsonb END, CASE WHEN n < 2000 THEN n END,
                CASE WHEN n < 2000 THEN '0x' || repeat('a', 64) END,
                CASE WHEN n < 2000 THEN '0x' || repeat('b', 64) END
           FROM generate_series(0, 2001) n",
    )
    .bind(key.chain_id)
    .bind(key.address_hex())
    .execute(&db.pool)
    .await
    .expect("in flight");
    sqlx::query("ANALYZE managed_tx")
        .execute(&db.pool)
        .await
        .expect("analyze");
    let ask = |count_mined: bool| QueueRequest {
        key,
        batch: 10,
        max_in_flight: 4,
        count_mined,
    };

    let mut tx = db.pool.begin().await.expect("begin");
    let read = query(&mut *tx, &[ask(false)]).await.expect("read");
    let ids: Vec<Uuid> = read.iter().map(|(_, id, _)| *id).collect();
    assert_eq!(
        ids,
        queued[..2].to_vec(),
        "4 slots, 2 taken by unmined intents"
    );
    let rows_read = crate::common::db::managed_tx_rows_read(&mut tx).await;
    assert!(
        rows_read < 100,
        "the read went through {rows_read} rows of managed_tx for 5 open intents"
    );
    tx.rollback().await.expect("rollback");

    let read = query(&db.pool, &[ask(true)]).await.expect("read");
    assert!(
        read.is_empty(),
        "mined intents holding their slots: {read:?}"
    );
}
