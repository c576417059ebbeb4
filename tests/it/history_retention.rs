//! History retention (`[history] retain`, README "Data model and leases" and
//! "Idempotency"): final intents older than the period leave with their
//! attempts, feed rows and dead letters, in bounded batches, one node at a
//! time; never an open intent, never a row a live webhook cursor or a young
//! dead letter still needs. A removed intent reads as 404 `aged_out`, and
//! its request id may be used again.

use std::time::Duration;

use serde_json::json;
use txmgr_actors::store::history_retention::{self, RetentionRules, Round, BATCH, ROUND_LOCK};
use uuid::Uuid;

use crate::common::{
    daemon::{key_var, Daemon, DEV_KEYS},
    free_port,
    node::{config_toml, TestNode},
    txs::{create_transfer, wait_state},
    wait_until, Anvil, TestDb, DEV,
};

const MONTH: Duration = Duration::from_secs(30 * 24 * 3600);
const WAIT: Duration = Duration::from_secs(30);
const SUBMITTER: &str = "0x4444444444444444444444444444444444444444";

fn rules(max_batches: u32) -> RetentionRules {
    RetentionRules {
        retain: MONTH,
        audit_retain: MONTH,
        max_batches,
    }
}

/// `n` intents in `state` created and finished `days_ago` days ago (UUIDv7
/// ids of that time, nonces from `first_nonce`), each with one attempt, a
/// feed row when final and an audit row; returns their ids in creation order.
async fn history(db: &TestDb, n: i64, state: &str, days_ago: i32, first_nonce: i64) -> Vec<Uuid> {
    sqlx::query_scalar(
        "WITH made AS (
             SELECT i, now() - make_interval(days => $3) + make_interval(secs => i) AS at
               FROM generate_series(1, $1) AS i),
         ids AS (
             SELECT i, at, encode(set_byte(overlay(uuid_send(gen_random_uuid())
                        PLACING substring(int8send((extract(epoch FROM at) * 1000)::bigint) FROM 3)
                        FROM 1 FOR 6), 6, 112 + (i % 16)::int), 'hex')::uuid AS tx_id
               FROM made),
         intents AS (
             INSERT INTO managed_tx (tx_id, chain_id, submitter, request_id, request_hash, intent,
                                     nonce, state, receipt, receipt_block_number, receipt_block_hash,
                                     mined_tx_hash, created_at, updated_at)
             SELECT tx_id, 31337, $5, 'req-' || tx_id, sha256(tx_id::text::bytea), '{}',
                    CASE WHEN $2 = 'REJECTED' THEN NULL ELSE $4 + i - 1 END, $2,
                    CASE WHEN $2 IN ('CONFIRMED', 'FAILED_FINAL') THEN '{}'::jsonb END,
                    CASE WHEN $2 IN ('CONFIRMED', 'FAILED_FINAL') THEN i END,
                    CASE WHEN $2 IN ('CONFIRMED', 'FAILED_FINAL') THEN '0x' || repeat('a', 64) END,
                    CASE WHEN $2 IN ('CONFIRMED', 'FAILED_FINAL') THEN '0x' || repeat('b', 64) END,
                    at, at
               FROM ids RETURNING tx_id, nonce, created_at),
         attempts AS (
             INSERT INTO tx_attempt (tx_id, attempt_no, nonce, tx_hash, raw_tx, gas_price,
                                     gas_limit, kind, fencing_token, created_at)
             SELECT tx_id, 1, nonce, '0x' || encode(sha256(tx_id::text::bytea), 'hex'), '\\x00',
                    1, 21000, 'original', 1, created_at
               FROM intents WHERE nonce IS NOT NULL),
         feed AS (
             INSERT INTO tx_completion (tx_id, chain_id, submitter, state, completed_at)
             SELECT tx_id, 31337, $5, $2, created_at FROM intents
              WHERE $2 IN ('CONFIRMED', 'FAILED_FINAL', 'CANCELLED', 'REJECTED')),
         audit AS (
             INSERT INTO ops_audit (at, actor, action, tx_id, chain_id, outcome)
             SELECT created_at, 'svc', 'tx_rebroadcast', tx_id, 31337, 'done' FROM intents)
         SELECT tx_id FROM intents ORDER BY tx_id",
    )
    .bind(n)
    .bind(state)
    .bind(days_ago)
    .bind(first_nonce)
    .bind(SUBMITTER)
    .fetch_all(&db.pool)
    .await
    .expect("history rows")
}

