//! The acceptance (ALLOCATED → TRACKING) can be a HOT update: no index of
//! `managed_tx` names a column it changes, and `phase` is the same on both
//! sides (migration `20261201000014`, README "Data model and leases").

use crate::common::TestDb;
use sqlx::Row;
use uuid::Uuid;

/// The columns the broadcast record's acceptance update sets
/// (`store::group::writes::record`).
const ACCEPTANCE_SETS: [&str; 12] = [
    "state",
    "sub_state",
    "submit_attempts",
    "last_submit_at",
    "first_broadcast_at",
    "next_resubmit_at",
    "last_error",
    "retry_at",
    "fencing_token",
    "updated_at",
    "tx_hash",
    "accepted_hash",
];

#[tokio::test]
async fn no_index_of_the_intent_table_names_a_column_the_acceptance_changes() {
    let db = TestDb::migrated().await;
    let indexes: Vec<(String, String)> = sqlx::query_as(
        "SELECT c.relname::text, pg_get_indexdef(i.indexrelid)
           FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
          WHERE i.indrelid = 'managed_tx'::regclass",
    )
    .fetch_all(&db.pool)
    .await
    .expect("indexes");
    assert!(indexes.len() >= 7, "{indexes:?}");
    for (name, definition) in &indexes {
        let words: Vec<&str> = definition
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .collect();
        for column in ACCEPTANCE_SETS {
            assert!(
                !words.contains(&column),
                "index {name} names {column}, so an acceptance can never be HOT: {definition}"
            );
        }
    }
}

#[tokio::test]
async fn phase_groups_the_states_and_an_acceptance_is_updated_in_place() {
    let db = TestDb::migrated().await;
    let phases: Vec<(String, i16)> = sqlx::query_as(
        "WITH s(state, nonce) AS (VALUES ('QUEUED', NULL), ('ALLOCATED', 0), ('TRACKING', 1),
                                        ('STUCK', 2), ('REJECTED', NULL), ('CANCELLED', NULL))
         INSERT INTO managed_tx (tx_id, chain_id, submitter, request_hash, intent, state, nonce)
         SELECT gen_random_uuid(), 31337, '0x1111111111111111111111111111111111111111',
                decode(repeat('00', 32), 'hex'), '{}'::jsonb, s.state, s.nonce::bigint FROM s
         RETURNING state, phase",
    )
    .fetch_all(&db.pool)
    .await
    .expect("insert");
    let expected = [
        ("QUEUED", 0),
        ("ALLOCATED", 1),
        ("TRACKING", 1),
        ("STUCK", 1),
        ("REJECTED", 3),
        ("CANCELLED", 2),
    ];
    for (state, phase) in expected {
        assert!(
            phases.iter().any(|(s, p)| s == state && *p == phase),
            "{state} should be phase {phase}: {phases:?}"
        );
    }

    let allocated: Uuid =
        sqlx::query_scalar("SELECT tx_id FROM managed_tx WHERE state = 'ALLOCATED'")
            .fetch_one(&db.pool)
            .await
            .expect("allocated");
    let mut tx = db.pool.begin().await.expect("begin");
    // The same columns the acceptance sets; counted in this transaction.
    sqlx::query(
        "UPDATE managed_tx SET state = 'TRACKING', sub_state = 'awaiting_receipt',
                submit_attempts = submit_attempts + 1, last_submit_at = now(),
                first_broadcast_at = now(), next_resubmit_at = now() + interval '30 s',
                last_error = NULL, retry_at = NULL, fencing_token = 1, updated_at = now(),
                tx_hash = '0x' || repeat('ab', 32)
          WHERE tx_id = $1",
    )
    .bind(allocated)
    .execute(&mut *tx)
    .await
    .expect("accept");
    let row = sqlx::query(
        "SELECT pg_stat_get_xact_tuples_updated('managed_tx'::regclass) AS updated,
                pg_stat_get_xact_tuples_hot_updated('managed_tx'::regclass) AS hot",
    )
    .fetch_one(&mut *tx)
    .await
    .expect("stats");
    let (updated, hot): (i64, i64) = (row.get("updated"), row.get("hot"));
    assert_eq!((updated, hot), (1, 1), "the acceptance was not HOT");
    tx.commit().await.expect("commit");
}
