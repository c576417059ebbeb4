//! A presigned allocation writes each intent's first attempt on the
//! intent's own row (`managed_tx.first_*`): insert, allocation with the
//! bytes, acceptance — three row versions per intent (issue 28).
//! `tx_attempt`, a view, shows it among the intent's other attempts, its
//! answers are written on the row, and it moves to `tx_attempt_rest`,
//! unchanged, when its nonce leaves the row.

use super::presigned::presigned;
use super::*;
use crate::common::txs::{attempts, AttemptRow};

async fn rest_rows(db: &TestDb) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM tx_attempt_rest")
        .fetch_one(&db.pool)
        .await
        .expect("count")
}

async fn first_on_row(db: &TestDb, tx_id: Uuid) -> (Option<String>, Option<String>) {
    sqlx::query_as("SELECT first_tx_hash, first_broadcast_result FROM managed_tx WHERE tx_id = $1")
        .bind(tx_id)
        .fetch_one(&db.pool)
        .await
        .expect("intent")
}

fn summary(rows: &[AttemptRow]) -> Vec<(i32, i64, String, String, Option<String>)> {
    rows.iter()
        .map(|a| {
            let (no, nonce, hash) = (a.attempt_no, a.nonce, a.tx_hash.clone());
            (no, nonce, hash, a.kind.clone(), a.result.clone())
        })
        .collect()
}

fn hex(hash: B256) -> String {
    format!("{hash:#x}")
}