async fn exists(db: &TestDb, tx_id: Uuid) -> bool {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM managed_tx WHERE tx_id = $1)")
        .bind(tx_id)
        .fetch_one(&db.pool)
        .await
        .expect("exists")
}

async fn rows_of(db: &TestDb, table: &str, tx_id: Uuid) -> i64 {
    sqlx::query_scalar(&format!("SELECT count(*) FROM {table} WHERE tx_id = $1"))
        .bind(tx_id)
        .fetch_one(&db.pool)
        .await
        .expect("count")
}

/// Rounds until one completes its pass; what they removed.
async fn until_pass_completed(db: &TestDb, max_batches: u32) -> u64 {
    let mut removed = 0;
    for _ in 0..1_000 {
        match history_retention::round(&db.pool, "n1", rules(max_batches))
            .await
            .expect("round")
        {
            Round::Ran {
                removed: r,
                pass_completed,
                ..
            } => {
                removed += r.intents;
                if pass_completed {
                    return removed;
                }
            }
            Round::Skipped => panic!("no other node runs rounds here"),
        }
    }
    panic!("the pass never completed")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_final_intents_leave_with_their_rows_and_nothing_still_needed_does() {
    let db = TestDb::migrated().await;
    // Feed order: the rejected ones' rows first, then old's.
    let rejected = history(&db, 3, "REJECTED", 40, 0).await;
    let old = history(&db, 20, "CONFIRMED", 40, 0).await;
    let open = history(&db, 2, "TRACKING", 40, 20).await;
    let young = history(&db, 3, "CONFIRMED", 10, 22).await;
    // A live webhook (written today) has delivered up to old[14]'s feed row:
    // old[15..] are still to deliver.
    sqlx::query(
        "INSERT INTO webhook_cursor (chain_id, webhook, owner_node, fencing_token, expires_at,
                                     cursor_xid, cursor_seq)
         SELECT 31337, 'live', 'n1', 1, now(), xid, seq FROM tx_completion WHERE tx_id = $1",
    )
    .bind(old[14])
    .execute(&db.pool)
    .await
    .expect("live cursor");
    // old[3] has a dead letter written 35 days ago (it leaves with it);
    // old[4] one written yesterday (an operator may still redeliver it).
    for (tx_id, days) in [(old[3], 35), (old[4], 1)] {
        sqlx::query(
            "INSERT INTO webhook_dead_letter (chain_id, webhook, delivery_id, feed_seq, attempts,
                                              last_error, created_at)
             SELECT 31337, 'live', 'd-' || seq, seq, 3, 'HTTP 500',
                    now() - make_interval(days => $2)
               FROM tx_completion WHERE tx_id = $1",
        )
        .bind(tx_id)
        .bind(days)
        .execute(&db.pool)
        .await
        .expect("dead letter");
    }
    sqlx::query(
        "INSERT INTO submitter_nonce_cursor (chain_id, submitter, next_nonce, fencing_token)
         VALUES (31337, $1, 0, 1)",
    )
    .bind(SUBMITTER)
    .execute(&db.pool)
    .await
    .expect("cursor row");

    let removed = until_pass_completed(&db, 100).await;

    let gone: Vec<Uuid> = old[..15]
        .iter()
        .filter(|id| **id != old[4])
        .chain(&rejected)
        .copied()
        .collect();
    assert_eq!(removed, gone.len() as u64);
    for tx_id in &gone {
        assert!(!exists(&db, *tx_id).await, "{tx_id} should be gone");
        for table in ["tx_attempt", "tx_completion", "ops_audit"] {
            assert_eq!(rows_of(&db, table, *tx_id).await, 0, "{table} of {tx_id}");
        }
    }
    let kept: Vec<Uuid> = [old[4]]
        .iter()
        .chain(&old[15..])
        .chain(&open)
        .chain(&young)
        .copied()
        .collect();
    for tx_id in &kept {
        assert!(exists(&db, *tx_id).await, "{tx_id} should stay");
        assert_eq!(rows_of(&db, "tx_attempt", *tx_id).await, 1);
    }
    assert_eq!(
        db.count("SELECT count(*) FROM webhook_dead_letter").await,
        1,
        "the old dead letter left with its intent, the young one stayed"
    );
    // The nonce floor is past every nonce that left: the derived next
    // nonce never goes back.
    assert!(
        db.count("SELECT next_nonce FROM submitter_nonce_cursor")
            .await
            >= 14,
        "the floor rose past the removed nonces"
    );
    let status = history_retention::status(&db.pool).await.expect("status");
    assert!(status.completed_cutoff.is_some(), "{status:?}");
    assert_eq!(status.removed_total, removed as i64);
    assert_eq!(status.last_round_node.as_deref(), Some("n1"));
    // The oldest final intent still stored: old[4] (its dead letter keeps it).
    assert!(status.oldest_final_created_at.is_some());
    assert!(history_retention::aged_out(&db.pool, old[0])
        .await
        .expect("aged out"));
    assert!(!history_retention::aged_out(&db.pool, Uuid::now_v7())
        .await
        .expect("aged out"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_stops_at_its_bound_and_the_next_goes_on_where_it_stopped() {
    let db = TestDb::migrated().await;
    let total = 2 * BATCH + 300;
    history(&db, total, "CANCELLED", 40, 0).await;
    match history_retention::round(&db.pool, "n1", rules(1))
        .await
        .expect("round")
    {
        Round::Ran {
            removed,
            batches,
            pass_completed,
        } => {
            assert_eq!(batches, 1);
            assert_eq!(removed.intents, BATCH as u64);
            assert!(!pass_completed, "more is left: retention is behind");
        }
        Round::Skipped => panic!("no other node"),
    }
    let status = history_retention::status(&db.pool).await.expect("status");
    assert!(status.pass_cutoff.is_some() && status.completed_cutoff.is_none());
    let rest = until_pass_completed(&db, 1).await;
    assert_eq!(rest, (total - BATCH) as u64);
    assert_eq!(db.count("SELECT count(*) FROM managed_tx").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_node_at_a_time_runs_a_round() {
    let db = TestDb::migrated().await;
    let total = 5 * BATCH;
    history(&db, total, "CONFIRMED", 40, 0).await;
    // Another node's round holds the lock: this one does nothing.
    let mut other = db.pool.acquire().await.expect("connection");
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(ROUND_LOCK)
        .execute(&mut *other)
        .await
        .expect("lock");
    assert_eq!(
        history_retention::round(&db.pool, "n1", rules(100))
            .await
            .expect("round"),
        Round::Skipped
    );
    assert_eq!(db.count("SELECT count(*) FROM managed_tx").await, total);
    sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(ROUND_LOCK)
        .execute(&mut *other)
        .await
        .expect("unlock");
    drop(other);

    // Two nodes (pools) start rounds at once, again and again: every round
    // either ran alone or skipped, and together they removed each intent
    // exactly once.
    let second = db.connect_new_pool().await;
    let mut removed = 0;
    let mut skipped = 0;
    while db.count("SELECT count(*) FROM managed_tx").await > 0 {
        let (a, b) = tokio::join!(
            history_retention::round(&db.pool, "n1", rules(1)),
            history_retention::round(&second, "n2", rules(1)),
        );
        for round in [a.expect("n1 round"), b.expect("n2 round")] {
            match round {
                Round::Ran { removed: r, .. } => removed += r.intents,
                Round::Skipped => skipped += 1,
            }
        }
    }
    assert_eq!(removed, total as u64);
    eprintln!("rounds skipped while the other node ran one: {skipped}");
}

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
    let status = history_retention::status(&db.pool).await.expect("status");
    assert_eq!(
        status.removed_total,
        old.len() as i64,
        "each removed once: {status:?}"
    );
    let text = client
        .get(format!("{}/metrics", daemons[0].base()))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    for metric in [
        "txmgr_history_retention_rounds_total",
        "txmgr_history_retain_seconds 604800",
        "txmgr_history_oldest_final_age_seconds",
        "txmgr_db_table_bytes{table=\"managed_tx\"}",
    ] {
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
