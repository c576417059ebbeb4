//! A leader's own draw (nonces from its copy of the cursor, attempts signed
//! before the write) is written whole with its attempts in one fenced
//! write, or — when the cursor moved or an intent left QUEUED — not at all.

use super::*;
use store::group::Presigned;

/// A draw of `ids` from a cursor at `from` (nothing released), with an
/// attempt each.
fn presigned(ids: &[Uuid], from: u64, hash_byte: u8) -> Write {
    let attempts: Vec<NewAttempt> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let nonce = from + i as u64;
            attempt(
                *id,
                nonce,
                B256::repeat_byte(hash_byte.wrapping_add(i as u8)),
            )
        })
        .collect();
    Write::Allocate {
        reject: Vec::new(),
        tx_ids: ids.to_vec(),
        resubmit_interval: RESUBMIT,
        spend: None,
        expire_only: Vec::new(),
        presigned: Some(Box::new(Presigned {
            from: (from, Vec::new()),
            attempts,
        })),
    }
}

async fn attempts_of(db: &TestDb, key: SubmitterKey) -> Vec<(Uuid, i64)> {
    sqlx::query_as(
        "SELECT t.tx_id, t.nonce FROM tx_attempt t JOIN managed_tx m USING (tx_id)
          WHERE m.submitter = $1 ORDER BY t.nonce",
    )
    .bind(key.address_hex())
    .fetch_all(&db.pool)
    .await
    .expect("attempts")
}

#[tokio::test]
async fn a_draw_is_written_whole_with_its_attempts_in_one_write() {
    let db = TestDb::migrated().await;
    let key = submitter(20);
    let (lease, ids) = leader_with_queue(&db, key, 3, Duration::from_secs(30)).await;
    let answers = group::write_together(&db.pool, vec![(lease, presigned(&ids, 0, 0x10))]).await;
    assert_eq!(
        answers[0].as_ref().expect("commits"),
        &Answer::Allocated(vec![(ids[0], 0), (ids[1], 1), (ids[2], 2)])
    );
    assert!(states(&db, key)
        .await
        .iter()
        .enumerate()
        .all(|(i, (state, nonce, _))| state == "ALLOCATED" && *nonce == Some(i as i64)));
    assert_eq!(
        attempts_of(&db, key).await,
        vec![(ids[0], 0), (ids[1], 1), (ids[2], 2)]
    );
    assert_eq!(next_nonce(&db, key).await, 3);
}

#[tokio::test]
async fn a_draw_from_a_cursor_that_moved_writes_nothing_and_the_other_parts_commit() {
    let db = TestDb::migrated().await;
    let key = submitter(21);
    let (lease, ids) = leader_with_queue(&db, key, 3, Duration::from_secs(30)).await;
    let (other, other_ids) =
        leader_with_queue(&db, submitter(22), 1, Duration::from_secs(30)).await;
    // Another path moved the cursor after the leader copied it (at 0).
    let moved = group::write_together(&db.pool, vec![(lease.clone(), allocate(&ids[..1]))]).await;
    assert_eq!(
        moved[0].as_ref().expect("commits"),
        &Answer::Allocated(vec![(ids[0], 0)])
    );

    let answers = group::write_together(
        &db.pool,
        vec![
            (lease, presigned(&ids[1..], 0, 0x20)),
            (other, presigned(&other_ids, 0, 0x30)),
        ],
    )
    .await;
    assert_eq!(
        answers[0].as_ref().expect("no error"),
        &Answer::Allocated(Vec::new())
    );
    assert_eq!(
        answers[1].as_ref().expect("the other part commits"),
        &Answer::Allocated(vec![(other_ids[0], 0)])
    );
    let after = states(&db, key).await;
    assert_eq!(
        after[1..],
        [
            ("QUEUED".to_owned(), None, None),
            ("QUEUED".to_owned(), None, None)
        ]
    );
    assert!(
        attempts_of(&db, key).await.is_empty(),
        "no attempt of the stale draw"
    );
    assert_eq!(
        next_nonce(&db, key).await,
        1,
        "the cursor is left as the other path put it"
    );
    assert_eq!(
        attempts_of(&db, submitter(22)).await,
        vec![(other_ids[0], 0)]
    );
}

#[tokio::test]
async fn a_draw_whose_intent_was_cancelled_writes_nothing_but_its_rejections() {
    let db = TestDb::migrated().await;
    let key = submitter(23);
    let (lease, ids) = leader_with_queue(&db, key, 4, Duration::from_secs(30)).await;
    // An operator's cancel committed between the leader's read and its write.
    sqlx::query("UPDATE managed_tx SET state = 'CANCELLED' WHERE tx_id = $1")
        .bind(ids[1])
        .execute(&db.pool)
        .await
        .expect("cancel");
    let mut write = presigned(&ids[..3], 0, 0x40);
    if let Write::Allocate { reject, .. } = &mut write {
        reject.push((ids[3], "signer refused: no".into()));
    }
    let answers = group::write_together(&db.pool, vec![(lease, write)]).await;
    assert_eq!(
        answers[0].as_ref().expect("no error"),
        &Answer::Allocated(Vec::new())
    );
    let after: Vec<String> = states(&db, key)
        .await
        .into_iter()
        .map(|(s, _, _)| s)
        .collect();
    assert_eq!(after, ["QUEUED", "CANCELLED", "QUEUED", "REJECTED"]);
    assert!(attempts_of(&db, key).await.is_empty());
    assert_eq!(next_nonce(&db, key).await, 0, "no nonce used");
}

#[tokio::test]
async fn attempts_signed_with_other_nonces_than_the_draw_gives_are_refused_whole() {
    let db = TestDb::migrated().await;
    let key = submitter(24);
    let (lease, ids) = leader_with_queue(&db, key, 2, Duration::from_secs(30)).await;
    let mut write = presigned(&ids, 0, 0x50);
    if let Write::Allocate {
        presigned: Some(presigned),
        ..
    } = &mut write
    {
        // A leader's bug: the second attempt signed with nonce 5.
        presigned.attempts[1].nonce = 5;
    }
    let answers = group::write_together(&db.pool, vec![(lease, write)]).await;
    assert!(
        matches!(&answers[0], Err(StoreError::Corrupt(_))),
        "{:?}",
        answers[0]
    );
    assert!(attempts_of(&db, key).await.is_empty());
    assert_eq!(next_nonce(&db, key).await, 0);
}