fn record(
    accepted: Vec<(Uuid, B256, &'static str)>,
    retries: Vec<store::pipeline::RetryLater>,
) -> Write {
    Write::RecordBroadcast(group::BroadcastRecord {
        accepted,
        retries,
        rejects: Vec::new(),
        resubmit_interval: RESUBMIT,
        retry_after: Duration::from_secs(1),
    })
}

#[tokio::test]
async fn a_presigned_draw_keeps_each_first_attempt_on_its_intent_row() {
    let db = TestDb::migrated().await;
    let key = submitter(30);
    let (lease, ids) = leader_with_queue(&db, key, 2, Duration::from_secs(30)).await;
    let answers =
        group::write_together(&db.pool, vec![(lease.clone(), presigned(&ids, 0, 0x40))]).await;
    assert!(answers[0].is_ok(), "{answers:?}");
    assert_eq!(
        rest_rows(&db).await,
        0,
        "no attempt row: the bytes are on the intents"
    );

    let shown = attempts(&db.pool, ids[1]).await;
    assert_eq!(
        summary(&shown),
        vec![(
            1,
            1,
            hex(B256::repeat_byte(0x41)),
            "original".to_owned(),
            None
        )]
    );
    assert_eq!(
        (
            shown[0].max_fee,
            shown[0].priority_fee,
            shown[0].raw.clone()
        ),
        (2_000_000_000, 1_000_000_000, vec![0x02, 1])
    );
    let (token, gas_limit, at_allocation): (i64, i64, bool) = sqlx::query_as(
        "SELECT t.fencing_token, t.gas_limit, t.created_at = m.allocated_at
           FROM tx_attempt t JOIN managed_tx m USING (tx_id) WHERE t.tx_id = $1",
    )
    .bind(ids[1])
    .fetch_one(&db.pool)
    .await
    .expect("attempt");
    assert_eq!(
        (token, gas_limit, at_allocation),
        (lease.token, 21_000, true)
    );
    let found: Vec<Uuid> = sqlx::query_scalar("SELECT tx_id FROM tx_attempt WHERE tx_hash = $1")
        .bind(hex(B256::repeat_byte(0x40)))
        .fetch_all(&db.pool)
        .await
        .expect("by hash");
    assert_eq!(found, vec![ids[0]], "found by hash");
}

#[tokio::test]
async fn answers_to_an_attempt_on_its_row_are_written_on_the_row() {
    let db = TestDb::migrated().await;
    let key = submitter(31);
    let (lease, ids) = leader_with_queue(&db, key, 3, Duration::from_secs(30)).await;
    let write = |w: Write| group::write_together(&db.pool, vec![(lease.clone(), w)]);
    assert!(write(presigned(&ids, 0, 0x50)).await[0].is_ok());
    let hash = |i: u8| B256::repeat_byte(0x50 + i);
    // The third intent leaves flight (as an operator would make it) before
    // its acceptance is recorded: that acceptance is written on its row.
    sqlx::query("UPDATE managed_tx SET state = 'REJECTED', last_error = 'x' WHERE tx_id = $1")
        .bind(ids[2])
        .execute(&db.pool)
        .await
        .expect("reject");
    let retry = store::pipeline::RetryLater {
        tx_id: ids[0],
        tx_hash: hash(0),
        error: "nonce_too_high".to_owned(),
        unknown: false,
    };
    let recorded = write(record(
        vec![(ids[1], hash(1), "accepted"), (ids[2], hash(2), "accepted")],
        vec![retry],
    ))
    .await;
    assert!(recorded[0].is_ok(), "{recorded:?}");
    assert_eq!(
        first_on_row(&db, ids[0]).await,
        (Some(hex(hash(0))), Some("nonce_too_high".to_owned()))
    );
    assert_eq!(
        first_on_row(&db, ids[1]).await,
        (Some(hex(hash(1))), None),
        "a plain acceptance is the intent's accepted_hash"
    );
    assert_eq!(
        first_on_row(&db, ids[2]).await,
        (Some(hex(hash(2))), Some("accepted".to_owned()))
    );

    // A bump of the second intent accepted: it goes to `tx_attempt_rest` as
    // attempt 2, and the first attempt's acceptance is written on the row.
    let later = B256::repeat_byte(0x5f);
    let mut bump = attempt(ids[1], 1, later);
    bump.kind = AttemptKind::Bump;
    let persisted = write(Write::PersistAttempts {
        attempts: vec![bump],
        refused: Vec::new(),
    })
    .await;
    assert!(persisted[0].is_ok(), "{persisted:?}");
    let recorded = write(record(vec![(ids[1], later, "accepted")], Vec::new())).await;
    assert!(recorded[0].is_ok(), "{recorded:?}");
    assert_eq!(
        first_on_row(&db, ids[1]).await,
        (Some(hex(hash(1))), Some("accepted".to_owned()))
    );
    assert_eq!(
        summary(&attempts(&db.pool, ids[1]).await),
        vec![
            (
                1,
                1,
                hex(hash(1)),
                "original".to_owned(),
                Some("accepted".to_owned())
            ),
            (
                2,
                1,
                hex(later),
                "bump".to_owned(),
                Some("accepted".to_owned())
            ),
        ]
    );
    assert_eq!(rest_rows(&db).await, 1);
}

#[tokio::test]
async fn an_attempt_on_its_row_leaves_with_the_nonce_and_a_new_allocation_numbers_after_it() {
    let db = TestDb::migrated().await;
    let key = submitter(32);
    let (lease, ids) = leader_with_queue(&db, key, 1, Duration::from_secs(30)).await;
    let write = |w: Write| group::write_together(&db.pool, vec![(lease.clone(), w)]);
    assert!(write(presigned(&ids, 0, 0x60)).await[0].is_ok());
    let first = B256::repeat_byte(0x60);
    assert!(write(record(vec![(ids[0], first, "accepted")], Vec::new())).await[0].is_ok());
    // The nonce leaves the row (an outsider consumed it: back to QUEUED).
    sqlx::query(
        "UPDATE managed_tx SET state = 'QUEUED', nonce = NULL, sub_state = NULL WHERE tx_id = $1",
    )
    .bind(ids[0])
    .execute(&db.pool)
    .await
    .expect("requeue");
    assert_eq!(first_on_row(&db, ids[0]).await, (None, None));
    let moved = attempts(&db.pool, ids[0]).await;
    assert_eq!(
        summary(&moved),
        vec![(
            1,
            0,
            hex(first),
            "original".to_owned(),
            Some("accepted".to_owned())
        )],
        "the attempt is kept as it was, with its nonce and answer"
    );
    let (token, written): (i64, Option<String>) = sqlx::query_as(
        "SELECT fencing_token, broadcast_result FROM tx_attempt_rest WHERE tx_hash = $1",
    )
    .bind(hex(first))
    .fetch_one(&db.pool)
    .await
    .expect("moved");
    assert_eq!((token, written.as_deref()), (lease.token, Some("accepted")));

    // Allocated again (nonce 1: the floor kept 0 used): the new attempt is
    // attempt 2, next to the first, not on the row.
    assert_eq!(next_nonce(&db, key).await, 1);
    let again = write(presigned(&ids, 1, 0x70)).await;
    assert_eq!(
        again[0].as_ref().expect("commits"),
        &Answer::Allocated(vec![(ids[0], 1)])
    );
    assert_eq!(first_on_row(&db, ids[0]).await, (None, None));
    assert_eq!(
        summary(&attempts(&db.pool, ids[0]).await),
        vec![
            (
                1,
                0,
                hex(first),
                "original".to_owned(),
                Some("accepted".to_owned())
            ),
            (
                2,
                1,
                hex(B256::repeat_byte(0x70)),
                "original".to_owned(),
                None
            ),
        ]
    );
}
