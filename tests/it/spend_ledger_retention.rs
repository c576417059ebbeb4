//! The spend ledger's retention (README "Guardrails", issue 47): a ledger
//! row is never deleted while any node's configured spend window could
//! still count it, whatever each node's `feed.retain` and whatever a reload
//! changed; `feed.retain = "0s"` (keep the feed forever) still allows a
//! spend limit and still prunes the ledger.
//!
//! Each test plants a ledger row far older than every window (the next
//! prune round must delete it: that is how the test knows a round ran) next
//! to a live row inside the longest window, then waits for the old row to
//! go and looks for the live one.

use std::time::Duration;

use serde_json::json;
use txmgr_actors::store::spend_retention;

use crate::common::{
    cluster::{Cluster, ClusterSpec, SINK},
    wait_until, Anvil, TestDb,
};

/// A spend limit far above what the tests send, over `window`.
fn policy(window: &str) -> String {
    format!("\n[defaults.policy]\nspend_limit = {{ value = \"1000000\", window = \"{window}\" }}\n")
}

fn feed(retain: &str) -> String {
    format!("\n[feed]\nretain = \"{retain}\"\n")
}

fn spec() -> ClusterSpec {
    ClusterSpec {
        nodes: vec![],
        submitters: vec![0],
        strict: vec![],
        node_extra: "",
        confirmations: 1,
    }
}

/// Creates a transfer through `base` and waits for its ledger row; then
/// dates that row `minutes_ago` back (a row the window still counts) and
/// plants one three hours old (outside every window of these tests).
/// Returns the live row's id.
async fn live_and_stale_rows(cluster: &Cluster, base: &str, minutes_ago: i32) -> uuid::Uuid {
    let body = json!({"submitter": cluster.submitters[0], "to": SINK, "value": "5",
                      "request_id": "counted"});
    let response = cluster
        .client
        .post(format!("{base}/v1/transactions"))
        .json(&body)
        .send()
        .await
        .expect("create");
    assert_eq!(response.status().as_u16(), 202);
    cluster
        .db
        .wait_count("SELECT count(*) FROM spend_ledger", 1)
        .await;
    let live: uuid::Uuid = sqlx::query_scalar(
        "UPDATE spend_ledger SET at = now() - make_interval(mins => $1) RETURNING tx_id",
    )
    .bind(minutes_ago)
    .fetch_one(&cluster.db.pool)
    .await
    .expect("date the live row");
    plant_stale_row(&cluster.db).await;
    live
}

async fn plant_stale_row(db: &TestDb) {
    sqlx::query(
        "INSERT INTO spend_ledger (tx_id, chain_id, submitter, value, at)
         VALUES ('00000000-0000-0000-0000-00000000057a', 31337, '0x0', 1, now() - interval '3 hours')",
    )
    .execute(&db.pool)
    .await
    .expect("stale row");
}

/// Waits (up to `within`) until a prune round deleted the stale row, then
/// asserts the live row is still there.
async fn assert_round_kept(db: &TestDb, live: uuid::Uuid, within: Duration) {
    wait_until(within, || async {
        db.count("SELECT count(*) FROM spend_ledger WHERE tx_id = '00000000-0000-0000-0000-00000000057a'")
            .await
            == 0
    })
    .await;
    let kept: i64 = sqlx::query_scalar("SELECT count(*) FROM spend_ledger WHERE tx_id = $1")
        .bind(live)
        .fetch_one(&db.pool)
        .await
        .expect("count");
    assert_eq!(
        kept, 1,
        "a ledger row 10 minutes old was deleted while a 1 h spend window counts it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_with_a_short_feed_retention_keeps_the_ledger_rows_another_nodes_window_counts() {
    let anvil = Anvil::start().await;
    let mut cluster = Cluster::start(spec(), anvil, None).await;
    // n2 counts 1 h windows and keeps its feed 2 h.
    let n2 = cluster
        .add_node_with("n2", |c| c + &policy("1h") + &feed("2h"))
        .await;
    let base = cluster.daemons[n2].base();
    let live = live_and_stale_rows(&cluster, &base, 10).await;
    // n1 keeps its feed 1 min (its own window fits in that); its first
    // prune round runs as it starts.
    cluster
        .add_node_with("n1", |c| c + &policy("1m") + &feed("1m"))
        .await;
    assert_round_kept(&cluster.db, live, Duration::from_secs(30)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reload_that_lengthens_a_window_keeps_the_rows_the_new_window_counts() {
    let anvil = Anvil::start().await;
    let mut cluster = Cluster::start(spec(), anvil, None).await;
    let n1 = cluster
        .add_node_with("n1", |c| c + &policy("5m") + &feed("5m"))
        .await;
    // The window grows to 1 h, and `feed.retain` with it in the file (the
    // file is checked as a whole; `[feed]` itself needs a restart).
    cluster.daemons[n1].edit_config(|c| {
        c.replace("window = \"5m\"", "window = \"1h\"")
            .replace("retain = \"5m\"", "retain = \"2h\"")
    });
    let base = cluster.daemons[n1].base();
    let response = cluster
        .client
        .post(format!("{base}/v1/ops/reload"))
        .json(&json!({}))
        .send()
        .await
        .expect("reload");
    let status = response.status().as_u16();
    let report: serde_json::Value = response.json().await.expect("report");
    assert_eq!(status, 200, "{report}");
    let live = live_and_stale_rows(&cluster, &base, 10).await;
    // The node's next round comes within a minute of its start.
    assert_round_kept(&cluster.db, live, Duration::from_secs(90)).await;
    // A reload that shortens it registers the shorter window.
    cluster.daemons[n1].edit_config(|c| c.replace("window = \"1h\"", "window = \"5m\""));
    let response = cluster
        .client
        .post(format!("{base}/v1/ops/reload"))
        .json(&json!({}))
        .send()
        .await
        .expect("reload");
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(
        spend_retention::horizon(&cluster.db.pool)
            .await
            .expect("horizon"),
        Some(Duration::from_secs(300))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn keeping_the_feed_forever_allows_a_spend_limit_and_still_prunes_the_ledger() {
    let anvil = Anvil::start().await;
    let mut cluster = Cluster::start(spec(), anvil, None).await;
    plant_stale_row(&cluster.db).await;
    cluster
        .add_node_with("n1", |c| c + &policy("1h") + &feed("0s"))
        .await;
    cluster
        .db
        .wait_count("SELECT count(*) FROM spend_ledger", 0)
        .await;
    assert_eq!(
        spend_retention::horizon(&cluster.db.pool)
            .await
            .expect("horizon"),
        Some(Duration::from_secs(3600))
    );
}
