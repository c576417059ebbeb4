//! Claim before send: however many claimers race one due time — the timer
//! and the sweep of one leader, or two nodes across a take-over — exactly
//! one of them acts on it, and a node without the lease acts on nothing.

mod common;

use std::{sync::Arc, time::Duration};

use common::{
    invariants,
    node::{config_toml, TestNode},
    txs::{attempts, create_transfer, wait_state},
    wait_until, Anvil, TestDb, DEV_ADDRESS_0,
};
use txmgr_actors::{
    store::{self, resubmit},
    FencedTx, LeaseRequest, SubmitterKey,
};

const WAIT: Duration = Duration::from_secs(30);

fn request(node: &str) -> LeaseRequest {
    LeaseRequest {
        submitter: SubmitterKey::new(31337, DEV_ADDRESS_0.parse().expect("address")),
        node_id: Arc::from(node),
        duration: Duration::from_secs(30),
        clock_skew: Duration::from_millis(500),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_claims_of_one_due_time_are_disjoint_and_a_stale_holder_claims_nothing() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let toml = config_toml(
        &db.url,
        &anvil.rpc_url(),
        "n1",
        r#"resubmit_interval = "60s""#,
    );
    let node = TestNode::start(&toml).await;
    let mut ids = Vec::new();
    for i in 0..12 {
        ids.push(create_transfer(&node, &format!("c{i}"), 1).await);
    }
    for id in &ids {
        wait_state(&db.pool, *id, "TRACKING", WAIT).await;
    }
    node.stop().await;

    // Everything is due now; two claimers holding the same lease race.
    let lease = store::acquire_or_renew(&db.pool, &request("t"))
        .await
        .expect("lease")
        .lease()
        .cloned()
        .expect("t leads");
    sqlx::query("UPDATE managed_tx SET next_resubmit_at = now() - interval '1 second'")
        .execute(&db.pool)
        .await
        .expect("make due");
    let claim = |lease: store::LeaseGuard, pool: sqlx::PgPool| async move {
        let mut ftx = FencedTx::begin(&pool, &lease, "claim_resubmit")
            .await
            .expect("fenced");
        let claimed = resubmit::claim_due(&mut ftx, None, 7, Duration::from_secs(60))
            .await
            .expect("claim");
        ftx.commit().await.expect("commit");
        claimed.into_iter().map(|c| c.tx_id).collect::<Vec<_>>()
    };
    let mut claimed = Vec::new();
    loop {
        let (a, b) = tokio::join!(
            claim(lease.clone(), db.pool.clone()),
            claim(lease.clone(), db.pool.clone())
        );
        if a.is_empty() && b.is_empty() {
            break;
        }
        claimed.extend(a);
        claimed.extend(b);
    }
    let mut unique = claimed.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), claimed.len(), "an intent was claimed twice");
    let mut expected = ids.clone();
    expected.sort_unstable();
    assert_eq!(unique, expected, "every due intent claimed exactly once");
    let resubmits: Vec<i32> = sqlx::query_scalar("SELECT resubmits FROM managed_tx")
        .fetch_all(&db.pool)
        .await
        .expect("resubmits");
    assert!(resubmits.iter().all(|r| *r == 1), "{resubmits:?}");

    // Another node takes the lease over: the old holder's claim is fenced.
    store::release(&db.pool, &lease).await.expect("release");
    store::acquire_or_renew(&db.pool, &request("u"))
        .await
        .expect("lease")
        .lease()
        .cloned()
        .expect("u leads");
    sqlx::query("UPDATE managed_tx SET next_resubmit_at = now() - interval '1 second'")
        .execute(&db.pool)
        .await
        .expect("make due");
    let stale = FencedTx::begin(&db.pool, &lease, "claim_resubmit").await;
    assert!(
        matches!(&stale, Err(e) if e.is_fenced()),
        "a stale holder must be fenced"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_nodes_across_a_take_over_bump_once_per_due_time() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let interval_ms = 500;
    let extra = format!(
        "resubmit_interval = \"{interval_ms}ms\"\nmax_resubmits = 1000\ngas_bump = {{ enabled = true }}\n\
         finality = {{ confirmations = 1 }}"
    );
    let a = TestNode::start(&config_toml(&db.url, &anvil.rpc_url(), "a", &extra)).await;
    let b = TestNode::start(&config_toml(&db.url, &anvil.rpc_url(), "b", &extra)).await;
    let tx_id = create_transfer(&a, "raced", 1).await;
    wait_until(WAIT, || async {
        attempts(&db.pool, tx_id).await.len() >= 3
    })
    .await;

    // Crash whichever node leads; the other takes over and carries on.
    let owner: String = sqlx::query_scalar("SELECT owner_node FROM submitter_lease")
        .fetch_one(&db.pool)
        .await
        .expect("lease");
    let (dead, survivor) = if owner == "a" { (a, b) } else { (b, a) };
    let before = attempts(&db.pool, tx_id).await.len();
    dead.kill();
    wait_until(WAIT, || async {
        attempts(&db.pool, tx_id).await.len() >= before + 3
    })
    .await;
    anvil.mine().await;
    wait_state(&db.pool, tx_id, "CONFIRMED", WAIT).await;
    survivor.stop().await;

    let all = attempts(&db.pool, tx_id).await;
    for pair in all.windows(2) {
        let gap = pair[1].created_ms - pair[0].created_ms;
        // Each claim moves the due time on by the interval, so two attempts
        // are never closer than that (less the claim-to-insert latency).
        assert!(
            gap >= interval_ms - 150,
            "attempts {} and {} only {gap} ms apart: {all:?}",
            pair[0].attempt_no,
            pair[1].attempt_no
        );
        assert!(pair[1].max_fee * 10 >= pair[0].max_fee * 11);
    }
    let owners: Vec<String> =
        sqlx::query_scalar("SELECT DISTINCT fencing_token::text FROM tx_attempt WHERE tx_id = $1")
            .bind(tx_id)
            .fetch_all(&db.pool)
            .await
            .expect("tokens");
    assert_eq!(owners.len(), 2, "attempts from both leaders: {owners:?}");
    invariants::check(&db.pool, &anvil, DEV_ADDRESS_0, 0).await;
}
