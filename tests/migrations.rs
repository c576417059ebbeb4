//! Schema: migrations apply to an empty database, are idempotent, and the
//! CHECK constraints refuse states and shapes the engine never writes.

mod common;

use common::TestDb;
use sqlx::PgPool;
use txmgr_actors::{store, TxState};
use uuid::Uuid;

const SUBMITTER: &str = "0x1111111111111111111111111111111111111111";

async fn insert_tx(pool: &PgPool, state: &str, nonce: Option<i64>) -> Result<Uuid, sqlx::Error> {
    let tx_id = Uuid::new_v4();
    sqlx::query(
        "INSERT INTO managed_tx (tx_id, chain_id, submitter, request_hash, intent, state, nonce)
         VALUES ($1, 31337, $2, $3, '{}'::jsonb, $4, $5)",
    )
    .bind(tx_id)
    .bind(SUBMITTER)
    .bind(vec![0u8; 32])
    .bind(state)
    .bind(nonce)
    .execute(pool)
    .await?;
    Ok(tx_id)
}

fn constraint_of(err: sqlx::Error) -> String {
    match err {
        sqlx::Error::Database(db) => {
            assert_eq!(
                db.code().as_deref(),
                Some("23514"),
                "check_violation expected: {db}"
            );
            db.constraint().unwrap_or_default().to_owned()
        }
        other => panic!("expected a database error, got {other}"),
    }
}

#[tokio::test]
async fn migrations_apply_to_an_empty_database_and_are_idempotent() {
    let db = TestDb::create().await;
    store::migrate(&db.pool).await.expect("first run");
    store::migrate(&db.pool)
        .await
        .expect("second run is a no-op");
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables
          WHERE table_schema = 'public' AND table_name NOT LIKE '\\_sqlx%' ORDER BY 1",
    )
    .fetch_all(&db.pool)
    .await
    .expect("list tables");
    assert_eq!(
        tables,
        [
            "managed_tx",
            "ops_audit",
            "submitter_lease",
            "submitter_nonce_cursor",
            "tx_attempt",
            "tx_completion",
            "txmgr_node"
        ]
    );
    let applied: i64 = sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations")
        .fetch_one(&db.pool)
        .await
        .expect("count");
    assert_eq!(
        applied,
        i64::try_from(store::MIGRATOR.iter().count()).expect("few")
    );
}

#[tokio::test]
async fn concurrent_migrations_from_several_nodes_do_not_conflict() {
    let db = TestDb::create().await;
    let runs: Vec<_> = (0..4)
        .map(|_| {
            let pool = db.pool.clone();
            tokio::spawn(async move { store::migrate(&pool).await })
        })
        .collect();
    for run in runs {
        run.await.expect("task").expect("migrate");
    }
}

#[tokio::test]
async fn every_engine_state_is_storable_and_an_unknown_state_is_refused() {
    let db = TestDb::migrated().await;
    for state in [TxState::Queued, TxState::Rejected, TxState::Cancelled] {
        insert_tx(&db.pool, state.as_str(), None)
            .await
            .expect("storable");
    }
    for (i, state) in [TxState::Allocated, TxState::Tracking, TxState::Stuck]
        .into_iter()
        .enumerate()
    {
        insert_tx(&db.pool, state.as_str(), Some(i as i64))
            .await
            .expect("storable");
    }
    let err = insert_tx(&db.pool, "BOGUS", None)
        .await
        .expect_err("refused");
    assert_eq!(constraint_of(err), "managed_tx_state_check");
    let err = insert_tx(&db.pool, "queued", None)
        .await
        .expect_err("case matters");
    assert_eq!(constraint_of(err), "managed_tx_state_check");
}

