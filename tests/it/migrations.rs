//! Schema: migrations apply to an empty database, are idempotent, and the
//! CHECK constraints refuse states and shapes the engine never writes.

use std::{collections::BTreeSet, path::PathBuf};

use crate::common::TestDb;
use sqlx::{migrate::Migrator, PgPool};
use txmgr_actors::{store, SubState, TxState};
use uuid::Uuid;

const SUBMITTER: &str = "0x1111111111111111111111111111111111111111";

/// The migration that closed the set of sub-states.
const SUB_STATE_CHECK_VERSION: i64 = 20261128000001;

/// Every sub-state any version of txmgr wrote before the set was closed (from
/// the git history of the engine's SQL and of the sub-states passed from
/// Rust), spelled as stored: written here, not taken from `SubState`, so a
/// renamed variant cannot hide a value old rows still hold.
const SUB_STATES_EVER_WRITTEN: [&str; 14] = [
    "awaiting_receipt",
    "mined",
    "reorged",
    "fee_bumped",
    "cancelling",
    "fee_cap_reached",
    "cancel_at_fee_cap",
    "stuck_stuck_after",
    "stuck_max_resubmits",
    "nonce_consumed_externally",
    "cancelled_by_operator",
    "requeued_by_operator",
    "filler",
    "filler_not_included",
];

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

/// A QUEUED intent with `sub_state`.
async fn insert_with_sub_state(
    pool: &PgPool,
    sub_state: Option<&str>,
) -> Result<Uuid, sqlx::Error> {
    let tx_id = Uuid::new_v4();
    sqlx::query(
        "INSERT INTO managed_tx (tx_id, chain_id, submitter, request_hash, intent, state, sub_state)
         VALUES ($1, 31337, $2, $3, '{}'::jsonb, 'QUEUED', $4)",
    )
    .bind(tx_id)
    .bind(SUBMITTER)
    .bind(vec![0u8; 32])
    .bind(sub_state)
    .execute(pool)
    .await?;
    Ok(tx_id)
}

/// Applies the migrations older than `version`, as a database last migrated
/// by an older release has them: the same files, so the current migrator
/// finds them applied.
pub(crate) async fn migrate_before(pool: &PgPool, version: i64) {
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("migrations");
    let older = std::env::temp_dir().join(format!("txmgr-migrations-{}", Uuid::new_v4().simple()));
    std::fs::create_dir(&older).expect("temp dir");
    for entry in std::fs::read_dir(&source).expect("migrations dir") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .expect("file name");
        let file_version: i64 = name
            .split('_')
            .next()
            .and_then(|v| v.parse().ok())
            .expect("versioned file name");
        if file_version < version {
            std::fs::copy(&path, older.join(name)).expect("copy migration");
        }
    }
    let migrator = Migrator::new(older.as_path())
        .await
        .expect("older migrations");
    let result = migrator.run(pool).await;
    std::fs::remove_dir_all(&older).ok();
    result.expect("older migrations apply");
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
            "funds_top_up",
            "history_retention",
            "managed_tx",
            "ops_audit",
            "spend_ledger",
            "spend_ledger_horizon",
            "submitter_funds",
            "submitter_lease",
            "submitter_nonce_cursor",
            "submitter_pause",
            "tx_attempt",
            "tx_completion",
            "txmgr_node",
            "webhook_cursor",
            "webhook_dead_letter",
            "webhook_done"
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

#[tokio::test]
async fn the_sub_state_check_holds_exactly_the_engine_sub_states() {
    let db = TestDb::migrated().await;
    for sub_state in SubState::ALL {
        insert_with_sub_state(&db.pool, Some(sub_state.as_str()))
            .await
            .unwrap_or_else(|e| panic!("{sub_state} is storable: {e}"));
    }
    insert_with_sub_state(&db.pool, None)
        .await
        .expect("no sub-state is storable");
    // Lower-case names the older pattern check lets through.
    for unknown in ["final", "stuck_after", "bogus"] {
        let err = insert_with_sub_state(&db.pool, Some(unknown))
            .await
            .expect_err(unknown);
        assert_eq!(
            constraint_of(err),
            "managed_tx_sub_state_known",
            "{unknown}"
        );
    }
    // And it lists nothing the engine cannot read back.
    let definition: String = sqlx::query_scalar(
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint
          WHERE conname = 'managed_tx_sub_state_known'",
    )
    .fetch_one(&db.pool)
    .await
    .expect("constraint");
    let listed: BTreeSet<&str> = definition.split('\'').skip(1).step_by(2).collect();
    let engine: BTreeSet<&str> = SubState::ALL.iter().map(|s| s.as_str()).collect();
    assert_eq!(listed, engine, "{definition}");
}

