//! History retention seen from outside (README "Idempotency", "Operations"):
//! a removed intent reads as 404 `aged_out` and its request id may be used
//! again, two real daemons share the work and export its metrics, and
//! `txmgr db stats` prints the tables and the retention's progress.

use std::time::Duration;

use serde_json::json;
use txmgr_actors::store::history_retention::{self, RetentionRules, Round, BATCH};
use uuid::Uuid;

use crate::{
    common::{
        daemon::{key_var, Daemon, DEV_KEYS},
        free_port,
        node::{config_toml, TestNode},
        txs::{create_transfer, wait_state},
        wait_until, Anvil, TestDb, DEV,
    },
    history_retention::{exists, history},
};

const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_removed_intent_reads_as_aged_out_and_its_request_id_can_be_used_again() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let node = TestNode::start(&config_toml(&db.url, &anvil.rpc_url(), "n1", "")).await;
    let first = create_transfer(&node, "order-7", 1).await;
    wait_until(WAIT, || async {
        anvil.mine().await;
        crate::common::txs::intent(&db.pool, first).await.state == "CONFIRMED"
    })
    .await;
    // A second of retention (the pass's cutoff is a second ago).
    let short = RetentionRules {
        retain: Duration::from_secs(1),
        audit_retain: Duration::ZERO,
        max_batches: 10,
    };
    wait_until(WAIT, || async {
        history_retention::round(&db.pool, "n1", short)
            .await
            .expect("round");
        !exists(&db, first).await
    })
    .await;
    // The pass that removed it may still be open: finish it.
    wait_until(WAIT, || async {
        matches!(
            history_retention::round(&db.pool, "n1", short)
                .await
                .expect("round"),
            Round::Ran {
                pass_completed: true,
                ..
            }
        ) && history_retention::aged_out(&db.pool, first)
            .await
            .expect("aged")
    })
    .await;

    let (status, body) = node
        .request("GET", &format!("/v1/transactions/{first}"), None)
        .await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["code"], "aged_out", "{body}");
    let (status, body) = node
        .request("GET", &format!("/v1/ops/transactions/{first}"), None)
        .await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["code"], "aged_out", "{body}");
    // An id made now was never removed: plain not_found.
    let (status, body) = node
        .request("GET", &format!("/v1/transactions/{}", Uuid::now_v7()), None)
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("not_found")),
        "{body}"
    );

    // The request id is free again: a new intent, not a replay.
    let (status, body) = node
        .request(
            "POST",
            "/v1/transactions",
            Some(json!({"submitter": DEV, "to": DEV, "value": "1", "request_id": "order-7"})),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let second: Uuid = body["tx_id"]
        .as_str()
        .and_then(|id| id.parse().ok())
        .expect("tx_id");
    assert_ne!(second, first, "a new intent under the old request id");
    wait_state(&db.pool, second, "TRACKING", WAIT).await;

    // The ops database view shows the pass and the tables.
    let (status, body) = node.request("GET", "/v1/ops/database", None).await;
    assert_eq!(status, 200, "{body}");
    assert!(body["retention"]["completed_cutoff"].is_string(), "{body}");
    assert!(
        body["retention"]["removed_total"].as_i64() >= Some(1),
        "{body}"
    );
    let tables: Vec<&str> = body["tables"]
        .as_array()
        .expect("tables")
        .iter()
        .filter_map(|t| t["table"].as_str())
        .collect();
    assert!(
        tables.contains(&"managed_tx") && tables.contains(&"tx_attempt"),
        "{body}"
    );
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_daemons_remove_old_history_and_report_it() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let old = history(&db, 3 * BATCH, "CONFIRMED", 40, 0).await;
    let young = history(&db, 5, "CONFIRMED", 1, 10_000).await;
    let mut daemons = Vec::new();
    for node_id in ["n1", "n2"] {
        let port = free_port();
        let toml = format!(
            r#"node_id = "{node_id}"
[database]
url = "{db_url}"
max_connections = 8
[http]
listen = "127.0.0.1:{port}"
[chain]
rpc_url = "{rpc_url}"
chain_id = 31337
[submitters."{address}"]
signer = {{ kind = "env", env = "{key}" }}
[history]
retain = "7days"
interval = "1s"
[feed]
retain = "7days"
"#,
            db_url = db.url,
            rpc_url = anvil.rpc_url(),
            address = DEV_KEYS[0].1,
            key = key_var(0),
        );
        daemons.push(Daemon::start(node_id, port, &toml).await);
    }
    let client = reqwest::Client::new();
    for daemon in &daemons {
        daemon.ready(&client).await;
    }
    db.wait_count(
        "SELECT count(*) FROM managed_tx WHERE created_at < now() - interval '30 days'",
        0,
    )
    .await;
    for tx_id in &young {
        assert!(exists(&db, *tx_id).await, "a day-old intent stays");
    }
    assert!(!exists(&db, old[0]).await);
    // The round adds to removed_total after its last batch commits.
    wait_until(WAIT, || async {
        history_retention::status(&db.pool)
            .await
            .is_ok_and(|s| s.removed_total >= old.len() as i64)
    })
    .await;
    let status = history_retention::status(&db.pool).await.expect("status");
    assert_eq!(
        status.removed_total,
        old.len() as i64,
        "each removed once: {status:?}"
    );
    let expected = [
        "txmgr_history_retention_rounds_total",
        "txmgr_history_retain_seconds 604800",
        "txmgr_history_oldest_final_age_seconds",
        "txmgr_db_table_bytes{table=\"managed_tx\"}",
    ];
    let scrape = || async {
        client
            .get(format!("{}/metrics", daemons[0].base()))
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .expect("metrics text")
    };
    // The gauges are refreshed after the round's counters: the status can
    // read complete a moment before the gauges exist.
    wait_until(WAIT, || async {
        let text = scrape().await;
        expected.iter().all(|metric| text.contains(metric))
    })
    .await;
    let text = scrape().await;
    for metric in expected {
        assert!(text.contains(metric), "{metric} missing:\n{text}");
    }
    for daemon in &mut daemons {
        daemon.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn db_stats_prints_the_tables_and_retention() {
    let db = TestDb::migrated().await;
    history(&db, 50, "CONFIRMED", 40, 0).await;
    sqlx::query("ANALYZE")
        .execute(&db.pool)
        .await
        .expect("analyze");
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_txmgr"))
        .args(["db", "stats", "--config"])
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config.toml"))
        .env("TXMGR_DATABASE__URL", &db.url)
        .env_remove("RUST_LOG")
        .output()
        .await
        .expect("run txmgr db stats");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    for expected in [
        "managed_tx",
        "tx_attempt",
        "largest index",
        "bytes per intent",
        "history retention: history.retain = 30days",
        "oldest final intent",
    ] {
        assert!(stdout.contains(expected), "{expected:?} missing:\n{stdout}");
    }
    // The managed_tx line carries the estimated 50 rows after ANALYZE.
    let line = stdout
        .lines()
        .find(|l| l.starts_with("managed_tx "))
        .expect("managed_tx line");
    assert!(line.split_whitespace().nth(1) == Some("50"), "{line}");
}
