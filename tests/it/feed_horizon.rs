//! The feed's horizon is per database (README "Completion feed", migration
//! `20261206000002`): a transaction held open in another database on the
//! same server does not hold `GET /v1/completions` back; one held open in
//! ours still does (the never-skip guarantee).

use std::time::Duration;

use sqlx::Connection;
use tokio::time::Instant;
use txmgr_actors::store::completions::{self, FeedCursor};

use crate::{
    common::TestDb,
    completions::{complete, CHAIN, POLL_INTERVAL},
};

/// Well below the minute the other database's transaction stays open.
const SERVED_WITHIN: Duration = Duration::from_secs(10);

/// A connection to `db` inside a transaction that holds a transaction id
/// (as a writer does), left open until it is dropped or ended.
async fn open_writer(url: &str) -> sqlx::PgConnection {
    let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
    sqlx::query("BEGIN")
        .execute(&mut conn)
        .await
        .expect("begin");
    sqlx::query("SELECT pg_current_xact_id()")
        .execute(&mut conn)
        .await
        .expect("take a transaction id");
    conn
}

/// Rows served from the start of the feed.
async fn served(db: &TestDb) -> Vec<uuid::Uuid> {
    let (rows, _) = completions::read(&db.pool, None::<FeedCursor>, 100)
        .await
        .expect("read feed");
    rows.into_iter().filter_map(|row| row.tx_id).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_transaction_in_another_database_does_not_hold_the_feed_back() {
    let db = TestDb::migrated().await;
    let other = TestDb::create().await;
    let mut long = open_writer(&other.url).await;
    let started = Instant::now();
    let tx_id = complete(&db.pool, CHAIN, None).await;
    // Served while the other database's transaction is still open.
    let deadline = Instant::now() + SERVED_WITHIN;
    while !served(&db).await.contains(&tx_id) {
        assert!(
            Instant::now() < deadline,
            "a transaction open in another database held the feed back for {SERVED_WITHIN:?}"
        );
        tokio::time::sleep(POLL_INTERVAL).await;
    }
    eprintln!("served after {:?}", started.elapsed());
    let still_open: bool =
        sqlx::query_scalar("SELECT pg_current_xact_id_if_assigned() IS NOT NULL")
            .fetch_one(&mut long)
            .await
            .expect("the long transaction");
    assert!(
        still_open,
        "the other database's transaction was open throughout"
    );
    sqlx::query("ROLLBACK")
        .execute(&mut long)
        .await
        .expect("end");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_transaction_in_our_database_still_holds_the_feed_back() {
    let db = TestDb::migrated().await;
    let mut long = open_writer(&db.url).await;
    // Committed after the long transaction took its id: served only once
    // that transaction ends, since it could still write a row before it.
    let tx_id = complete(&db.pool, CHAIN, None).await;
    for _ in 0..20 {
        assert!(
            !served(&db).await.contains(&tx_id),
            "a row was served past a transaction of our database still open"
        );
    }
    sqlx::query("COMMIT").execute(&mut long).await.expect("end");
    let deadline = Instant::now() + SERVED_WITHIN;
    while !served(&db).await.contains(&tx_id) {
        assert!(
            Instant::now() < deadline,
            "not served after the transaction ended"
        );
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}
