//! Proves the shared test harness: isolated databases that are dropped,
//! independent anvils on distinct ports, and polling with deadlines.

use std::time::Duration;

use crate::common::{db::database_url, eventually, parse_quantity, wait_until, Anvil, TestDb};
use serde_json::json;

async fn database_exists(pool: &sqlx::PgPool, name: &str) -> bool {
    sqlx::query_scalar::<_, bool>("select exists(select 1 from pg_database where datname = $1)")
        .bind(name)
        .fetch_one(pool)
        .await
        .expect("querying pg_database")
}

#[tokio::test]
async fn test_databases_are_distinct_and_dropped() {
    let observer = TestDb::create().await;
    let a = TestDb::create().await;
    let b = TestDb::create().await;
    assert_ne!(a.name, b.name);
    assert_ne!(a.url, b.url);

    // Each pool really is connected to its own database.
    for db in [&a, &b] {
        let current: String = sqlx::query_scalar("select current_database()")
            .fetch_one(&db.pool)
            .await
            .expect("current_database");
        assert_eq!(current, db.name);
    }

    // A table in one database is invisible in the other.
    sqlx::query("create table only_in_a (id int)")
        .execute(&a.pool)
        .await
        .expect("create table");
    let in_b: Option<String> = sqlx::query_scalar("select to_regclass('only_in_a')::text")
        .fetch_one(&b.pool)
        .await
        .expect("to_regclass");
    assert_eq!(in_b, None);

    // An extra pool with an open, checked-out connection must not block
    // the drop: WITH (FORCE) ends it.
    let second = a.connect_new_pool().await;
    let _held = second.acquire().await.expect("acquire from second pool");

    let (name_a, name_b) = (a.name.clone(), b.name.clone());
    assert!(database_exists(&observer.pool, &name_a).await);
    drop(a);
    drop(b);
    assert!(!database_exists(&observer.pool, &name_a).await);
    assert!(!database_exists(&observer.pool, &name_b).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrated_database_has_the_schema() {
    let db = TestDb::migrated().await;
    let applied: i64 = sqlx::query_scalar("select count(*) from _sqlx_migrations where success")
        .fetch_one(&db.pool)
        .await
        .expect("reading _sqlx_migrations");
    assert!(applied > 0, "no migrations applied");
}

#[tokio::test]
async fn anvils_run_on_distinct_ports_and_answer() {
    let first = Anvil::start().await;
    let second = Anvil::start_with(&["--no-mining"]).await;
    assert_ne!(first.port(), second.port());
    assert_ne!(first.rpc_url(), second.rpc_url());

    for anvil in [&first, &second] {
        assert_eq!(anvil.rpc("eth_chainId", json!([])).await, json!("0x7a69"));
    }

    // Mining on one chain leaves the other untouched.
    assert_eq!(second.block_number().await, 0);
    second.rpc("evm_mine", json!([])).await;
    second.mine_blocks(2).await;
    assert_eq!(second.block_number().await, 3);
    assert_eq!(first.block_number().await, 0);

    let port = first.port();
    drop(first);
    wait_until(Duration::from_secs(10), || async {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
    })
    .await;
}

#[tokio::test]
async fn eventually_returns_the_first_value() {
    let mut calls = 0;
    let value = eventually(Duration::from_secs(5), Duration::from_millis(1), || {
        calls += 1;
        let ready = calls >= 3;
        async move { ready.then_some(calls) }
    })
    .await;
    assert_eq!(value, 3);
}

#[tokio::test]
#[should_panic(expected = "not met within")]
async fn eventually_panics_at_the_deadline() {
    eventually(
        Duration::from_millis(100),
        Duration::from_millis(10),
        || async { None::<()> },
    )
    .await;
}

#[test]
fn database_url_replaces_only_the_path() {
    assert_eq!(
        database_url("postgres://u@h:5432/postgres", "t1"),
        "postgres://u@h:5432/t1"
    );
    assert_eq!(
        database_url("postgres://u@h:5432/postgres?sslmode=disable", "t1"),
        "postgres://u@h:5432/t1?sslmode=disable"
    );
    assert_eq!(database_url("postgres://u@h", "t1"), "postgres://u@h/t1");
}

#[test]
fn quantities_parse() {
    assert_eq!(parse_quantity(&json!("0x7a69")), 31337);
}