#[tokio::test]
async fn rows_of_older_releases_pass_the_sub_state_check() {
    let db = TestDb::create().await;
    migrate_before(&db.pool, SUB_STATE_CHECK_VERSION).await;
    for value in SUB_STATES_EVER_WRITTEN {
        insert_with_sub_state(&db.pool, Some(value))
            .await
            .unwrap_or_else(|e| panic!("{value} was storable before: {e}"));
    }
    insert_with_sub_state(&db.pool, None)
        .await
        .expect("no sub-state");
    store::migrate(&db.pool)
        .await
        .expect("every value an older release wrote passes");
    let valid: bool = sqlx::query_scalar(
        "SELECT convalidated FROM pg_constraint WHERE conname = 'managed_tx_sub_state_known'",
    )
    .fetch_one(&db.pool)
    .await
    .expect("constraint");
    assert!(valid, "the existing rows were checked");
}

#[tokio::test]
async fn a_sub_state_no_release_wrote_stops_the_migration_by_name() {
    let db = TestDb::create().await;
    migrate_before(&db.pool, SUB_STATE_CHECK_VERSION).await;
    insert_with_sub_state(&db.pool, Some("final"))
        .await
        .expect("the older pattern check lets it through");
    let err = store::migrate(&db.pool)
        .await
        .expect_err("an unknown sub-state is not silently kept");
    assert!(
        err.to_string().contains("managed_tx_sub_state_known"),
        "{err}"
    );
}

/// Every index of `managed_tx` costs WAL and CPU on the inserts and on the
/// updates that are not in place (README "Benchmark"): the list is fixed
/// here, so adding one is a choice a test names. The queue read is one
/// range of the open-work index, in acceptance order, with no sort.
#[tokio::test]
async fn managed_tx_has_its_index_set_and_the_queue_read_is_one_index_range() {
    let db = TestDb::migrated().await;
    let indexes: Vec<String> = sqlx::query_scalar(
        "SELECT indexname::text FROM pg_indexes WHERE tablename = 'managed_tx' ORDER BY 1",
    )
    .fetch_all(&db.pool)
    .await
    .expect("list indexes");
    assert_eq!(
        indexes,
        [
            "managed_tx_final_block_idx",
            "managed_tx_listing_idx",
            "managed_tx_mined_idx",
            "managed_tx_nonce_key",
            "managed_tx_open_idx",
            "managed_tx_pkey",
            "managed_tx_request_id_key",
            "managed_tx_resubmit_idx",
        ]
    );
    for (state, nonce) in [("QUEUED", None), ("QUEUED", None), ("TRACKING", Some(0))] {
        insert_tx(&db.pool, state, nonce).await.expect("insert");
    }
    let mut conn = db.pool.acquire().await.expect("connection");
    // A table this small is read whole unless told otherwise; the question
    // is whether the index gives the order.
    sqlx::query("SET enable_seqscan = off")
        .execute(&mut *conn)
        .await
        .expect("set");
    sqlx::query("SET enable_bitmapscan = off")
        .execute(&mut *conn)
        .await
        .expect("set");
    let plan: Vec<String> = sqlx::query_scalar(
        "EXPLAIN (COSTS OFF) SELECT tx_id FROM managed_tx
          WHERE chain_id = 31337 AND submitter = $1 AND state = 'QUEUED' AND phase = 0
          ORDER BY ingress_seq LIMIT 64",
    )
    .bind(SUBMITTER)
    .fetch_all(&mut *conn)
    .await
    .expect("explain");
    let plan = plan.join("\n");
    assert!(
        plan.contains("Index Scan using managed_tx_open_idx") && !plan.contains("Sort"),
        "the queue read is not one ordered range of the open-work index:\n{plan}"
    );
}