#[tokio::test]
async fn nonce_and_receipt_shape_rules_are_enforced() {
    let db = TestDb::migrated().await;
    let err = insert_tx(&db.pool, "QUEUED", Some(1))
        .await
        .expect_err("queued has no nonce");
    assert_eq!(constraint_of(err), "managed_tx_queued_has_no_nonce");
    let err = insert_tx(&db.pool, "TRACKING", None)
        .await
        .expect_err("tracking has a nonce");
    assert_eq!(constraint_of(err), "managed_tx_in_flight_has_nonce");
    let err = insert_tx(&db.pool, "CONFIRMED", Some(3))
        .await
        .expect_err("needs a receipt");
    assert_eq!(constraint_of(err), "managed_tx_final_has_receipt");

    // One nonce per submitter.
    insert_tx(&db.pool, "ALLOCATED", Some(7))
        .await
        .expect("first");
    let err = insert_tx(&db.pool, "ALLOCATED", Some(7))
        .await
        .expect_err("duplicate nonce");
    match err {
        sqlx::Error::Database(db_err) => {
            assert_eq!(db_err.code().as_deref(), Some("23505"));
            assert_eq!(db_err.constraint(), Some("managed_tx_nonce_key"));
        }
        other => panic!("unexpected {other}"),
    }
}

#[tokio::test]
async fn attempt_kind_and_fee_shape_are_checked() {
    let db = TestDb::migrated().await;
    let tx_id = insert_tx(&db.pool, "ALLOCATED", Some(0))
        .await
        .expect("intent");
    let insert = |kind: &'static str, fees: (Option<i64>, Option<i64>, Option<i64>), n: i32| {
        let pool = db.pool.clone();
        async move {
            sqlx::query(
                "INSERT INTO tx_attempt (tx_id, attempt_no, nonce, tx_hash, raw_tx, max_fee_per_gas,
                     max_priority_fee_per_gas, gas_price, gas_limit, kind, fencing_token)
                 VALUES ($1, $2, 0, $3, '\\x01', $4, $5, $6, 21000, $7, 1)",
            )
            .bind(tx_id)
            .bind(n)
            .bind(format!("0x{:064x}", n))
            .bind(fees.0)
            .bind(fees.1)
            .bind(fees.2)
            .bind(kind)
            .execute(&pool)
            .await
        }
    };
    insert("original", (Some(2), Some(1), None), 1)
        .await
        .expect("1559 attempt");
    insert("bump", (None, None, Some(5)), 2)
        .await
        .expect("legacy attempt");
    let err = insert("replay", (Some(2), Some(1), None), 3)
        .await
        .expect_err("bad kind");
    assert_eq!(constraint_of(err), "tx_attempt_kind_check");
    let err = insert("cancel", (Some(2), None, Some(3)), 4)
        .await
        .expect_err("mixed fees");
    assert_eq!(constraint_of(err), "tx_attempt_fee_shape");
}

#[tokio::test]
async fn completion_rows_record_the_writing_transaction_id() {
    let db = TestDb::migrated().await;
    let tx_id = insert_tx(&db.pool, "REJECTED", None).await.expect("intent");
    let mut tx = db.pool.begin().await.expect("begin");
    let own: String = sqlx::query_scalar("SELECT pg_current_xact_id()::text")
        .fetch_one(&mut *tx)
        .await
        .expect("xid");
    let stored: String = sqlx::query_scalar(
        "INSERT INTO tx_completion (tx_id, chain_id, submitter, state)
         VALUES ($1, 31337, $2, 'REJECTED') RETURNING xid::text",
    )
    .bind(tx_id)
    .bind(SUBMITTER)
    .fetch_one(&mut *tx)
    .await
    .expect("insert");
    tx.commit().await.expect("commit");
    assert_eq!(stored, own);
    let err = sqlx::query(
        "INSERT INTO tx_completion (tx_id, chain_id, submitter, state) VALUES ($1, 31337, $2, 'TRACKING')",
    )
    .bind(tx_id)
    .bind(SUBMITTER)
    .execute(&db.pool)
    .await
    .expect_err("not a completion state");
    assert_eq!(constraint_of(err), "tx_completion_state_check");
}
