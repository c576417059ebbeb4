//! The daemon's database sessions are bounded: a session left idle inside a
//! transaction (a node frozen by SIGSTOP, or cut off, mid fenced write) is
//! ended by the server after the lease duration, so the `FOR SHARE` lock on
//! a lease row cannot block a take-over until TCP gives up.

use std::time::Duration;

use crate::common::{node::config_toml, wait_until, TestDb};
use sqlx::Connection;
use txmgr::config::Config;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_idle_in_a_transaction_is_ended_after_the_lease_duration() {
    let db = TestDb::migrated().await;
    let toml = config_toml(&db.url, "http://127.0.0.1:9", "n1", "")
        .replace("duration = \"3s\"", "duration = \"1s\"")
        .replace("renew_interval = \"1s\"", "renew_interval = \"300ms\"")
        .replace(
            "clock_skew_allowance = \"500ms\"",
            "clock_skew_allowance = \"200ms\"",
        );
    let config = Config::from_toml_str(&toml, std::iter::empty::<(String, String)>())
        .unwrap_or_else(|e| panic!("test config invalid:\n{e}"));
    let pool = txmgr::daemon::connect(&config).await.expect("pool");
    let mut conn = pool.acquire().await.expect("connection");
    let setting: String = sqlx::query_scalar("SHOW idle_in_transaction_session_timeout")
        .fetch_one(&mut *conn)
        .await
        .expect("setting");
    assert_eq!(setting, "1s");

    let mut tx = conn.begin().await.expect("begin");
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut *tx)
        .await
        .expect("pid");
    // The transaction now idles, as a frozen node's would.
    wait_until(Duration::from_secs(10), || async {
        let alive: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)")
                .bind(pid)
                .fetch_one(&db.pool)
                .await
                .unwrap_or(true);
        !alive
    })
    .await;
    let after = sqlx::query_scalar::<_, i32>("SELECT 1")
        .fetch_one(&mut *tx)
        .await;
    assert!(after.is_err(), "the ended session must not run statements");
}
