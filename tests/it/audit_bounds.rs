//! Audit rows are bounded (README "Operations" and "Completion feed"): the
//! ops transaction view shows an intent's newest audit rows with their
//! count, and `feed.audit_retain` deletes old `ops_audit` rows — never those
//! of an intent still open.

use std::time::Duration;

use serde_json::Value;
use uuid::Uuid;

use crate::common::{
    daemon::{key_var, Daemon, DEV_KEYS},
    free_port,
    node::{config_toml, TestNode},
    txs::{create_transfer, create_transfer_at, wait_state},
    wait_until, Anvil, TestDb,
};

const WAIT: Duration = Duration::from_secs(30);

/// `n` audit rows of `tx_id` (or node-wide without one), `days_ago` days
/// old, one second apart, reasons `r0`… oldest first.
async fn audit_rows(db: &TestDb, tx_id: Option<Uuid>, n: i32, days_ago: i32) {
    sqlx::query(
        "INSERT INTO ops_audit (at, actor, action, reason, tx_id, outcome)
         SELECT now() - make_interval(days => $3) - make_interval(secs => $2 - i),
                'svc', 'tx_rebroadcast', 'r' || (i - 1), $1, 'done'
           FROM generate_series(1, $2) AS i",
    )
    .bind(tx_id)
    .bind(n)
    .bind(days_ago)
    .execute(&db.pool)
    .await
    .expect("audit rows");
}

async fn count(db: &TestDb, sql: &str, tx_id: Option<Uuid>) -> i64 {
    sqlx::query_scalar(sql)
        .bind(tx_id)
        .fetch_one(&db.pool)
        .await
        .expect("count")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_transaction_view_shows_the_newest_audit_rows_and_their_count() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let node = TestNode::start(&config_toml(&db.url, &anvil.rpc_url(), "n1", "")).await;
    let tx_id = create_transfer(&node, "many-actions", 1).await;
    audit_rows(&db, Some(tx_id), 130, 0).await;

    let (status, view) = node
        .request("GET", &format!("/v1/ops/transactions/{tx_id}"), None)
        .await;
    assert_eq!(status, 200, "{view}");
    let reasons: Vec<&str> = view["audit"]
        .as_array()
        .expect("audit")
        .iter()
        .map(|row| row["reason"].as_str().unwrap_or_default())
        .collect();
    let newest: Vec<String> = (80..130).map(|i| format!("r{i}")).collect();
    assert_eq!(reasons, newest, "the newest 50, oldest first");
    assert_eq!(view["audit_total"], Value::from(130));
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn old_audit_rows_go_except_those_of_an_open_intent() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let port = free_port();
    let toml = format!(
        r#"node_id = "n1"
[database]
url = "{db_url}"
max_connections = 8
[http]
listen = "127.0.0.1:{port}"
[chain]
rpc_url = "{rpc_url}"
chain_id = 31337
poll_interval = "200ms"
[defaults]
max_in_flight = 1
[submitters."{address}"]
signer = {{ kind = "env", env = "{key}" }}
[feed]
audit_retain = "30days"
"#,
        db_url = db.url,
        rpc_url = anvil.rpc_url(),
        address = DEV_KEYS[0].1,
        key = key_var(0),
    );
    let mut daemon = Daemon::start("n1", port, &toml).await;
    let client = reqwest::Client::new();
    daemon.ready(&client).await;
    // One intent stays open (nothing is mined); the next waits QUEUED
    // behind it and is cancelled (final).
    let open = create_transfer_at(&client, &daemon.base(), "open").await;
    wait_state(&db.pool, open, "TRACKING", WAIT).await;
    let done = create_transfer_at(&client, &daemon.base(), "done").await;
    let answer = client
        .post(format!("{}/v1/transactions/{done}/cancel", daemon.base()))
        .header("content-type", "application/json")
        .send()
        .await
        .expect("cancel");
    assert_eq!(answer.status(), 202);
    wait_state(&db.pool, done, "CANCELLED", WAIT).await;
    audit_rows(&db, Some(open), 3, 40).await;
    audit_rows(&db, Some(done), 3, 40).await;
    audit_rows(&db, None, 3, 40).await;

    // The retention pass runs at start, then every minute.
    daemon.stop().await;
    daemon.restart();
    daemon.ready(&client).await;
    let old = "SELECT count(*) FROM ops_audit WHERE at < now() - interval '30 days'
                 AND tx_id IS NOT DISTINCT FROM $1";
    wait_until(WAIT, || async {
        count(&db, old, Some(done)).await == 0 && count(&db, old, None).await == 0
    })
    .await;
    assert_eq!(
        count(&db, old, Some(open)).await,
        3,
        "the open intent's rows stay"
    );
    let recent =
        "SELECT count(*) FROM ops_audit WHERE tx_id = $1 AND at > now() - interval '1 day'";
    assert_eq!(
        count(&db, recent, Some(done)).await,
        1,
        "the cancel's own row stays"
    );
    daemon.stop().await;
}
