//! Lease work per node, not per submitter (README "Data model and leases" and "Benchmark",
//! issue 13): one statement renews every lease a node holds, idle leaders
//! release their leases and renew nothing, a create brings one back at once,
//! and a node killed while holding many leases has them all taken over.

use crate::common::node::{FAST_LEASE, FAST_NODE, FAST_POLL};
use std::time::Duration;

use crate::common::{
    daemon::DEV_KEYS, eventually, invariants, node::TestNode, wait_until, Anvil, TestDb,
};
use alloy::signers::local::PrivateKeySigner;
use serde_json::json;
use sqlx::PgPool;

const TO: &str = "0x000000000000000000000000000000000000dead";
/// Configured submitters that never get a create.
const UNUSED: usize = 40;

fn key_var(i: usize) -> String {
    format!("TXMGR_TEST_LEASE_KEY_{i}")
}

/// A node leading the funded dev accounts and `UNUSED` more submitters
/// with fresh keys; leaders release their lease after `idle` of nothing open.
fn config(db: &str, rpc: &str, node_id: &str, idle: &str) -> String {
    let mut toml = format!(
        r#"
node_id = "{node_id}"
[database]
url = "{db}"
max_connections = 8
[chain]
rpc_url = "{rpc}"
chain_id = 31337
{FAST_POLL}
{FAST_LEASE}
idle_release_after = "{idle}"
{FAST_NODE}
rebalance = false
[defaults]
finality = {{ confirmations = 1 }}
"#
    );
    for (i, (key, address)) in DEV_KEYS.iter().enumerate() {
        std::env::set_var(key_var(i), key);
        toml.push_str(&submitter(address, &key_var(i)));
    }
    for i in 0..UNUSED {
        let var = key_var(100 + i);
        // The same fresh key for every test: set once, never changed.
        let signer = PrivateKeySigner::from_bytes(&alloy::primitives::B256::repeat_byte(
            u8::try_from(i + 1).unwrap_or(1),
        ))
        .expect("key");
        std::env::set_var(
            &var,
            alloy::primitives::hex::encode_prefixed(signer.to_bytes()),
        );
        toml.push_str(&submitter(&format!("{:#x}", signer.address()), &var));
    }
    toml
}

fn submitter(address: &str, var: &str) -> String {
    format!(
        "[submitters.\"{}\"]\nsigner = {{ kind = \"env\", env = \"{var}\" }}\n",
        address.to_lowercase()
    )
}

async fn create(node: &TestNode, index: usize, request_id: &str) {
    let body =
        json!({"submitter": DEV_KEYS[index].1, "to": TO, "value": "1", "request_id": request_id});
    let (status, answer) = node.request("POST", "/v1/transactions", Some(body)).await;
    assert_eq!(status, 202, "{answer}");
}

/// `(submitter, updated_at as text, live)` of every lease row.
async fn lease_rows(pool: &PgPool) -> Vec<(String, String, bool)> {
    sqlx::query_as(
        "SELECT submitter, updated_at::text, expires_at > now() FROM submitter_lease ORDER BY submitter",
    )
    .fetch_all(pool)
    .await
    .expect("lease rows")
}