#[tokio::test]
async fn an_attempt_is_found_by_its_hash_whatever_hour_it_was_signed_in() {
    let db = TestDb::migrated().await;
    let old = insert_tx(&db.pool, "TRACKING", Some(0))
        .await
        .expect("intent");
    let new = insert_tx(&db.pool, "TRACKING", Some(1))
        .await
        .expect("intent");
    // The two hashes share their first 8 bytes, the part the index keys:
    // the full text tells them apart.
    let prefix = "0x0123456789abcdef";
    let old_hash = format!("{prefix}{:048x}", 1);
    let new_hash = format!("{prefix}{:048x}", 2);
    let insert = |tx_id: Uuid, nonce: i64, hash: String, age_hours: i32| {
        let pool = db.pool.clone();
        async move {
            sqlx::query(
                "INSERT INTO tx_attempt (tx_id, attempt_no, nonce, tx_hash, raw_tx, max_fee_per_gas,
                     max_priority_fee_per_gas, gas_limit, kind, fencing_token, created_at)
                 VALUES ($1, 1, $2, $3, '\\x01', 2, 1, 21000, 'original', 1,
                         now() - $4 * interval '1 hour')",
            )
            .bind(tx_id)
            .bind(nonce)
            .bind(hash)
            .bind(age_hours)
            .execute(&pool)
            .await
            .expect("attempt")
        }
    };
    insert(old, 0, old_hash.clone(), 40 * 24).await;
    insert(new, 1, new_hash.clone(), 0).await;
    let find = |hash: String| {
        let pool = db.pool.clone();
        async move {
            store::tx_query::find_by_attempt_hash(&pool, &hash)
                .await
                .expect("lookup")
        }
    };
    assert_eq!(find(old_hash.clone()).await, Some(old));
    assert_eq!(find(new_hash.clone()).await, Some(new));
    assert_eq!(find(format!("{prefix}{:048x}", 3)).await, None);
    assert_eq!(find(format!("0x{:064x}", 7)).await, None);
    // Not a hash at all: no attempt, not a failed cast.
    for not_a_hash in ["0x12", "", "0xzz", &format!("{prefix}{:047x}", 1)] {
        assert_eq!(find(not_a_hash.to_owned()).await, None, "{not_a_hash}");
    }
    // An attempt stamped ahead of the clock (a fail-over to a server whose
    // clock is behind) is still found: the range ends at the newest hour.
    let ahead = insert_tx(&db.pool, "TRACKING", Some(2))
        .await
        .expect("intent");
    let ahead_hash = format!("0x{:064x}", 9);
    insert(ahead, 2, ahead_hash.clone(), -3).await;
    assert_eq!(find(ahead_hash).await, Some(ahead));

    // The index the lookup probes, ordered by hour so inserts stay at its
    // right edge (migration 20261207000001); no index keyed by the hash
    // alone is left for an insert to land at random in.
    let indexes: Vec<String> = sqlx::query_scalar(
        "SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = 'tx_attempt'::regclass",
    )
    .fetch_all(&db.pool)
    .await
    .expect("indexes");
    assert_eq!(indexes.len(), 2, "{indexes:?}");
    assert!(
        indexes.iter().any(|d| d.contains("tx_attempt_pkey")),
        "{indexes:?}"
    );
    assert!(
        indexes
            .iter()
            .any(|d| d.contains("tx_attempt_hash_by_hour") && d.contains("date_trunc('hour'")),
        "{indexes:?}"
    );
    let mut conn = db.pool.acquire().await.expect("connection");
    sqlx::query("SET enable_seqscan = off")
        .execute(&mut *conn)
        .await
        .expect("set");
    // The query of store::tx_query::find_by_attempt_hash.
    let plan: Vec<String> = sqlx::query_scalar(
        "EXPLAIN (COSTS OFF) SELECT tx_id FROM tx_attempt
          WHERE date_trunc('hour', created_at AT TIME ZONE 'UTC') = ANY (ARRAY(
                    SELECT generate_series(
                        GREATEST((SELECT min(date_trunc('hour', created_at AT TIME ZONE 'UTC'))
                                    FROM tx_attempt),
                                 timestamp '2015-07-30'),
                        LEAST((SELECT max(date_trunc('hour', created_at AT TIME ZONE 'UTC'))
                                 FROM tx_attempt),
                              date_trunc('hour', now() AT TIME ZONE 'UTC') + interval '1 day'),
                        interval '1 hour')))
            AND ('x' || substr(tx_hash, 3, 16))::bit(64)::bigint
                = ('x' || substr($1::text, 3, 16))::bit(64)::bigint
            AND tx_hash = $1
          LIMIT 1",
    )
    .bind(&new_hash)
    .fetch_all(&mut *conn)
    .await
    .expect("explain");
    let plan = plan.join("\n");
    // Both key columns in the index condition: the hours probed and the
    // hash's first 8 bytes (the min/max reads use the index too, so its
    // name alone proves nothing).
    assert!(
        plan.lines()
            .any(|l| l.contains("Index Cond") && l.contains("= ANY") && l.contains("::bigint =")),
        "the lookup by hash does not probe the hourly index by hour and hash:\n{plan}"
    );
    assert!(!plan.contains("Seq Scan"), "{plan}");
}