async fn confirmed(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM managed_tx WHERE state = 'CONFIRMED'")
        .fetch_one(pool)
        .await
        .expect("count")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_held_lease_is_renewed_by_one_statement() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--block-time", "0.2"]).await;
    let node = TestNode::start(&config(&db.url, &anvil.rpc_url(), "a", "1h")).await;
    for i in 0..DEV_KEYS.len() {
        create(&node, i, &format!("one-{i}")).await;
    }
    invariants::wait_mined(&db.pool, DEV_KEYS.len() as i64, Duration::from_secs(30)).await;
    assert_eq!(node.engine.leases_held(), DEV_KEYS.len());
    // Each lease was acquired by its own statement; after the next keeper
    // round they all carry that one statement's `now()`.
    wait_until(Duration::from_secs(10), || async {
        let rows = lease_rows(&db.pool).await;
        let stamps: std::collections::HashSet<&String> = rows.iter().map(|(_, t, _)| t).collect();
        rows.len() == DEV_KEYS.len() && rows.iter().all(|(_, _, live)| *live) && stamps.len() == 1
    })
    .await;
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn idle_leaders_release_their_leases_renew_nothing_and_come_back_on_a_create() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--block-time", "0.2"]).await;
    // The linger outlasts two renew intervals, so the renewal checked below
    // always falls inside it.
    let node = TestNode::start(&config(&db.url, &anvil.rpc_url(), "a", "3s")).await;
    let used = 4;
    for i in 0..used {
        create(&node, i, &format!("once-{i}")).await;
    }
    wait_until(Duration::from_secs(30), || async {
        confirmed(&db.pool).await == used as i64
    })
    .await;

    // After the linger: no lease held or renewed, no actor running.
    wait_until(Duration::from_secs(15), || async {
        let rows = lease_rows(&db.pool).await;
        node.engine.leases_held() == 0
            && rows.iter().all(|(_, _, live)| !*live)
            && node.engine.handles().iter().all(|h| h.actor().is_none())
    })
    .await;
    let idle = lease_rows(&db.pool).await;
    assert_eq!(
        idle.len(),
        used,
        "only used submitters ever had a lease: {idle:?}"
    );

    // A create brings its submitter back at once; the others stay untouched
    // while its lease is acquired and renewed by the keeper at least once.
    // Watched from before the create: the lease lives for the confirmation
    // plus the linger, and a renewal inside that window is seen as a second
    // stamp under the same fencing token.
    let first = DEV_KEYS[0].1.to_lowercase();
    let seen: std::sync::Arc<
        std::sync::Mutex<std::collections::HashMap<i64, std::collections::HashSet<String>>>,
    > = Default::default();
    create(&node, 0, "again-0").await;
    eventually(Duration::from_secs(30), Duration::from_millis(20), || {
        let pool = db.pool.clone();
        let first = first.clone();
        let seen = seen.clone();
        async move {
            let (token, stamp): (i64, String) = sqlx::query_as(
                "SELECT fencing_token, updated_at::text FROM submitter_lease \
                 WHERE submitter = $1 AND expires_at > now()",
            )
            .bind(&first)
            .fetch_optional(&pool)
            .await
            .expect("lease row")?;
            let mut seen = seen.lock().expect("not poisoned");
            let stamps = seen.entry(token).or_default();
            stamps.insert(stamp);
            (stamps.len() >= 2).then_some(())
        }
    })
    .await;
    wait_until(Duration::from_secs(30), || async {
        confirmed(&db.pool).await == used as i64 + 1
    })
    .await;
    let now = lease_rows(&db.pool).await;
    for (before, after) in idle.iter().zip(&now) {
        if before.0 != first {
            assert_eq!(before, after, "an idle submitter's lease row changed");
        }
    }
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_killed_holding_many_leases_has_them_all_taken_over() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--block-time", "0.2"]).await;
    let a = TestNode::start(&config(&db.url, &anvil.rpc_url(), "a", "1h")).await;
    for i in 0..DEV_KEYS.len() {
        create(&a, i, &format!("via-a-{i}")).await;
    }
    invariants::wait_mined(&db.pool, DEV_KEYS.len() as i64, Duration::from_secs(30)).await;
    assert_eq!(a.engine.leases_held(), DEV_KEYS.len());
    let b = TestNode::start(&config(&db.url, &anvil.rpc_url(), "b", "1h")).await;
    a.kill();
    // New work for every submitter reaches b while a's leases still look live.
    for i in 0..DEV_KEYS.len() {
        create(&b, i, &format!("via-b-{i}")).await;
    }
    // b's lease scan takes every one over once it lapses (duration + skew).
    wait_until(Duration::from_secs(15), || async {
        let owners: Vec<(String, bool)> =
            sqlx::query_as("SELECT owner_node, expires_at > now() FROM submitter_lease")
                .fetch_all(&db.pool)
                .await
                .expect("owners");
        owners.len() == DEV_KEYS.len() && owners.iter().all(|(o, live)| o == "b" && *live)
    })
    .await;
    wait_until(Duration::from_secs(30), || async {
        confirmed(&db.pool).await == 2 * DEV_KEYS.len() as i64
    })
    .await;
    assert_eq!(b.engine.leases_held(), DEV_KEYS.len());
    for (_, address) in DEV_KEYS {
        invariants::check(&db.pool, &anvil, address, 0).await;
    }
    b.stop().await;
}
